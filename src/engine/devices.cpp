#include "aoi/engine/devices.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <mutex>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aoi/common/log.h"
#include "backends.h"
#include "ggml-backend.h"
#include "llama.h"

namespace aoi::engine {
namespace {

// llama.cpp logs in fragments (GGML_LOG_LEVEL_CONT continues the previous line); join them per thread
// and hand whole lines to spdlog. Its INFO chatter goes to debug: aoi prints its own summary.
void forward_llama_log(ggml_log_level level, const char* text, void* /*user_data*/) {
  thread_local std::string line;
  thread_local ggml_log_level line_level = GGML_LOG_LEVEL_DEBUG;
  if (level != GGML_LOG_LEVEL_CONT) line_level = level;
  line += text;
  if (line.empty() || line.back() != '\n') return;
  line.pop_back();
  const spdlog::level::level_enum level_out = line_level == GGML_LOG_LEVEL_ERROR  ? spdlog::level::err
                                              : line_level == GGML_LOG_LEVEL_WARN ? spdlog::level::warn
                                                                                  : spdlog::level::debug;
  // In JSON the logger's name says where the line comes from; in text the prefix does.
  if (const auto logger = log::llama_logger()) {
    logger->log(level_out, "{}", line);
  } else {
    spdlog::log(level_out, "llama: {}", line);
  }
  line.clear();
}

DeviceKind kind_of(enum ggml_backend_dev_type type) {
  switch (type) {
    case GGML_BACKEND_DEVICE_TYPE_CPU: return DeviceKind::kCpu;
    case GGML_BACKEND_DEVICE_TYPE_GPU: return DeviceKind::kGpu;
    case GGML_BACKEND_DEVICE_TYPE_IGPU: return DeviceKind::kIntegratedGpu;
    case GGML_BACKEND_DEVICE_TYPE_ACCEL: return DeviceKind::kAccelerator;
    default: return DeviceKind::kOther;
  }
}

Device device_of(ggml_backend_dev_t dev) {
  ggml_backend_dev_props props{};
  ggml_backend_dev_get_props(dev, &props);
  const char* backend = ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev));
  return {.name = props.name != nullptr ? props.name : "",
          .description = props.description != nullptr ? props.description : "",
          .kind = kind_of(props.type),
          .memory_free = props.memory_free,
          .memory_total = props.memory_total,
          .remote = std::string_view(backend).starts_with("RPC")};
}

// Whether something accepts a TCP connection at host:port within the timeout. llama.cpp's RPC client aborts
// the process when it cannot connect, so an address is tried here first, to refuse it with a message.
bool accepts_connections(const std::string& host, const std::string& port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* a = found; a != nullptr && !ok; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
      int error = 0;
      socklen_t len = sizeof error;
      ok = poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return ok;
}

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(forward_llama_log, nullptr);
    // The backends built as loadable modules (GGML_BACKEND_DL), found beside the executable; in a build that
    // links them in this finds none.
    ggml_backend_load_all();
    llama_backend_init();
  });
}

std::vector<Device> list_devices() {
  init_backend();
  std::vector<Device> devices;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) devices.push_back(device_of(ggml_backend_dev_get(i)));
  return devices;
}

Result<Device> find_device(const std::string& name) {
  init_backend();
  if (ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str())) return device_of(dev);
  std::string names;
  for (const auto& device : list_devices()) names += (names.empty() ? "" : ", ") + device.name;
  return Error::invalid("device", "no device '" + name + "'; there are: " + names);
}

std::vector<Device> default_offload_devices() {
  // The remote devices first (fewer tensors cross the network when the last layers, the output, are local),
  // then the GPUs, and the integrated GPUs only when there is no GPU: llama.cpp's order.
  std::vector<Device> remote, gpus, integrated;
  for (auto& device : list_devices()) {
    if (device.remote) {
      remote.push_back(std::move(device));
    } else if (device.kind == DeviceKind::kGpu) {
      gpus.push_back(std::move(device));
    } else if (device.kind == DeviceKind::kIntegratedGpu) {
      integrated.push_back(std::move(device));
    }
  }
  if (gpus.empty()) gpus = std::move(integrated);
  remote.insert(remote.end(), gpus.begin(), gpus.end());
  return remote;
}

Status add_rpc_servers(const std::vector<std::string>& endpoints) {
  init_backend();
  ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
  if (rpc == nullptr) {
    return Error::invalid("rpc", "this build has no RPC backend (build with -DAOI_RPC=ON, the default)");
  }
  using AddServer = ggml_backend_reg_t (*)(const char* endpoint);
  const auto add_server =
      reinterpret_cast<AddServer>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
  if (add_server == nullptr) return Error::invalid("rpc", "llama.cpp's RPC backend cannot add servers");
  for (const auto& endpoint : endpoints) {
    const auto colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size()) {
      return Error::invalid("rpc", "'" + endpoint + "' is not HOST:PORT");
    }
    if (ggml_backend_reg_by_name(("RPC[" + endpoint + "]").c_str()) != nullptr) continue;  // added before
    // "[::1]:50052" names an IPv6 address; llama.cpp's client takes the host as written.
    std::string host = endpoint.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (!accepts_connections(host, endpoint.substr(colon + 1), 3000)) {
      return Error::invalid("rpc", "nothing accepts connections at " + endpoint + " (is rpc-server running there?)");
    }
    ggml_backend_reg_t server = add_server(endpoint.c_str());
    if (server == nullptr) {
      return Error::invalid("rpc", "no rpc-server answers at " + endpoint + " (or it offers no device)");
    }
    ggml_backend_register(server);
  }
  return {};
}

std::string describe(const Device& device) {
  std::string text = device.name + " (" + device.description;
  if (device.memory_total > 0) text += ", " + gib(device.memory_free) + " free of " + gib(device.memory_total);
  return text + ")";
}

}  // namespace aoi::engine
