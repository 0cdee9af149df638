// store_load: a load generator for c10d stores. N clients (one connection each) loop over
// set / get / add / wait for a fixed time against HOST:PORT and print one JSON line with the
// throughput and latency percentiles. Driven by bench/store_bench.py.
//
// The clients are driven by --threads epoll loops (default 1), not a thread each: on a small
// machine 64 blocking threads spend more CPU switching than the server spends serving, and the
// bench then measures the load generator. Each client still has exactly one operation in flight
// and issues the requests PyTorch's client issues (a get is WAIT then GET).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/store_protocol.h"
#include "store/tcp_store_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using ddprun::store::Bytes;
using ddprun::store::Command;
using ddprun::store::EncodeRequest;
using ddprun::store::Generation;
using ddprun::store::Request;

struct Flags {
  std::string host = "127.0.0.1";
  int port = 0;
  int clients = 64;
  int threads = 1;
  double seconds = 5;
  int value_bytes = 64;
  bool legacy = false;
};

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// The reply a request is answered with: nothing (SET), a byte, an i64, or u64 + bytes.
enum class Reply { kNone, kU8, kI64, kBytes };

// One client: one connection and the position in its set / get / add / wait cycle.
class Client {
 public:
  Client(const Flags& flags, int index) : flags_(flags), index_(index) {
    generation_ = flags.legacy ? Generation::kLegacy : Generation::kValidated;
    me_ = "bench/" + std::to_string(index);
    neighbour_ = "bench/" + std::to_string((index + 1) % flags.clients) + "/ready";
    value_ = Bytes(static_cast<std::size_t>(flags.value_bytes), 'x');
    Connect();
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int fd() const { return fd_; }

  // Starts the next operation; SETs, which get no reply, complete at once and the cycle goes on.
  void StartNext(std::vector<std::int64_t>& latencies) {
    for (;;) {
      started_ = Clock::now();
      const std::uint64_t step = op_++ % 4;
      const std::string key = me_ + "/" + std::to_string((op_ / 4) % 16);
      if (step == 0) {
        Send({Command::kSet, {key}, {value_}, 0, 0}, Reply::kNone);
        Record(latencies);
        continue;
      }
      if (step == 1) {  // get: WAIT for the key, then GET it
        get_key_ = key;
        Send({Command::kWait, {key}, {}, 0, 0}, Reply::kU8);
      } else if (step == 2) {
        Send({Command::kAdd, {"bench/counter/" + std::to_string(index_ % 8)}, {}, 1, 0},
             Reply::kI64);
      } else {
        Send({Command::kWait, {me_ + "/ready", neighbour_}, {}, 0, 0}, Reply::kU8);
      }
      return;
    }
  }

  // Reads what arrived; true when the operation in flight completed.
  bool OnReadable(std::vector<std::int64_t>& latencies) {
    std::uint8_t chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (n == 0) {
      throw std::runtime_error("the server closed connection " + std::to_string(index_));
    }
    if (n < 0) Fail("recv on connection " + std::to_string(index_));
    input_.insert(input_.end(), chunk, chunk + n);
    if (!ReplyComplete()) return false;
    input_.clear();
    if (!get_key_.empty()) {  // the WAIT of a get answered: now the GET
      Send({Command::kGet, {get_key_}, {}, 0, 0}, Reply::kBytes);
      get_key_.clear();
      return false;
    }
    Record(latencies);
    return true;
  }

 private:
  void Connect() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(flags_.port));
    if (::inet_pton(AF_INET, flags_.host.c_str(), &address.sin_addr) != 1) {
      throw std::runtime_error("store_load: --host must be an IPv4 address");
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) Fail("socket");
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      Fail("connect");
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (generation_ == Generation::kValidated) Handshake();
    const int flags = 1;
    ::ioctl(fd_, FIONBIO, &flags);
  }

  // VALIDATE + PING on the still blocking socket, as PyTorch 2.x's client does.
  void Handshake() {
    Bytes hello = EncodeRequest(generation_,
                                {Command::kValidate, {}, {}, 0, ddprun::store::kValidationMagic});
    const Bytes ping = EncodeRequest(generation_, {Command::kPing, {}, {}, 0, 7});
    hello.insert(hello.end(), ping.begin(), ping.end());
    if (::send(fd_, hello.data(), hello.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(hello.size())) {
      Fail("handshake");
    }
    std::uint8_t echo[4];
    if (::recv(fd_, echo, sizeof echo, MSG_WAITALL) != 4) Fail("handshake reply");
  }

  void Send(const Request& request, Reply reply) {
    const Bytes bytes = EncodeRequest(generation_, request);
    std::size_t sent = 0;
    while (sent < bytes.size()) {  // requests are small: a short write is rare
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        Fail("send");
      }
    }
    expected_ = reply;
  }

  bool ReplyComplete() const {
    switch (expected_) {
      case Reply::kNone:
        return true;
      case Reply::kU8:
        return !input_.empty();
      case Reply::kI64:
        return input_.size() >= 8;
      case Reply::kBytes:
        return input_.size() >= 8 && input_.size() >= 8 + ddprun::store::LoadU64(input_.data());
    }
    return false;
  }

  void Record(std::vector<std::int64_t>& latencies) const {
    latencies.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started_).count());
  }

  const Flags& flags_;
  int index_;
  Generation generation_;
  std::string me_;
  std::string neighbour_;
  Bytes value_;
  int fd_ = -1;
  std::uint64_t op_ = 0;
  Reply expected_ = Reply::kNone;
  std::string get_key_;
  Bytes input_;
  Clock::time_point started_;
};

