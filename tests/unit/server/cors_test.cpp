// CORS (cors.h): which origins --allowed-origins accepts, and the headers each kind of request gets.
#include "cors.h"

#include <gtest/gtest.h>

#include <string>

namespace aoi::server {
namespace {

namespace http = boost::beast::http;

Request request(http::verb method, std::string origin, std::string asked_method = {}) {
  Request req{method, "/v1/sessions", 11};
  if (!origin.empty()) req.set("Origin", origin);
  if (!asked_method.empty()) req.set("Access-Control-Request-Method", asked_method);
  return req;
}

ServerOptions allowing(std::vector<std::string> origins) {
  ServerOptions o;
  o.allowed_origins = std::move(origins);
  return o;
}

std::string value(const HeaderLines& lines, std::string_view name) {
  for (const auto& [n, v] : lines) {
    if (n == name) return v;
  }
  return "(absent)";
}

TEST(Cors, OriginsAreCheckedAsBrowsersWriteThem) {
  EXPECT_TRUE(check_allowed_origins({}));
  EXPECT_TRUE(check_allowed_origins({"*"}));
  EXPECT_TRUE(check_allowed_origins({"https://app.example.com", "http://127.0.0.1:5173", "http://[::1]:8080",
                                     "chrome-extension://abcdefghijklmnop", "tauri://localhost"}));
  for (const std::string bad : {"https://app.example.com/", "app.example.com", "null", "https://", "https://a:b",
                                "https://a:", "https://a:0", "https://a:65536", "https://a:443", "http://a:80",
                                "https://a b", "https://[::1", "https://ü.example", "https://a/path", "://a"}) {
    const Status st = check_allowed_origins({"https://ok.example", bad});
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().field, "allowed-origins") << bad;
  }
}

TEST(Cors, OffMeansNoHeadersAtAll) {
  const ServerOptions off;
  EXPECT_TRUE(cors_headers(off, request(http::verb::get, "https://app.example.com")).empty());
  EXPECT_TRUE(cors_headers(off, request(http::verb::options, "https://app.example.com", "GET")).empty());
}

TEST(Cors, AnAllowedOriginIsNamedAndTheResponseVariesByOrigin) {
  const auto options = allowing({"https://App.Example.com"});
  const auto ok = cors_headers(options, request(http::verb::get, "https://app.example.com"));
  EXPECT_EQ(value(ok, "Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(value(ok, "Vary"), "Origin");
  EXPECT_NE(value(ok, "Access-Control-Expose-Headers").find("Retry-After"), std::string::npos);
  EXPECT_NE(value(ok, "Access-Control-Expose-Headers").find("X-Aoi-Last-Seq"), std::string::npos);
  EXPECT_EQ(value(ok, "Access-Control-Allow-Credentials"), "(absent)");

  // Another origin, another port, no Origin at all: only Vary.
  for (const std::string origin : {"https://evil.example", "https://app.example.com:8443", ""}) {
    const auto lines = cors_headers(options, request(http::verb::get, origin));
    ASSERT_EQ(lines.size(), 1u) << origin;
    EXPECT_EQ(value(lines, "Vary"), "Origin");
  }
}

TEST(Cors, AStarAllowsAnyOriginWithAStar) {
  const auto lines = cors_headers(allowing({"*"}), request(http::verb::get, "https://anything.example"));
  EXPECT_EQ(value(lines, "Access-Control-Allow-Origin"), "*");
}

TEST(Cors, APreflightIsAnsweredForAnAllowedOriginOnly) {
  const auto options = allowing({"https://app.example.com"});
  auto req = request(http::verb::options, "https://app.example.com", "POST");
  EXPECT_TRUE(is_preflight(req));
  EXPECT_FALSE(is_preflight(request(http::verb::options, "https://app.example.com")));
  EXPECT_FALSE(is_preflight(request(http::verb::get, "https://app.example.com", "POST")));

  req.set("Access-Control-Request-Headers", "authorization, X-Stainless-OS,content-type, bad header, a:b");
  req.set("Access-Control-Request-Private-Network", "true");
  auto res = preflight_response(options, req, "POST, GET");
  EXPECT_EQ(res.result(), http::status::no_content);
  EXPECT_EQ(res["Access-Control-Allow-Methods"], "POST, GET");
  EXPECT_EQ(res["Access-Control-Allow-Headers"],
            "Authorization, Content-Type, Last-Event-ID, x-api-key, anthropic-version, X-Stainless-OS");
  EXPECT_EQ(res["Access-Control-Max-Age"], "600");
  EXPECT_EQ(res["Access-Control-Allow-Private-Network"], "true");
  add_cors_headers(options, req, res);
  EXPECT_EQ(res["Access-Control-Allow-Origin"], "https://app.example.com");
  EXPECT_EQ(res["Vary"], "Origin, Access-Control-Request-Headers");
  EXPECT_EQ(res.count("Access-Control-Expose-Headers"), 0u);

  auto other = request(http::verb::options, "https://evil.example", "POST");
  auto refused = preflight_response(options, other, "POST, GET");
  EXPECT_EQ(refused.result(), http::status::forbidden);
  EXPECT_NE(refused.body().find("https://evil.example"), std::string::npos);
  add_cors_headers(options, other, refused);
  EXPECT_EQ(refused.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(refused.count("Access-Control-Allow-Methods"), 0u);
}

TEST(Cors, AVaryAlreadyThereIsExtended) {
  const auto options = allowing({"*"});
  const auto req = request(http::verb::get, "https://a.example");
  http::response<http::string_body> res{http::status::ok, 11};
  res.set(http::field::vary, "Accept-Encoding");
  add_cors_headers(options, req, res);
  EXPECT_EQ(res[http::field::vary], "Accept-Encoding, Origin");
}

}  // namespace
}  // namespace aoi::server
