#include "test_models.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace aoi::test {

std::string model_path(const std::string& name) {
  const char* env = std::getenv("AOI_TEST_MODELS_DIR");
  const std::filesystem::path dir = env != nullptr ? env : AOI_TEST_MODELS_DIR;
  const auto path = dir / (name + ".gguf");
  return std::filesystem::exists(path) ? path.string() : std::string();
}

engine::Model* shared_model(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<engine::Model>> models;
  std::lock_guard lock(mu);
  auto it = models.find(name);
  if (it != models.end()) return it->second.get();
  const std::string path = model_path(name);
  if (path.empty()) return nullptr;
  engine::ModelParams params{.path = path};
  // Without the ChatML fallback: a model without a template (stories260K, a base model) keeps the plain
  // layout that its tests are written for.
  params.chat_template_fallback.clear();
  auto model = engine::Model::load(params);
  if (!model) return nullptr;
  return (models[name] = std::move(model).value()).get();
}

void use_test_threads(engine::ContextParams& params) {
  const char* env = std::getenv("AOI_TEST_THREADS");
  if (env == nullptr || *env == '\0') return;
  const int threads = std::atoi(env);
  if (threads < 1) {
    ADD_FAILURE() << "AOI_TEST_THREADS=" << env << ": a number of threads, at least 1";
    return;
  }
  params.n_threads = params.n_threads_batch = threads;
}

std::unique_ptr<engine::Context> make_context(engine::Model& model, engine::ContextParams params) {
  use_test_threads(params);
  auto ctx = engine::Context::create(model, params);
  if (!ctx) {
    ADD_FAILURE() << "context: " << ctx.error().message;
    return nullptr;
  }
  return std::move(ctx).value();
}

}  // namespace aoi::test
