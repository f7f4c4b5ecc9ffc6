// Where the test model runs: on the CPU in the release stage, on the offload device the environment names in
// the non-host stage (AOI_TEST_RPC, AOI_TEST_DEVICE: tests/support/test_models.h), with every layer there and
// greedy rows chosen on that device. A stage that meant to test a device and ran on the CPU fails here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "aoi/engine/context.h"
#include "aoi/engine/devices.h"
#include "aoi/engine/model.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

bool set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

TEST(Devices, TheTestModelRunsWhereTheStageSays) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 512, .n_batch = 32, .n_seq_max = 1});
  ASSERT_TRUE(ctx);
  if (!set("AOI_TEST_RPC") && !set("AOI_TEST_DEVICE")) {
    EXPECT_TRUE(model->devices().empty()) << model->placement();
    EXPECT_EQ(model->device_names(), "CPU");
    EXPECT_FALSE(ctx->backend_sampling());  // auto: the host where the output layer is on the CPU
    return;
  }
  ASSERT_FALSE(model->devices().empty()) << model->placement();
  EXPECT_EQ(model->n_layers_offloaded(), model->n_layer()) << model->placement();
  if (set("AOI_TEST_RPC")) {
    EXPECT_TRUE(model->devices().back().remote) << model->placement();
    EXPECT_TRUE(ctx->backend_sampling()) << "auto: the device where the output layer is an rpc-server's";
  } else {
    EXPECT_FALSE(ctx->backend_sampling()) << "auto: the host beside a local GPU";
  }
}

TEST(Devices, AnUnknownDeviceOrAServerThatIsNotThereIsRefusedByName) {
  auto none = find_device("NoSuchDevice7");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("NoSuchDevice7"), std::string::npos);
  EXPECT_NE(none.error().message.find("CPU"), std::string::npos) << "it lists those there are";
  ModelParams params = test::model_params("test-micro");
  params.devices = {"NoSuchDevice7"};
  auto model = Model::load(params);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().field, "device");
  // Port 1 on loopback: nothing listens there (llama.cpp's client would abort the process).
  const Status refused = add_rpc_servers({"127.0.0.1:1"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().field, "rpc");
  EXPECT_NE(refused.error().message.find("127.0.0.1:1"), std::string::npos);
  EXPECT_FALSE(add_rpc_servers({"no-port"}));
}

TEST(Devices, NoneKeepsEveryLayerOnTheCpu) {
  ModelParams params = test::model_params("test-micro");
  params.devices = {"none"};
  params.n_gpu_layers = -1;
  auto model = Model::load(params);
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_TRUE((*model)->devices().empty());
  EXPECT_EQ((*model)->n_layers_offloaded(), 0);
  EXPECT_EQ((*model)->placement(), "every layer and the KV cache on the CPU");
}

}  // namespace
}  // namespace aoi::engine
