// Helpers of the stateless endpoints' tests (stateless_test.cpp: the caches; drafting_test.cpp: drafting): a
// service on a test model with the caches and drafting set as a test needs, and requests.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "aoi/service/service.h"
#include "service_support.h"
#include "test_models.h"

namespace aoi::service::stateless {

struct Options {
  std::string model = "test-micro";
  int pool_slots = 2;
  int prefix_cache_cells = -1;
  size_t response_cache = 0;  // off unless a test is about it: every request runs through the model
  bool deterministic_seed = false;
  int draft_max = 0;
  double fixed_rows = 6.0;
};

inline std::unique_ptr<Service> start(const Options& o) {
  ServiceParams p;
  p.model = test::model_params(o.model);
  p.context = {.n_ctx = static_cast<std::uint32_t>(2048 * (1 + o.pool_slots + 1)), .n_batch = 256, .n_ubatch = 256};
  test::use_test_threads(p.context);
  p.max_sessions = 1;
  p.pool_slots = o.pool_slots;
  p.prefix_cache_cells = o.prefix_cache_cells;
  p.response_cache = o.response_cache;
  p.deterministic_seed = o.deterministic_seed;
  p.loop.draft = {.max = o.draft_max, .fixed_rows = o.fixed_rows};
  auto s = Service::start(p);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

#define AOI_START(var, options, model_name) \
  AOI_REQUIRE_MODEL_FILE(model_name);       \
  auto var = start(options);                \
  ASSERT_TRUE(var) << "the service did not start"

inline std::string long_system() {
  std::string s = "You are the desk's assistant. ";
  for (int i = 0; i < 20; ++i) s += "Rule " + std::to_string(i) + ": quote figures exactly and keep answers short. ";
  return s;
}

inline GenerateRequest chat(std::vector<engine::ChatMessage> messages, int max_tokens = 8) {
  GenerateRequest r;
  r.messages = std::move(messages);
  r.generation.max_tokens = max_tokens;
  r.generation.keep_first_logits = true;
  return r;
}

// Runs each request at once and waits for all.
inline std::vector<Result<GenerateOutcome>> at_once(Service& svc, const std::vector<GenerateRequest>& requests) {
  std::vector<std::promise<Result<GenerateOutcome>>> promises(requests.size());
  svc.run_on_inference_thread([&] {
    for (size_t i = 0; i < requests.size(); ++i) {
      svc.generate(requests[i], end_only<GenerateOutcome>(
                                    [&, i](Result<GenerateOutcome> r) { promises[i].set_value(std::move(r)); }));
    }
  });
  std::vector<Result<GenerateOutcome>> out;
  for (auto& p : promises) out.push_back(p.get_future().get());
  return out;
}

}  // namespace aoi::service::stateless
