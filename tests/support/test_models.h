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

// The model, loaded once per test binary, without a fallback chat template. Null when missing (the caller
// skips).
engine::Model* shared_model(const std::string& name);

// A context on `model` with small, test-friendly defaults.
std::unique_ptr<engine::Context> make_context(engine::Model& model, engine::ContextParams params = {});

}  // namespace aoi::test

// Skips the test when the model is not there (e.g. shared/models missing), with a reason.
#define AOI_REQUIRE_MODEL(var, name)                           \
  ::aoi::engine::Model* var = ::aoi::test::shared_model(name); \
  if (var == nullptr) GTEST_SKIP() << "test model " << (name) << " is not available"
