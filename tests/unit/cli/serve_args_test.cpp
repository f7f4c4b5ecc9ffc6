// aoi serve's command line: llama-server's flags, the environment, and what is refused (tools/aoi/serve_args.h).
#include "serve_args.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace aoi::cli {
namespace {

class ServeArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("aoi-serve-args-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "m.gguf").string();
    std::ofstream(model_) << "not read by the parser";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::variant<ServeCommand, ServeExit> parse(std::vector<std::string> args) {
    return parse_serve_args(args, [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }
  // Parses and expects success.
  ServeCommand ok(std::vector<std::string> args) {
    auto r = parse(std::move(args));
    if (auto* e = std::get_if<ServeExit>(&r)) {
      ADD_FAILURE() << "refused (" << e->exit_code << "): " << e->text;
      return {};
    }
    return std::get<ServeCommand>(r);
  }
  // Parses and expects the command line refused with a message matching `part`.
  void refused(std::vector<std::string> args, const std::string& part) {
    auto r = parse(args);
    ASSERT_TRUE(std::holds_alternative<ServeExit>(r)) << "accepted: " << args.back();
    const auto& e = std::get<ServeExit>(r);
    EXPECT_NE(e.exit_code, 0);
    EXPECT_NE(e.text.find(part), std::string::npos) << e.text;
  }
  static bool warned(const ServeCommand& c, const std::string& part) {
    return std::any_of(c.warnings.begin(), c.warnings.end(),
                       [&](const std::string& w) { return w.find(part) != std::string::npos; });
  }

  std::filesystem::path dir_;
  std::string model_;
  std::map<std::string, std::string> env_;
};

TEST_F(ServeArgsTest, PastedLlamaServerCommandLine) {
  const ServeCommand c = ok({"-m",  model_, "--host",  "localhost", "--port",    "8081", "-c",   "4096", "-ngl",
                             "99",  "-fa",  "on",      "-np",       "2",         "-ctk", "q8_0", "-ctv", "q8_0",
                             "-tb", "2",    "--jinja", "--metrics", "--api-key", "a,b",  "-v"});
  const ServeOptions& o = c.options;
  EXPECT_EQ(o.model, model_);
  EXPECT_EQ(o.host, "localhost");  // resolved when the server starts
  EXPECT_EQ(o.port, 8081);
  EXPECT_EQ(o.ctx_size, 4096);
  EXPECT_EQ(o.n_gpu_layers, 99);
  EXPECT_TRUE(o.n_gpu_layers_given);
  EXPECT_EQ(o.flash_attn, "on");
  EXPECT_EQ(o.pool_slots, 2);
  EXPECT_EQ(o.cache_type_k, "q8_0");
  EXPECT_EQ(o.cache_type_v, "q8_0");
  EXPECT_EQ(o.threads_batch, 2);
  EXPECT_EQ(o.threads, 0);
  EXPECT_EQ(o.api_keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.verbose);
  EXPECT_TRUE(o.jinja);
  EXPECT_FALSE(warned(c, "--metrics"));  // /metrics is always served
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(ServeArgsTest, MultiLetterShortFlagsAreNeverClustered) {
  // Each of these once parsed as a one-letter flag followed by the rest as its value.
  ServeCommand c = ok({"-m", model_, "-ctk", "q4_0"});
  EXPECT_EQ(c.options.cache_type_k, "q4_0");
  EXPECT_EQ(c.options.ctx_size, 0);
  c = ok({"-m", model_, "-tb", "3"});
  EXPECT_EQ(c.options.threads_batch, 3);
  EXPECT_EQ(c.options.threads, 0);
  c = ok({"-m", model_, "-ub", "64", "-b", "128"});
  EXPECT_EQ(c.options.ubatch_size, 64);
  refused({"-m", model_, "-ctx", "4096"}, "unknown option -ctx");
  refused({"-m", model_, "-tbx", "2"}, "unknown option -tbx");
  refused({"-m", model_, "-c4096"}, "unknown option -c4096");
}

TEST_F(ServeArgsTest, ValuesAreNotTakenForFlags) {
  ServeCommand c = ok({"-m", model_, "-ngl", "-1", "--prefix-cache-cells", "-1", "--port=9001", "-fa=auto"});
  EXPECT_EQ(c.options.n_gpu_layers, -1);
  EXPECT_EQ(c.options.prefix_cache_cells, -1);
  EXPECT_EQ(c.options.port, 9001);
  EXPECT_EQ(c.options.flash_attn, "auto");
  // An ignored flag's value is its own, not the next option's.
  c = ok({"-m", model_, "--temp", "0.7", "--no-mmap", "-mg", "1", "--port", "9002"});
  EXPECT_EQ(c.options.port, 9002);
  EXPECT_TRUE(warned(c, "--temp does nothing in aoi"));
  EXPECT_TRUE(warned(c, "--no-mmap does nothing in aoi"));
  EXPECT_TRUE(warned(c, "-mg does nothing in aoi"));
  refused({"-m", model_, "--temp"}, "--temp needs a value");
}

TEST_F(ServeArgsTest, GpuLayers) {
  ServeCommand c = ok({"-m", model_});
  EXPECT_EQ(c.options.n_gpu_layers, -1);  // every layer, where a GPU backend is built
  EXPECT_FALSE(c.options.n_gpu_layers_given);
  EXPECT_EQ(ok({"-m", model_, "--gpu-layers", "all"}).options.n_gpu_layers, -1);
  EXPECT_EQ(ok({"-m", model_, "--n-gpu-layers", "auto"}).options.n_gpu_layers, -1);
  EXPECT_EQ(ok({"-m", model_, "-ngl", "0"}).options.n_gpu_layers, 0);
  refused({"-m", model_, "-ngl", "many"}, "expected a number of layers, all or auto");
}

TEST_F(ServeArgsTest, DevicesRpcServersAndBackendSampling) {
  ServeCommand c = ok({"-m", model_});
  EXPECT_TRUE(c.options.devices.empty());  // the default ones
  EXPECT_TRUE(c.options.rpc_servers.empty());
  EXPECT_EQ(c.options.backend_sampling, "auto");
  c = ok({"-m", model_, "-dev", "CUDA0,CUDA1", "--rpc", "10.0.0.2:50052,10.0.0.3:50052", "-bs"});
  EXPECT_EQ(c.options.devices, (std::vector<std::string>{"CUDA0", "CUDA1"}));
  EXPECT_EQ(c.options.rpc_servers, (std::vector<std::string>{"10.0.0.2:50052", "10.0.0.3:50052"}));
  EXPECT_EQ(c.options.backend_sampling, "on");
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(ok({"-m", model_, "--device", "none", "--no-backend-sampling"}).options.devices,
            (std::vector<std::string>{"none"}));
  EXPECT_EQ(ok({"-m", model_, "--no-backend-sampling"}).options.backend_sampling, "off");
}

TEST_F(ServeArgsTest, HubAndFeatureFlagsAreRefused) {
  refused({"-hf", "org/model"}, "reaches no model hub");
  refused({"-m", model_, "--hf-repo=org/model"}, "reaches no model hub");
  refused({"-m", model_, "-hff", "x.gguf"}, "reaches no model hub");
  refused({"-m", model_, "--embeddings"}, "no embeddings");
  refused({"-m", model_, "--lora", "a.gguf"}, "merge the adapter");
  refused({"-m", model_, "--no-such-flag"}, "--no-such-flag");
}

TEST_F(ServeArgsTest, HelpExitsZero) {
  auto r = parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<ServeExit>(r));
  const auto& e = std::get<ServeExit>(r);
  EXPECT_EQ(e.exit_code, 0);
  for (const char* part :
       {"--ctx-per-session", "-np", "completion slots", "LLAMA_ARG_N_PARALLEL", "STATE_DIRECTORY", "-hf", "--jinja"}) {
    EXPECT_NE(e.text.find(part), std::string::npos) << part;
  }
}

TEST_F(ServeArgsTest, ApiKeys) {
  const std::string file = (dir_ / "keys.txt").string();
  std::ofstream(file) << "# admins\nk3\n\nk4\r\n";
  const ServeCommand c = ok({"-m", model_, "--api-key", "k1,k2", "--api-key", "k5", "--api-key-file", file});
  EXPECT_EQ(c.options.api_keys, (std::vector<std::string>{"k1", "k2", "k5", "k3", "k4"}));
  refused({"-m", model_, "--api-key-file", (dir_ / "none").string()}, "--api-key-file");
}

TEST_F(ServeArgsTest, EnvironmentFillsWhatTheCommandLineLeaves) {
  env_ = {{"LLAMA_ARG_MODEL", model_},        {"LLAMA_ARG_CTX_SIZE", "8192"}, {"LLAMA_ARG_N_PARALLEL", "3"},
          {"LLAMA_ARG_N_GPU_LAYERS", "7"},    {"LLAMA_API_KEY", "e1,e2"},     {"AOI_MAX_SESSIONS", "4"},
          {"LLAMA_ARG_CACHE_TYPE_K", "q8_0"}, {"LLAMA_ARG_FLASH_ATTN", "on"}};
  ServeCommand c = ok({});
  EXPECT_EQ(c.options.model, model_);
  EXPECT_EQ(c.options.ctx_size, 8192);
  EXPECT_EQ(c.options.pool_slots, 3);
  EXPECT_EQ(c.options.n_gpu_layers, 7);
  EXPECT_TRUE(c.options.n_gpu_layers_given);
  EXPECT_EQ(c.options.api_keys, (std::vector<std::string>{"e1", "e2"}));
  EXPECT_EQ(c.options.max_sessions, 4);
  EXPECT_EQ(c.options.cache_type_k, "q8_0");
  EXPECT_EQ(c.options.flash_attn, "on");

  // The command line first (in any of its spellings), then AOI_, then LLAMA_ARG_.
  env_["AOI_PORT"] = "7001";
  env_["LLAMA_ARG_PORT"] = "7002";
  c = ok({"-np", "1", "--ctx-size=2048"});
  EXPECT_EQ(c.options.pool_slots, 1);
  EXPECT_EQ(c.options.ctx_size, 2048);
  EXPECT_EQ(c.options.port, 7001);
}

// Every LLAMA_ARG_ variable README names, each alone.
TEST_F(ServeArgsTest, EveryLlamaServerVariableTheReadmeNames) {
  const std::string keys = (dir_ / "keys").string();
  std::ofstream(keys) << "kf\n";
  const auto with = [&](const std::string& var, const std::string& value) {
    env_ = {{"LLAMA_ARG_MODEL", model_}, {var, value}};
    return ok({});
  };
  EXPECT_EQ(with("LLAMA_ARG_ALIAS", "al").options.alias, "al");
  EXPECT_EQ(with("LLAMA_ARG_HOST", "0.0.0.0").options.host, "0.0.0.0");
  EXPECT_EQ(with("LLAMA_ARG_THREADS", "3").options.threads, 3);
  EXPECT_EQ(with("LLAMA_ARG_BATCH", "256").options.batch_size, 256);
  EXPECT_EQ(with("LLAMA_ARG_UBATCH", "128").options.ubatch_size, 128);
  EXPECT_EQ(with("LLAMA_ARG_CACHE_TYPE_V", "q8_0").options.cache_type_v, "q8_0");
  EXPECT_EQ(with("LLAMA_ARG_API_KEY_FILE", keys).options.api_keys, (std::vector<std::string>{"kf"}));
  // The client commands' key is never a server's admin key; the server's own variable is.
  EXPECT_TRUE(with("AOI_API_KEY", "tenant-key").options.api_keys.empty());
  EXPECT_EQ(with("AOI_SERVER_API_KEY", "s1,s2").options.api_keys, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(with("LLAMA_ARG_CHAT_TEMPLATE", "chatml").options.chat_template, "chatml");
  EXPECT_EQ(with("LLAMA_ARG_CHAT_TEMPLATE_FILE", "llama3").options.chat_template, "llama3");
  EXPECT_EQ(with("LLAMA_ARG_THREADS_HTTP", "4").options.io_threads, 4);
  EXPECT_EQ(with("LLAMA_ARG_TIMEOUT", "90").options.request_timeout, 90);
  EXPECT_TRUE(with("LLAMA_ARG_ENDPOINT_METRICS", "1").warnings.empty());
  EXPECT_TRUE(warned(with("LLAMA_ARG_ENDPOINT_SLOTS", "1"), "--slots (from LLAMA_ARG_ENDPOINT_SLOTS)"));
  EXPECT_TRUE(with("LLAMA_ARG_ENDPOINT_SLOTS", "0").warnings.empty());
}

TEST_F(ServeArgsTest, EnvironmentFlags) {
  env_ = {{"AOI_MEMORY_ONLY", "true"}, {"LLAMA_ARG_NO_UI", "1"}, {"LLAMA_ARG_JINJA", "1"}};
  ServeCommand c = ok({"-m", model_});
  EXPECT_TRUE(c.options.memory_only);
  EXPECT_FALSE(c.options.webui);
  EXPECT_TRUE(c.options.jinja);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_FALSE(ok({"-m", model_, "--no-jinja"}).options.jinja);  // llama-server's way to turn it off

  env_ = {{"LLAMA_ARG_UI", "off"}, {"AOI_MEMORY_ONLY", "0"}};
  c = ok({"-m", model_});
  EXPECT_FALSE(c.options.webui);
  EXPECT_FALSE(c.options.memory_only);
  env_ = {{"LLAMA_ARG_UI", "on"}};
  EXPECT_TRUE(ok({"-m", model_}).options.webui);
  EXPECT_FALSE(ok({"-m", model_, "--no-webui"}).options.webui);

  env_ = {{"AOI_MEMORY_ONLY", "maybe"}};
  refused({"-m", model_}, "AOI_MEMORY_ONLY=maybe: expected on, off");
  env_ = {{"LLAMA_ARG_PORT", "eighty"}};
  refused({"-m", model_}, "LLAMA_ARG_PORT=eighty");
}

TEST_F(ServeArgsTest, ContextFlags) {
  EXPECT_EQ(ok({"-m", model_, "--ctx-per-session", "8192"}).options.ctx_per_session, 8192);
  refused({"-m", model_, "-c", "4096", "--ctx-per-session", "1024"}, "not both");
  refused({"-m", model_, "--ctx-per-session", "256"}, "--ctx-per-session");
  env_ = {{"AOI_CTX_PER_SESSION", "2048"}};
  EXPECT_EQ(ok({"-m", model_}).options.ctx_per_session, 2048);
}

TEST_F(ServeArgsTest, VerboseAfterServe) {
  EXPECT_TRUE(ok({"-m", model_, "-v"}).verbose);
  EXPECT_TRUE(ok({"-m", model_, "--log-verbose"}).verbose);
  EXPECT_FALSE(ok({"-m", model_}).verbose);
}

TEST_F(ServeArgsTest, DataDirectory) {
  env_ = {{"HOME", "/home/u"}};
  EXPECT_EQ(ok({"-m", model_}).options.data_dir, "/home/u/.local/state/aoi");
  env_["XDG_STATE_HOME"] = "/xdg";
  EXPECT_EQ(ok({"-m", model_}).options.data_dir, "/xdg/aoi");
  env_["STATE_DIRECTORY"] = "/var/lib/aoi:/var/lib/other";
  EXPECT_EQ(ok({"-m", model_}).options.data_dir, "/var/lib/aoi");
  env_["AOI_DATA_DIR"] = "/data";
  EXPECT_EQ(ok({"-m", model_}).options.data_dir, "/data");
  EXPECT_EQ(ok({"-m", model_, "--data-dir", "/flag"}).options.data_dir, "/flag");
  EXPECT_EQ(ok({"-m", model_, "--memory-only"}).options.data_dir, "");
}

// The flags README's "Coming from llama-server" table names, each as the table says.
TEST_F(ServeArgsTest, EveryLlamaServerFlagTheReadmeNames) {
  const std::string file = (dir_ / "t.jinja").string();
  // ChatML's markers, which llama.cpp recognises.
  std::ofstream(file) << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
  // Read with their meaning.
  ServeCommand c = ok({"--model",
                       model_,
                       "-a",
                       "x",
                       "--alias",
                       "x",
                       "-t",
                       "3",
                       "--threads",
                       "3",
                       "-b",
                       "256",
                       "--batch-size",
                       "256",
                       "--ubatch-size",
                       "128",
                       "-ctk",
                       "bf16",
                       "--cache-type-v",
                       "q4_0",
                       "--flash-attn",
                       "off",
                       "--parallel",
                       "4",
                       "--threads-batch",
                       "5",
                       "--log-verbose"});
  EXPECT_EQ(c.options.alias, "x");
  EXPECT_EQ(c.options.threads, 3);
  EXPECT_EQ(c.options.batch_size, 256);
  EXPECT_EQ(c.options.ubatch_size, 128);
  EXPECT_EQ(c.options.cache_type_k, "bf16");
  EXPECT_EQ(c.options.cache_type_v, "q4_0");
  EXPECT_EQ(c.options.flash_attn, "off");
  EXPECT_EQ(c.options.pool_slots, 4);
  EXPECT_EQ(c.options.threads_batch, 5);
  EXPECT_TRUE(c.verbose);
  EXPECT_TRUE(c.warnings.empty());
  c = ok({"-m", model_, "--chat-template-file", file, "--threads-http", "3", "-to", "60", "--no-ui"});
  EXPECT_EQ(c.options.chat_template, file);
  EXPECT_EQ(c.options.io_threads, 3);
  EXPECT_EQ(c.options.request_timeout, 60);
  EXPECT_FALSE(c.options.webui);
  EXPECT_EQ(ok({"-m", model_, "--timeout", "61"}).options.request_timeout, 61);
  // Given twice, the last one counts (as in llama-server); keys add up.
  c = ok({"-m", model_, "--port", "1", "--port", "2", "--api-key", "a", "--api-key", "b"});
  EXPECT_EQ(c.options.port, 2);
  EXPECT_EQ(c.options.api_keys, (std::vector<std::string>{"a", "b"}));
  // What aoi does anyway: accepted without a word.
  c = ok({"-m", model_, "--metrics", "--webui", "--ui", "-cb", "--cont-batching", "--cache-prompt", "--swa-full",
          "--no-slots"});
  EXPECT_TRUE(c.warnings.empty());
  // Nothing in aoi: a warning each, and the options around them untouched.
  const std::vector<std::vector<std::string>> ignored = {{"--chat-template-kwargs", "{}"},
                                                         {"--slots"},
                                                         {"--props"},
                                                         {"-nocb"},
                                                         {"--no-cont-batching"},
                                                         {"-kvu"},
                                                         {"--kv-unified"},
                                                         {"--context-shift"},
                                                         {"--no-context-shift"},
                                                         {"--mlock"},
                                                         {"--no-mmap"},
                                                         {"--mmap"},
                                                         {"--warmup"},
                                                         {"--no-warmup"},
                                                         {"-nkvo"},
                                                         {"--no-kv-offload"},
                                                         {"-sm", "row"},
                                                         {"-ts", "1,1"},
                                                         {"-mg", "0"},
                                                         {"-ot", "exps=CPU"},
                                                         {"-ncmoe", "2"},
                                                         {"-cmoe"},
                                                         {"-fit", "off"},
                                                         {"--numa", "distribute"},
                                                         {"-s", "1"},
                                                         {"--seed", "1"},
                                                         {"-n", "64"},
                                                         {"--n-predict", "64"},
                                                         {"--temp", "0.7"},
                                                         {"--top-k", "40"},
                                                         {"--top-p", "0.9"},
                                                         {"--min-p", "0.1"},
                                                         {"--repeat-penalty", "1.1"},
                                                         {"--presence-penalty", "0"},
                                                         {"--frequency-penalty", "0"},
                                                         {"--slot-save-path", "/tmp"},
                                                         {"--cache-reuse", "256"},
                                                         {"-cram", "0"},
                                                         {"-md", "d.gguf"},
                                                         {"--reasoning-format", "none"},
                                                         {"--reasoning-budget", "0"},
                                                         {"-lv", "3"},
                                                         {"--log-file", "x.log"},
                                                         {"--log-timestamps"},
                                                         {"--log-prefix"},
                                                         {"--log-disable"},
                                                         {"--path", "/srv"},
                                                         {"--reuse-port"}};
  for (const auto& flag : ignored) {
    std::vector<std::string> args = {"-m", model_};
    args.insert(args.end(), flag.begin(), flag.end());
    args.insert(args.end(), {"--port", "9100"});
    c = ok(args);
    EXPECT_EQ(c.options.port, 9100) << flag[0];
    ASSERT_EQ(c.warnings.size(), 1u) << flag[0];
    EXPECT_EQ(c.warnings[0].rfind(flag[0] + " does nothing in aoi: ", 0), 0u) << c.warnings[0];
  }
  // Refused, naming the flag.
  const std::vector<std::vector<std::string>> refused_flags = {{"-hf", "o/m"},
                                                               {"-hfr", "o/m"},
                                                               {"--hf-repo", "o/m"},
                                                               {"-hff", "f"},
                                                               {"--hf-file", "f"},
                                                               {"-hft", "t"},
                                                               {"--hf-token", "t"},
                                                               {"-mu", "u"},
                                                               {"--model-url", "u"},
                                                               {"-dr", "d"},
                                                               {"--docker-repo", "d"},
                                                               {"-hfd", "o/m"},
                                                               {"--lora", "a"},
                                                               {"--lora-scaled", "a"},
                                                               {"-mm", "p"},
                                                               {"--mmproj", "p"},
                                                               {"--embeddings"},
                                                               {"--embedding"},
                                                               {"--rerank"},
                                                               {"--reranking"},
                                                               {"--ssl-key-file", "k"},
                                                               {"--ssl-cert-file", "c"},
                                                               {"--api-prefix", "/x"}};
  for (const auto& flag : refused_flags) {
    std::vector<std::string> args = {"-m", model_};
    args.insert(args.end(), flag.begin(), flag.end());
    refused(args, "aoi serve: " + flag[0] + ": ");
  }
}

TEST_F(ServeArgsTest, AClusterReplicaKeepsNoDataDirectory) {
  ServeCommand c = ok({"-m", model_, "--cluster", "nats://127.0.0.1:4222", "--replica-id", "r1"});
  EXPECT_EQ(c.options.cluster, "nats://127.0.0.1:4222");
  EXPECT_EQ(c.options.replica_id, "r1");
  EXPECT_EQ(c.options.lease_ttl_ms, 5000);
  EXPECT_EQ(c.options.cluster_copies, 1);
  EXPECT_TRUE(c.options.memory_only);
  EXPECT_TRUE(c.options.data_dir.empty());
  refused({"-m", model_, "--cluster", "nats://127.0.0.1:4222", "--data-dir", "/var/lib/aoi"},
          "--data-dir: a cluster's replica keeps its sessions in the cluster");
  refused({"-m", model_, "--cluster", "nats://127.0.0.1:4222", "--lease-ttl-ms", "100"}, "--lease-ttl-ms");
}

}  // namespace
}  // namespace aoi::cli
