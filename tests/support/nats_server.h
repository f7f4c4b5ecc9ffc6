// Debian's nats-server with JetStream, started by a test on loopback ports with its data in a folder of the
// test's, and stopped after it: one server, or the nodes of a cluster (routes between them). A test can kill
// a node (SIGKILL), freeze and thaw it (SIGSTOP, SIGCONT), and start it again on the same ports and data.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace aoi::test {

// A free TCP port on 127.0.0.1 (bound and released: another process may take it first, rarely).
int free_port();

class NatsNode {
 public:
  // `routes`: the cluster ports of every node (this one's included); empty: a server of its own.
  NatsNode(std::string name, std::filesystem::path dir, int port, int cluster_port, std::vector<int> routes);
  ~NatsNode();
  NatsNode(const NatsNode&) = delete;
  NatsNode& operator=(const NatsNode&) = delete;

  // Starts the server and waits until it takes connections; false (with the reason in `why`) when it cannot.
  bool start(std::string* why);
  void stop();    // SIGTERM, waited for
  void kill();    // SIGKILL, waited for
  void freeze();  // SIGSTOP
  void thaw();    // SIGCONT
  bool running() const { return pid_ > 0; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  void wait_exit();

  std::string name_;
  std::filesystem::path dir_;
  int port_;
  int cluster_port_;
  std::vector<int> routes_;
  pid_t pid_ = -1;
};

// `n` nodes of one cluster (n = 1: a single server), each in a folder under `dir`.
class NatsCluster {
 public:
  NatsCluster(const std::filesystem::path& dir, int n);
  // Starts every node; false (with why) when one cannot start.
  bool start(std::string* why);
  NatsNode& node(int i) { return *nodes_[i]; }
  // "nats://127.0.0.1:P1,127.0.0.1:P2,...": what a replica is given.
  std::string url() const;

 private:
  std::vector<std::unique_ptr<NatsNode>> nodes_;
};

// The nats-server binary: $AOI_NATS_SERVER, else /usr/sbin/nats-server.
std::string nats_server_binary();

}  // namespace aoi::test
