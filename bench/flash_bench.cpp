// Flash queries: hit latency end to end over HTTP on loopback, and the cost of a flash round of k questions
// (each on a fork of the session, all in the same passes) against one standard query. Same model and threads,
// one run. Prints markdown for bench/update_docs.py, headed by the commit and this command line as typed;
// never asserts.
//
//   aoi-bench-flash [--model FILE] [--threads N] [--depth TOKENS] [--hits N] [--ks 1,4,16]
#include <CLI/CLI.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "aoi/server/server.h"
#include "aoi/service/service.h"
#include "aoi/workload/ohlcv.h"
#include "provenance.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::vector<std::string> bars(int n, int first) {
  aoi::workload::OhlcvGenerator gen({.seed = 5});
  std::vector<std::string> out;
  for (int i = 0; i < first + n; ++i) {
    const auto b = gen.next();
    if (i >= first) out.push_back(aoi::workload::format_bar(b));
  }
  return out;
}

std::unique_ptr<aoi::service::Service> start(const std::string& model, int threads, int depth) {
  aoi::service::ServiceParams p;
  p.model.path = model;
  // Four sequences (two sessions, a completion slot, a spare), each the data and a round of questions.
  p.context.n_ctx = static_cast<std::uint32_t>(4 * (depth + 4096));
  p.context.n_batch = p.context.n_ubatch = 512;
  p.context.n_threads = p.context.n_threads_batch = threads;
  p.max_sessions = 2;
  p.pool_slots = 1;
  p.max_flash = 16;
  return aoi::service::Service::start(p).value();
}

void fill(aoi::service::Service& svc, int depth) {
  aoi::session::SessionConfig c;
  c.id = "bench";
  c.system = "You are a market analyst. The lines below are hourly OHLCV bars for one stock.";
  // The data, and the bars the rounds push (one per round), within the sequence's cells.
  c.retention.max_tokens = depth + 1024;
  c.query_budget = 128;
  svc.run(aoi::service::CreateSession{c}).value();
  const auto last = svc.push_text(svc.handle("bench"), bars(depth / 35 + 1, 0)).value().last_seq;
  while (svc.session("bench")->last_seq_ingested < last) std::this_thread::sleep_for(5ms);
}