// Drives `clients` through one epoll instance until `end`; their latencies go to `latencies`.
void RunLoop(std::vector<Client*> clients, Clock::time_point end,
             std::vector<std::int64_t>& latencies) {
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) Fail("epoll_create1");
  for (std::size_t i = 0; i < clients.size(); ++i) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = i;
    if (::epoll_ctl(epoll, EPOLL_CTL_ADD, clients[i]->fd(), &event) != 0) Fail("epoll_ctl");
  }
  latencies.reserve(1 << 22);
  for (auto* client : clients) client->StartNext(latencies);
  std::vector<epoll_event> events(clients.size());
  for (auto now = Clock::now(); now < end; now = Clock::now()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - now).count();
    const int ready =
        ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), static_cast<int>(left));
    if (ready < 0 && errno != EINTR) Fail("epoll_wait");
    for (int i = 0; i < ready; ++i) {
      Client& client = *clients[events[static_cast<std::size_t>(i)].data.u64];
      if (client.OnReadable(latencies) && Clock::now() < end) client.StartNext(latencies);
    }
  }
  ::close(epoll);
}

// Every client's "ready" key, which the cycle's WAITs name; set before the clock starts.
void SetReadyKeys(const Flags& flags) {
  ddprun::store::ClientOptions options;
  options.host = flags.host;
  options.port = flags.port;
  options.generation = flags.legacy ? Generation::kLegacy : Generation::kValidated;
  options.key_prefix = "";  // the raw keys the epoll clients name
  ddprun::store::TcpStoreClient store(options);
  for (int i = 0; i < flags.clients; ++i) {
    store.Set("bench/" + std::to_string(i) + "/ready", Bytes{'1'});
  }
}

double Percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return static_cast<double>(sorted[index]) / 1000.0;
}

int Run(const Flags& flags) {
  SetReadyKeys(flags);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < flags.clients; ++i) clients.push_back(std::make_unique<Client>(flags, i));
  const int threads = std::min(flags.threads, flags.clients);
  std::vector<std::vector<Client*>> shares(static_cast<std::size_t>(threads));
  for (std::size_t i = 0; i < clients.size(); ++i) {
    shares[i % shares.size()].push_back(clients[i].get());
  }
  std::vector<std::vector<std::int64_t>> latencies(shares.size());
  const auto began = Clock::now();
  const auto end =
      began + std::chrono::milliseconds(static_cast<std::int64_t>(flags.seconds * 1000));
  std::vector<std::thread> loops;
  std::vector<std::string> errors(shares.size());
  for (std::size_t t = 0; t < shares.size(); ++t) {
    loops.emplace_back([&, t] {
      try {
        RunLoop(shares[t], end, latencies[t]);
      } catch (const std::exception& error) {
        errors[t] = error.what();
      }
    });
  }
  for (auto& loop : loops) loop.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - began).count();
  for (const auto& error : errors) {
    if (!error.empty()) throw std::runtime_error(error);
  }
  std::vector<std::int64_t> all;
  for (const auto& part : latencies) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  std::printf(
      "{\"clients\": %d, \"threads\": %d, \"ops\": %zu, \"seconds\": %.3f, "
      "\"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
      flags.clients, threads, all.size(), elapsed, static_cast<double>(all.size()) / elapsed,
      Percentile(all, 0.50), Percentile(all, 0.99));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"store_load: c10d store load generator"};
  app.add_option("--host", flags.host, "IPv4 address of the store");
  app.add_option("--port", flags.port)->required();
  app.add_option("--clients", flags.clients)->check(CLI::Range(1, 4096));
  app.add_option("--threads", flags.threads, "epoll loops driving the clients")
      ->check(CLI::Range(1, 64));
  app.add_option("--seconds", flags.seconds)->check(CLI::Range(0.1, 600.0));
  app.add_option("--value-bytes", flags.value_bytes)->check(CLI::Range(0, 1 << 20));
  app.add_flag("--legacy", flags.legacy, "speak PyTorch 1.13's protocol");
  CLI11_PARSE(app, argc, argv);
  try {
    return Run(flags);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "store_load: %s\n", error.what());
    return 1;
  }
}
