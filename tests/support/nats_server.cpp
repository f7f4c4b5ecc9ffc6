#include "nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

namespace aoi::test {
namespace {

bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::string nats_server_binary() {
  const char* env = std::getenv("AOI_NATS_SERVER");
  return env != nullptr && *env != '\0' ? env : "/usr/sbin/nats-server";
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

NatsNode::NatsNode(std::string name, std::filesystem::path dir, int port, int cluster_port, std::vector<int> routes)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      port_(port),
      cluster_port_(cluster_port),
      routes_(std::move(routes)) {
  std::filesystem::create_directories(dir_ / "jetstream");
  std::ofstream conf(dir_ / "nats.conf");
  conf << "server_name: " << name_ << "\n"
       << "listen: 127.0.0.1:" << port_ << "\n"
       << "jetstream { store_dir: \"" << (dir_ / "jetstream").string() << "\" }\n";
  if (!routes_.empty()) {
    conf << "cluster {\n  name: aoi-test\n  listen: 127.0.0.1:" << cluster_port_ << "\n  routes: [\n";
    for (int r : routes_) {
      if (r != cluster_port_) conf << "    nats-route://127.0.0.1:" << r << "\n";
    }
    conf << "  ]\n}\n";
  }
}

NatsNode::~NatsNode() {
  if (pid_ > 0) kill();
}

bool NatsNode::start(std::string* why) {
  const std::string bin = nats_server_binary();
  if (::access(bin.c_str(), X_OK) != 0) {
    *why = bin + " is missing: Debian's nats-server is needed (scripts/setup.sh --tests)";
    return false;
  }
  const std::string conf = (dir_ / "nats.conf").string();
  const std::string log = (dir_ / "nats.log").string();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl(bin.c_str(), bin.c_str(), "-c", conf.c_str(), "-l", log.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!port_answers(port_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *why = "nats-server " + name_ + " exited at start (its log: " + log + ")";
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      *why = "nats-server " + name_ + " took no connection within 20 s";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void NatsNode::wait_exit() {
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void NatsNode::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  wait_exit();
}

void NatsNode::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  wait_exit();
}

void NatsNode::freeze() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void NatsNode::thaw() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

NatsCluster::NatsCluster(const std::filesystem::path& dir, int n) {
  std::vector<int> ports;
  std::vector<int> cluster_ports;
  for (int i = 0; i < n; ++i) {
    ports.push_back(free_port());
    cluster_ports.push_back(n > 1 ? free_port() : 0);
  }
  for (int i = 0; i < n; ++i) {
    nodes_.push_back(std::make_unique<NatsNode>("n" + std::to_string(i + 1), dir / ("n" + std::to_string(i + 1)),
                                                ports[i], cluster_ports[i],
                                                n > 1 ? cluster_ports : std::vector<int>{}));
  }
}

bool NatsCluster::start(std::string* why) {
  for (auto& n : nodes_) {
    if (!n->start(why)) return false;
  }
  return true;
}

std::string NatsCluster::url() const {
  std::string out = "nats://";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    out += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
  }
  return out;
}

}  // namespace aoi::test
