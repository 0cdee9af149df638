// Real etcd members for unit tests (Debian's etcd-server, installed by scripts/install-deps.sh):
// members on 127.0.0.1 with free ports and a temporary data directory, waited for until each
// answers, SIGKILLed and removed at the end of the test.
#pragma once
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "launcher/free_port.h"
#include "rendezvous/etcd_client.h"

extern char** environ;

namespace ddprun::rendezvous::etcd::testing {

using namespace std::chrono_literals;

inline int FreePort() { return launcher::PickFreePort("127.0.0.1"); }

// An etcd cluster of `members` members on 127.0.0.1, their data in one temporary directory;
// every member SIGKILLed and the data removed at the end of the test. Kill(i) SIGKILLs one.
class EtcdCluster {
 public:
  explicit EtcdCluster(int members) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddprun_etcd_XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
    std::string cluster;
    for (int i = 0; i < members; ++i) {
      client_ports_.push_back(FreePort());
      peer_ports_.push_back(FreePort());
      cluster += (i ? "," : "") + Name(i) + "=" + Url(peer_ports_[i]);
    }
    for (int i = 0; i < members; ++i) pids_.push_back(Spawn(i, cluster));
    for (int i = 0; i < members; ++i) AwaitReady(i);
  }
  ~EtcdCluster() {
    for (std::size_t i = 0; i < pids_.size(); ++i) Kill(static_cast<int>(i));
    std::filesystem::remove_all(dir_);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  HostPort Endpoint(int member = 0) const { return {"127.0.0.1", client_ports_.at(member)}; }
  std::vector<HostPort> Endpoints() const {
    std::vector<HostPort> all;
    for (std::size_t i = 0; i < client_ports_.size(); ++i) all.push_back(Endpoint(static_cast<int>(i)));
    return all;
  }
  void Kill(int member) {
    pid_t& pid = pids_.at(member);
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

 private:
  static std::string Name(int member) { return "m" + std::to_string(member); }
  static std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

  pid_t Spawn(int member, const std::string& cluster) {
    const std::string client = Url(client_ports_[member]);
    const std::string peer = Url(peer_ports_[member]);
    const std::string log = dir_ + "/" + Name(member) + ".log";
    std::vector<std::string> args{"/usr/bin/etcd", "--name", Name(member),
                                  "--data-dir", dir_ + "/" + Name(member),
                                  "--listen-client-urls", client, "--advertise-client-urls", client,
                                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                  "--initial-cluster", cluster, "--initial-cluster-state", "new",
                                  "--heartbeat-interval", "100", "--election-timeout", "1000"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(error == 0);  // /usr/bin/etcd: scripts/install-deps.sh installs etcd-server
    return pid;
  }

  void AwaitReady(int member) {
    EtcdClient client({{Endpoint(member)}, 1s});
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      try {
        ParseRange(client.Call("/v3/kv/range", RangeBody("ready")));
        return;
      } catch (const std::exception& error) {
        INFO(error.what());
        REQUIRE(std::chrono::steady_clock::now() < deadline);
      }
      std::this_thread::sleep_for(50ms);  // etcd has no readiness event to wait on
    }
  }

  std::string dir_;
  std::vector<int> client_ports_;
  std::vector<int> peer_ports_;
  std::vector<pid_t> pids_;
};

// One member.
class EtcdServer : public EtcdCluster {
 public:
  EtcdServer() : EtcdCluster(1) {}
};

}  // namespace ddprun::rendezvous::etcd::testing
