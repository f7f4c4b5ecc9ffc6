// The OpenAPI description compiled into the server (src/server/openapi.json, served at GET /openapi.json): its
// shape, and that it names exactly the routes the server dispatches on (all_routes()), no more and no fewer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "http.h"
#include "web_assets.h"

namespace aoi::server {
namespace {

using nlohmann::json;

json document() {
  const auto files = openapi_assets();
  EXPECT_EQ(files.size(), 1u);
  EXPECT_EQ(files.front().name, "openapi.json");
  return json::parse(files.front().body);
}

const std::set<std::string> kMethods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "#/components/schemas/Session" within the document; null when it does not resolve.
const json* resolve(const json& doc, const std::string& ref) {
  if (ref.rfind("#/", 0) != 0) return nullptr;
  const json::json_pointer pointer(ref.substr(1));
  return doc.contains(pointer) ? &doc.at(pointer) : nullptr;
}

void collect_refs(const json& node, const std::string& where, std::vector<std::pair<std::string, std::string>>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "$ref" && value.is_string()) out.emplace_back(where, value.get<std::string>());
      collect_refs(value, where + "/" + key, out);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) collect_refs(node[i], where + "/" + std::to_string(i), out);
  }
}

TEST(OpenApi, IsAnOpenApi31Document) {
  const json doc = document();
  EXPECT_EQ(doc.value("openapi", ""), "3.1.0");
  ASSERT_TRUE(doc.contains("info") && doc["info"].is_object());
  EXPECT_TRUE(doc["info"].contains("title") && doc["info"]["title"].is_string());
  EXPECT_TRUE(doc["info"].contains("version") && doc["info"]["version"].is_string());
  ASSERT_TRUE(doc.contains("paths") && doc["paths"].is_object());
  EXPECT_FALSE(doc["paths"].empty());

  std::vector<std::pair<std::string, std::string>> refs;
  collect_refs(doc, "", refs);
  EXPECT_GT(refs.size(), 20u);
  for (const auto& [where, ref] : refs) EXPECT_NE(resolve(doc, ref), nullptr) << where << ": " << ref;

  std::set<std::string> operation_ids;
  const std::regex template_param(R"(\{([^}]+)\})");
  for (const auto& [path, item] : doc["paths"].items()) {
    EXPECT_TRUE(path.starts_with("/")) << path;
    std::set<std::string> in_path;
    for (std::sregex_iterator it(path.begin(), path.end(), template_param), end; it != end; ++it) {
      in_path.insert((*it)[1]);
    }
    for (const auto& [method, operation] : item.items()) {
      SCOPED_TRACE(method + " " + path);
      ASSERT_TRUE(kMethods.contains(method)) << "not an HTTP method";
      const std::string id = operation.value("operationId", "");
      EXPECT_FALSE(id.empty());
      EXPECT_TRUE(operation_ids.insert(id).second) << "operationId " << id << " twice";
      ASSERT_TRUE(operation.contains("responses") && operation["responses"].is_object());
      EXPECT_FALSE(operation["responses"].empty());
      // Every {name} of the path is a required path parameter, and every path parameter is in the path.
      std::set<std::string> declared;
      for (const json& p : operation.value("parameters", json::array())) {
        const json* param = p.contains("$ref") ? resolve(doc, p["$ref"].get<std::string>()) : &p;
        ASSERT_NE(param, nullptr);
        if (param->value("in", "") != "path") continue;
        EXPECT_TRUE(param->value("required", false)) << param->value("name", "");
        declared.insert(param->value("name", ""));
      }
      EXPECT_EQ(declared, in_path);
    }
  }
}

// The routes a client may call: those the server dispatches on, each with its method, and whether it answers
// without a key (an operation with an empty `security`).
TEST(OpenApi, NamesEveryRouteTheServerHasAndNoOther) {
  const json doc = document();
  std::set<std::string> served, described, served_public, described_public;
  for (const Route& route : all_routes()) {
    const std::string name = lower(std::string(sv(http::to_string(route.method)))) + " " + route.pattern;
    EXPECT_TRUE(served.insert(name).second) << name << " twice in the route table";
    if (route.is_public) served_public.insert(name);
  }
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, operation] : item.items()) {
      const std::string name = method + " " + path;
      described.insert(name);
      if (operation.contains("security") && operation["security"].empty()) described_public.insert(name);
    }
  }
  std::vector<std::string> undocumented, unserved;
  std::set_difference(served.begin(), served.end(), described.begin(), described.end(),
                      std::back_inserter(undocumented));
  std::set_difference(described.begin(), described.end(), served.begin(), served.end(), std::back_inserter(unserved));
  EXPECT_TRUE(undocumented.empty()) << "routes missing from src/server/openapi.json: " << json(undocumented).dump();
  EXPECT_TRUE(unserved.empty()) << "paths in src/server/openapi.json the server has no route for: "
                                << json(unserved).dump();
  EXPECT_EQ(served_public, described_public) << "public routes (no key) and operations with \"security\": []";
}

}  // namespace
}  // namespace aoi::server
