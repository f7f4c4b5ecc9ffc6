// The compute devices a model can be put on: those llama.cpp's built backends found in this machine (a GPU,
// the CPU), and the devices of rpc-server processes added by address (llama.cpp's RPC backend). Adding an RPC
// server and listing devices are process-wide, as llama.cpp's backend registry is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::engine {

enum class DeviceKind {
  kCpu,            // the host's CPU and memory
  kGpu,            // a GPU with its own memory; an rpc-server's device counts as one
  kIntegratedGpu,  // a GPU sharing the host's memory
  kAccelerator,    // used beside the CPU backend (BLAS, AMX): never given layers
  kOther,
};

struct Device {
  std::string name;         // llama.cpp's: "CUDA0", "Vulkan0", "RPC0", "CPU"
  std::string description;  // "NVIDIA H200", an rpc-server's address
  DeviceKind kind = DeviceKind::kOther;
  std::uint64_t memory_free = 0;
  std::uint64_t memory_total = 0;
  bool remote = false;  // an rpc-server's: every tensor read and write crosses a socket
};

// Every device the backends offer, in llama.cpp's order.
std::vector<Device> list_devices();
// The device called `name`, or an error listing those there are.
Result<Device> find_device(const std::string& name);

// The devices that take layers when none are named: the rpc-servers' devices, then the GPUs (integrated GPUs
// only where there is no other). Empty: everything runs on the CPU.
std::vector<Device> default_offload_devices();

// Adds the devices of the rpc-servers at `endpoints` ("host:port"), as llama-server's --rpc. Fails, naming
// the address, when this build has no RPC backend (AOI_RPC) or a server does not answer.
Status add_rpc_servers(const std::vector<std::string>& endpoints);

// "CUDA0 (NVIDIA H200, 139.8 GiB free of 143.8 GiB)"
std::string describe(const Device& device);

}  // namespace aoi::engine
