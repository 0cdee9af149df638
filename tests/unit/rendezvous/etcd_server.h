// A real etcd member for unit tests (Debian's etcd-server, installed by scripts/install-deps.sh):
// one member on 127.0.0.1 with free ports and a temporary data directory, waited for until it
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

#include "common/asio.h"
#include "rendezvous/etcd_client.h"

extern char** environ;

namespace ddprun::rendezvous::etcd::testing {

using namespace std::chrono_literals;

inline int FreePort() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

// One etcd member on 127.0.0.1 with its data in a temporary directory; SIGKILLed and removed
// at the end of the test.
class EtcdServer {
 public:
  EtcdServer() : client_port_(FreePort()), peer_port_(FreePort()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddprun_etcd_XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    const std::string log = dir_ + "/etcd.log";
    std::vector<std::string> args{"/usr/bin/etcd",  "--data-dir", dir_ + "/data",
                                  "--listen-client-urls", client, "--advertise-client-urls", client,
                                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                  "--initial-cluster", "default=" + peer};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int error = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(error == 0);  // /usr/bin/etcd: scripts/install-deps.sh installs etcd-server
    AwaitReady();
  }
  ~EtcdServer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  HostPort Endpoint() const { return {"127.0.0.1", client_port_}; }

 private:
  void AwaitReady() {
    EtcdClient client({{Endpoint()}, 1s});
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

  int client_port_;
  int peer_port_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace ddprun::rendezvous::etcd::testing