const std::vector<std::string> kQuestions = {"Is the trend UP or DOWN?",   "What was the last close?",
                                             "Was there a pullback?",      "Is the price consolidating?",
                                             "Is volume rising?",          "What was the highest high?",
                                             "What was the lowest low?",   "Did the close beat the open?",
                                             "Is momentum strong?",        "Any volume spike?",
                                             "Is it a new high?",          "How volatile is it?",
                                             "What was the last open?",    "Is the range narrowing?",
                                             "Is the trend accelerating?", "What was the last volume?"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi flash benchmark"};
  std::string model = "models/smollm2-135m-q8_0.gguf";
  int threads = 2, depth = 2000, hits = 2000, answer_tokens = 4, rounds = 3;
  std::vector<int> ks = {1, 4, 16};
  app.add_option("-m,--model", model)->check(CLI::ExistingFile);
  app.add_option("-t,--threads", threads);
  app.add_option("--depth", depth, "tokens of data in the session");
  app.add_option("--hits", hits, "flash-hit requests over HTTP");
  app.add_option("--answer-tokens", answer_tokens, "tokens per flash answer");
  app.add_option("--rounds", rounds, "flash rounds timed per k");
  app.add_option("--ks", ks, "questions per round")->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  std::printf("%s\n\n", aoi::bench::measured_line(argc, argv).c_str());
  std::printf("model %s, %d threads, %d tokens of data, %d answer tokens per flash question\n\n", model.c_str(),
              threads, depth, answer_tokens);

  // ---- Flash-hit latency over HTTP ----
  {
    auto svc = start(model, threads, depth);
    std::printf("KV cache %s\n\n", svc->stats().kv_cache_choice.c_str());
    fill(*svc, depth);
    svc->add_flash(svc->handle("bench"), {kQuestions[0], answer_tokens}).value();
    const auto v = svc->session("bench")->data_version;
    while (!svc->handle("bench")->flash().lookup(kQuestions[0], v, answer_tokens)) std::this_thread::sleep_for(5ms);
    aoi::server::ServerOptions so;
    so.port = 0;
    aoi::server::Server server(so);
    server.listen().ok();
    server.set_service(svc.get());

    net::io_context ioc;
    net::ip::tcp::socket socket(ioc);
    socket.connect({net::ip::make_address("127.0.0.1"), server.port()});
    beast::flat_buffer buffer;
    const std::string body = nlohmann::json{{"question", kQuestions[0]}, {"max_tokens", answer_tokens}}.dump();
    std::vector<double> ms;
    int flash = 0;
    for (int i = 0; i < hits + 100; ++i) {
      http::request<http::string_body> req{http::verb::post, "/v1/sessions/bench/query", 11};
      req.set(http::field::host, "127.0.0.1");
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
      const auto t0 = Clock::now();
      http::write(socket, req);
      http::response<http::string_body> res;
      http::read(socket, buffer, res);
      const double elapsed = ms_since(t0);
      if (i >= 100) {  // warm-up excluded
        ms.push_back(elapsed);
        flash += res.body().find("\"path\":\"flash\"") != std::string::npos ? 1 : 0;
      }
    }
    std::printf("## Flash hit over HTTP (loopback, keep-alive, %d requests)\n\n", hits);
    std::printf("| p50 ms | p90 ms | p99 ms | max ms | flash path |\n|---:|---:|---:|---:|---:|\n");
    std::printf("| %.3f | %.3f | %.3f | %.3f | %d/%d |\n\n", percentile(ms, 0.5), percentile(ms, 0.9),
                percentile(ms, 0.99), *std::max_element(ms.begin(), ms.end()), flash, hits);
    server.stop();
  }

  // ---- Flash round cost per question ----
  std::printf("## Flash round cost (%d rounds each, %d tokens of data)\n\n", rounds, depth);
  std::printf("| k | round ms | ms per question | vs one standard query |\n|---:|---:|---:|---:|\n");
  double standard_ms = 0;
  {
    auto svc = start(model, threads, depth);
    fill(*svc, depth);
    if (standard_ms == 0) {
      // One standard query of the same shape (a never-occurring stop string keeps it off the flash cache).
      std::vector<double> s;
      for (int i = 0; i < 3; ++i) {
        aoi::service::QueryRequest q;
        q.question = kQuestions[1];
        q.generation.max_tokens = answer_tokens;
        q.generation.stop = {"\x01"};
        s.push_back(svc->query(svc->handle("bench"), q).value().answer.total_ms);
      }
      standard_ms = percentile(s, 0.5);
    }
    int registered = 0;
    int bar = depth / 35 + 1;
    for (int k : ks) {
      while (registered < k)
        svc->add_flash(svc->handle("bench"), {kQuestions[static_cast<size_t>(registered++)], answer_tokens}).value();
      std::vector<double> round;
      for (int r = 0; r < rounds + 1; ++r) {
        const auto before = svc->session("bench")->flash_rounds;
        svc->push_text(svc->handle("bench"), bars(1, bar++)).value();
        while (svc->session("bench")->flash_rounds <= before) std::this_thread::sleep_for(2ms);
        // Wait for the round of the newest version (a registration may have started one).
        const auto v = svc->session("bench")->data_version;
        while (!svc->handle("bench")->flash().lookup(kQuestions[0], v, answer_tokens)) std::this_thread::sleep_for(2ms);
        if (r > 0) round.push_back(svc->session("bench")->flash_ms);
      }
      const double med = percentile(round, 0.5);
      std::printf("| %d | %.1f | %.1f | %.2fx |\n", k, med, med / k, med / standard_ms);
      std::fflush(stdout);
    }
  }
  std::printf("\none standard query (question + %d answer tokens): %.1f ms\n", answer_tokens, standard_ms);
  return 0;
}
