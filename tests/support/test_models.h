// Access to the models generated for the tests (see scripts/make-test-models.sh).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"

namespace aoi::test {

// Path of a test model ("test-micro", "stories260K"); empty when it does not exist.
std::string model_path(const std::string& name);

// How a test loads the model: its path, and where the environment names an offload device (the non-host
// stage of scripts/test.sh: AOI_TEST_RPC=HOST:PORT adds an rpc-server's device; AOI_TEST_DEVICE=NAME[,NAME]
// chooses devices, a GPU's on a machine with one), every layer and the KV cache on it.
engine::ModelParams model_params(const std::string& name);

// The model, loaded once per test binary, without a fallback chat template. Null when it is missing or does
// not load: the caller fails (AOI_REQUIRE_MODEL), saying why (model_problem).
engine::Model* shared_model(const std::string& name);

// Why a test model is not there: the path it was looked for at and who makes it, or the load error. Every
// test model is made by the suite's "models" fixture (scripts/make-test-models.sh, stories260K from
// ../shared/models), so a missing one is a failure, never a reason to skip.
std::string model_problem(const std::string& name);

// Threads a test's context decodes and prefills with: AOI_TEST_THREADS when set, else the engine's default.
// scripts/test.sh sets 1, since CTest runs as many tests at once as there are cores: with more threads than
// cores, ggml's threads spin at each of a pass's barriers for one that is not running.
void use_test_threads(engine::ContextParams& params);

// A context on `model` with small, test-friendly defaults (and the test threads).
std::unique_ptr<engine::Context> make_context(engine::Model& model, engine::ContextParams params = {});

}  // namespace aoi::test

// Fails the test when the model is not there or does not load, saying why.
#define AOI_REQUIRE_MODEL(var, name)                           \
  ::aoi::engine::Model* var = ::aoi::test::shared_model(name); \
  ASSERT_NE(var, nullptr) << ::aoi::test::model_problem(name)

// Fails the test when the model's file is not there (for tests that load it themselves).
#define AOI_REQUIRE_MODEL_FILE(name) \
  ASSERT_FALSE(::aoi::test::model_path(name).empty()) << ::aoi::test::model_problem(name)
