// A server that listens before its service is ready (aoi serve binds first, then loads the model and reads the
// data directory back): liveness and readiness say "loading", every other route 503 not_ready.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "aoi/server/server.h"

namespace aoi::server {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using nlohmann::json;

struct Answer {
  int status = 0;
  json body;
};

Answer get(std::uint16_t port, const std::string& target) {
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), port});
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {static_cast<int>(res.result_int()), json::parse(res.body(), nullptr, /*allow_exceptions=*/false)};
}

TEST(ServerLoading, HealthAndReadyAnswerLoadingUntilTheServiceIsSet) {
  ServerOptions options;
  options.port = 0;
  options.io_threads = 1;
  options.api_keys = {"k"};  // /health and /ready answer without one all the same
  Server server(options);
  ASSERT_TRUE(server.listen());
  ASSERT_NE(server.port(), 0);

  for (const std::string target : {"/health", "/ready"}) {
    const Answer a = get(server.port(), target);
    EXPECT_EQ(a.status, 503) << target;
    EXPECT_EQ(a.body, json({{"status", "loading"}})) << target;
  }
  // A route that needs a key still needs one; with none it says nothing more.
  EXPECT_EQ(get(server.port(), "/v1/sessions").status, 401);
  server.stop();
}

TEST(ServerLoading, OtherRoutesAreNotReady) {
  ServerOptions options;
  options.port = 0;
  options.io_threads = 1;
  Server server(options);
  ASSERT_TRUE(server.listen());
  for (const std::string target : {"/v1/sessions", "/openapi.json", "/v1/models"}) {
    const Answer a = get(server.port(), target);
    EXPECT_EQ(a.status, 503) << target;
    EXPECT_EQ(a.body["type"], "error") << target;
    EXPECT_EQ(a.body["error"]["type"], "not_ready") << target;
  }
  server.stop();
}

}  // namespace
}  // namespace aoi::server
