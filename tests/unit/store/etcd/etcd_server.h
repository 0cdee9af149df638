// Real etcd members for unit tests (Debian's etcd-server, installed by scripts/install-deps.sh):
// members on 127.0.0.1 with free ports and a temporary data directory, waited for until each
// answers, SIGKILLed and removed at the end of the test. Optionally their client URLs are HTTPS
// with certificates the test makes with the openssl command (a test CA, the members' and a
// client's certificate).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/asio.h"
#include "launcher/backend/free_port.h"
#include "store/etcd/etcd_client.h"

extern char** environ;

namespace ddprun::store::etcd::testing {

using namespace std::chrono_literals;

inline int FreePort() { return launcher::backend::PickFreePort("127.0.0.1"); }

// Runs `args` (argv[0] a path) with stdout and stderr appended to `log`; returns its pid.
inline pid_t SpawnLogged(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  INFO(args[0]);
  REQUIRE(error == 0);
  return pid;
}

// Runs `openssl args...` to its end; its output goes to `dir`/openssl.log.
inline void Openssl(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  int status = -1;
  ::waitpid(SpawnLogged(args, dir + "/openssl.log"), &status, 0);
  INFO("openssl " + args[1] + ": see " + dir + "/openssl.log");
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

// A self-signed CA: `dir`/`name`.pem and .key (P-256).
inline void MakeCa(const std::string& dir, const std::string& name) {
  const std::string at = dir + "/" + name;
  Openssl(dir, {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", at + ".key", "-out", at + ".pem", "-days", "2", "-subj",
                "/CN=ddprun test " + name, "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign"});
}

// `dir`/`name`.pem and .key signed by the CA `dir`/`ca`.pem, for servers and clients alike
// (etcd's gateway presents its server certificate as a client to itself); `san` e.g.
// "IP:127.0.0.1", or empty.
inline void MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
                     const std::string& san) {
  const std::string at = dir + "/" + name;
  std::vector<std::string> request{"req",
                                   "-new",
                                   "-newkey",
                                   "ec",
                                   "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1",
                                   "-nodes",
                                   "-keyout",
                                   at + ".key",
                                   "-out",
                                   at + ".csr",
                                   "-subj",
                                   "/CN=ddprun test " + name,
                                   "-addext",
                                   "extendedKeyUsage=serverAuth,clientAuth"};
  if (!san.empty()) request.insert(request.end(), {"-addext", "subjectAltName=" + san});
  Openssl(dir, request);
  const std::string by = dir + "/" + ca;
  Openssl(dir, {"x509", "-req", "-in", at + ".csr", "-CA", by + ".pem", "-CAkey", by + ".key",
                "-CAcreateserial", "-CAserial", by + ".srl", "-days", "2", "-copy_extensions",
                "copyall", "-out", at + ".pem"});
}

struct EtcdClusterOptions {
  bool tls = false;               // https client URLs; Tls() has the CA and a client certificate
  bool client_cert_auth = false;  // members refuse clients without a certificate (with tls)
  std::string server_name = "127.0.0.1";  // the members' certificate names it: an IP or a DNS name
};

// An etcd cluster of `members` members on 127.0.0.1, their data in one temporary directory;
// every member SIGKILLed and the data removed at the end of the test, or when the constructor
// fails (a member that exits or does not answer in 30 s, named with the end of its log).
// Kill(i) SIGKILLs one.
class EtcdCluster {
 public:
  explicit EtcdCluster(int members) : EtcdCluster(members, EtcdClusterOptions{}) {}
  EtcdCluster(int members, EtcdClusterOptions options) : options_(std::move(options)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddprun_etcd_XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) FAIL("mkdtemp " << pattern << ": " << std::strerror(errno));
    dir_ = made;
    try {  // a constructor that throws runs no destructor: the members it started end here
      if (options_.tls) MakeCertificates();
      Start(members);
    } catch (...) {
      KillAll();
      std::filesystem::remove_all(dir_);
      throw;
    }
  }
  ~EtcdCluster() {
    KillAll();
    std::filesystem::remove_all(dir_);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  HostPort Endpoint(int member = 0) const { return {"127.0.0.1", client_ports_.at(member)}; }
  // The member by the name its certificate gives (options' server_name).
  HostPort NamedEndpoint(int member = 0) const {
    return {options_.server_name, client_ports_.at(member)};
  }
  std::vector<HostPort> Endpoints() const {
    std::vector<HostPort> all;
    for (std::size_t i = 0; i < client_ports_.size(); ++i)
      all.push_back(Endpoint(static_cast<int>(i)));
    return all;
  }
  // With tls: the test CA (ca.pem) and a client certificate it signed (client.pem, client.key).
  EtcdTls Tls() const { return {dir_ + "/ca.pem", dir_ + "/client.pem", dir_ + "/client.key"}; }
  // Every member by its certificate's name, and Tls() with tls.
  EtcdClientOptions Options(std::chrono::milliseconds timeout = 5s) const {
    std::vector<HostPort> all;
    for (std::size_t i = 0; i < client_ports_.size(); ++i) {
      all.push_back(NamedEndpoint(static_cast<int>(i)));
    }
    return {all, timeout, options_.tls ? std::optional(Tls()) : std::nullopt};
  }
  // The temporary directory, removed at the end of the test.
  const std::string& Dir() const { return dir_; }
  // SIGSTOP / SIGCONT of one member: a frozen machine (its sockets still accept connections).
  // Stop returns once the member is stopped: kill() only sends the signal, and a member running
  // on the other CPU meanwhile answered one more request (a CI failure of the frozen-member test).
  void Stop(int member) {
    const pid_t pid = pids_.at(member);
    ::kill(pid, SIGSTOP);
    int status = 0;
    while (::waitpid(pid, &status, WUNTRACED) < 0 && errno == EINTR) {
    }
  }
  void Continue(int member) { ::kill(pids_.at(member), SIGCONT); }
  void Kill(int member) {
    pid_t& pid = pids_.at(member);
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

 private:
  static std::string Name(int member) { return "m" + std::to_string(member); }
  static std::string Url(int port, bool tls = false) {
    return (tls ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port);
  }

  void MakeCertificates() {
    boost::system::error_code not_ip;
    asio::ip::make_address(options_.server_name, not_ip);
    MakeCa(dir_, "ca");
    MakeCert(dir_, "server", "ca", (not_ip ? "DNS:" : "IP:") + options_.server_name);
    MakeCert(dir_, "client", "ca", "");
  }

  pid_t Spawn(int member, const std::string& cluster) {
    const std::string client = Url(client_ports_[member], options_.tls);
    const std::string peer = Url(peer_ports_[member]);
    const std::string log = dir_ + "/" + Name(member) + ".log";
    std::vector<std::string> args{"/usr/bin/etcd",
                                  "--name",
                                  Name(member),
                                  "--data-dir",
                                  dir_ + "/" + Name(member),
                                  "--listen-client-urls",
                                  client,
                                  "--advertise-client-urls",
                                  client,
                                  "--listen-peer-urls",
                                  peer,
                                  "--initial-advertise-peer-urls",
                                  peer,
                                  "--initial-cluster",
                                  cluster,
                                  "--initial-cluster-state",
                                  "new",
                                  "--heartbeat-interval",
                                  "100",
                                  "--election-timeout",
                                  "1000"};
    if (options_.tls) {
      args.insert(args.end(), {"--cert-file", dir_ + "/server.pem", "--key-file",
                               dir_ + "/server.key", "--trusted-ca-file", dir_ + "/ca.pem"});
    }
    if (options_.client_cert_auth) args.push_back("--client-cert-auth");
    return SpawnLogged(args, log);  // /usr/bin/etcd: scripts/install-deps.sh installs etcd-server
  }

  // Picks ports, spawns every member and waits until each answers. A port picked free can be
  // taken before its member binds it (by a test running beside this one): a member that exits
  // saying so is started again with every member on new ports, at most 3 times.
  void Start(int members) {
    for (int attempt = 1;; ++attempt) {
      client_ports_.clear();
      peer_ports_.clear();
      std::string cluster;
      for (int i = 0; i < members; ++i) {
        client_ports_.push_back(FreePort());
        peer_ports_.push_back(FreePort());
        cluster += (i ? "," : "") + Name(i) + "=" + Url(peer_ports_[i]);
      }
      for (int i = 0; i < members; ++i) pids_.push_back(Spawn(i, cluster));
      bool port_taken = false;
      for (int i = 0; i < members && !port_taken; ++i) port_taken = !AwaitReady(i, attempt < 3);
      if (!port_taken) return;
      KillAll();
      pids_.clear();
      for (int i = 0; i < members; ++i) std::filesystem::remove_all(dir_ + "/" + Name(i));
    }
  }

  // Waits until `member` answers a read (30 s). False when it exited because a port it was
  // given was taken and `may_retry`; any other failure fails the test, naming what the member
  // logged last and the space left for its data.
  bool AwaitReady(int member, bool may_retry) {
    EtcdClientOptions options = Options(1s);
    options.endpoints = {NamedEndpoint(member)};
    EtcdClient client(options);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      std::string error;
      try {
        ParseRange(client.Call("/v3/kv/range", RangeBody("ready")));
        return true;
      } catch (const std::exception& failure) {
        error = failure.what();
      }
      const bool exited = Exited(member);
      if (exited || std::chrono::steady_clock::now() >= deadline) {  // its log read only then
        const std::string log = LogTail(member);
        if (exited && may_retry && log.find("address already in use") != std::string::npos) {
          return false;
        }
        FAIL("etcd member " << Name(member) << (exited ? " exited" : " did not answer in 30 s")
                            << ": " << error << "; " << SpaceLeft() << "; the end of its log:\n"
                            << log);
      }
      std::this_thread::sleep_for(50ms);  // etcd has no readiness event to wait on
    }
  }

  // True when `member` has exited (and it is reaped).
  bool Exited(int member) {
    pid_t& pid = pids_.at(member);
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == pid) pid = -1;
    return pid <= 0;
  }

  // The last lines (about 2 KB) of `member`'s log.
  std::string LogTail(int member) const {
    std::ifstream in(dir_ + "/" + Name(member) + ".log");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 2048 ? text.substr(text.size() - 2048) : text;
  }

  // "N MiB free in DIR", for a member that cannot start.
  std::string SpaceLeft() const {
    std::error_code error;
    const auto space = std::filesystem::space(dir_, error);
    if (error) return "free space in " + dir_ + " unknown: " + error.message();
    return std::to_string(space.available >> 20) + " MiB free in " + dir_;
  }

  void KillAll() {
    for (std::size_t i = 0; i < pids_.size(); ++i) Kill(static_cast<int>(i));
  }

  EtcdClusterOptions options_;
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

}  // namespace ddprun::store::etcd::testing
