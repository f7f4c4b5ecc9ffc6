#include "test_models.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "aoi/engine/devices.h"

namespace aoi::test {

namespace {

std::filesystem::path models_dir() {
  const char* env = std::getenv("AOI_TEST_MODELS_DIR");
  return env != nullptr ? env : AOI_TEST_MODELS_DIR;
}

std::mutex models_mu;
// guarded by models_mu. Never freed: at exit a GPU backend's runtime may be gone before static destructors
// would free the weights (CUDA then reports an error and aborts the test binary).
std::map<std::string, std::unique_ptr<engine::Model>>& models =
    *new std::map<std::string, std::unique_ptr<engine::Model>>;
std::map<std::string, std::string> load_errors;  // guarded by models_mu

}  // namespace

std::string model_path(const std::string& name) {
  const auto path = models_dir() / (name + ".gguf");
  return std::filesystem::exists(path) ? path.string() : std::string();
}

engine::ModelParams model_params(const std::string& name) {
  engine::ModelParams params{.path = model_path(name)};
  const char* rpc = std::getenv("AOI_TEST_RPC");
  const char* device = std::getenv("AOI_TEST_DEVICE");
  const bool offload = (rpc != nullptr && *rpc != '\0') || (device != nullptr && *device != '\0');
  if (!offload) return params;
  if (rpc != nullptr && *rpc != '\0') {
    static const Status added = engine::add_rpc_servers({rpc});
    if (!added) ADD_FAILURE() << "AOI_TEST_RPC=" << rpc << ": " << added.error().message;
  }
  if (device != nullptr && *device != '\0') params.devices = {device};
  params.n_gpu_layers = -1;
  return params;
}

engine::Model* shared_model(const std::string& name) {
  std::lock_guard lock(models_mu);
  auto it = models.find(name);
  if (it != models.end()) return it->second.get();
  if (load_errors.count(name) != 0) return nullptr;
  const std::string path = model_path(name);
  if (path.empty()) return nullptr;
  engine::ModelParams params = model_params(name);
  // Without the ChatML fallback: a model without a template (stories260K, a base model) keeps the plain
  // layout that its tests are written for.
  params.chat_template_fallback.clear();
  auto model = engine::Model::load(params);
  if (!model) {
    load_errors[name] = model.error().message;
    return nullptr;
  }
  return (models[name] = std::move(model).value()).get();
}

std::string model_problem(const std::string& name) {
  {
    std::lock_guard lock(models_mu);
    if (auto it = load_errors.find(name); it != load_errors.end()) {
      return "test model " + name + " does not load: " + it->second;
    }
  }
  const auto path = models_dir() / (name + ".gguf");
  if (!std::filesystem::exists(path)) {
    return "test model " + name + " is missing at " + path.string() +
           " (the models fixture makes it: scripts/make-test-models.sh; stories260K comes from ../shared/models)";
  }
  return "test model " + name + " is at " + path.string();
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
