// storm_load: a job's start against a c10d store, and a sustained mixed load. Driven by
// bench/storm_bench.py; prints one JSON line.
//
// Storm (default): N clients connect at once (non-blocking connects from one epoll loop), do
// PyTorch 2.x's handshake (VALIDATE + PING), and meet at PyTorch's store barrier
// (torch.distributed.elastic.utils.store.barrier): each ADDs 1 to "storm/count"; the one that
// gets N SETs "storm/done"; every client WAITs for "storm/done". Times are from the first
// connect: the last handshake answered, the last ADD answered, the last client released.
// Connect errors before the ADD (a reset, a refused SYN) are retried, as PyTorch's client does;
// later ones fail the run. --hold keeps every connection open after the release until stdin
// closes, so that the bench can read the server's memory with N idle clients; --idle stops each
// client after its handshake (no barrier: idle connections only).
//
// Sustain (--sustain-seconds S): N clients loop over SET, GET (WAIT + GET), ADD, APPEND + CHECK,
// COMPARE_SET, MULTI_GET and DELETE_KEY on keys of their own (a bounded key space); every
// --barrier-every cycles all of them meet at a barrier round whose keys the next round deletes,
// and every --reconnect-every cycles a client reconnects. Stops after S seconds.
//
// Many connections from one source to one port may exhaust the ephemeral ports: the clients are
// spread over --addresses loopback addresses (127.0.0.1, .2, ...), as destinations (the server
// listens on 0.0.0.0) or as sources (--spread source, bind before connect).
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/storm_conn.h"

namespace ddprun::bench {
namespace {

using Clock = std::chrono::steady_clock;
using store::Command;

struct Flags {
  int port = 0;
  int clients = 1000;
  int addresses = 0;  // 0: one per 8,000 clients
  std::string spread = "destination";
  double timeout_s = 120;
  bool hold = false;
  bool idle = false;  // handshake only, no barrier
  double sustain_s = 0;
  int barrier_every = 40;
  int reconnect_every = 25;
  int value_bytes = 64;
};

// CPU seconds (user + system) this process has used so far.
double CpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The soft limit up to what N sockets need: the hard limit, or above it where allowed (root).
rlim_t RaiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  rlimit raised{wanted, std::max(wanted, limit.rlim_max)};
  if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return wanted;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_max;
}

// Where client i connects to, and from.
class Endpoints {
 public:
  Endpoints(const Flags& flags, int addresses)
      : port_(flags.port), addresses_(addresses), by_source_(flags.spread == "source") {}
  sockaddr_in To(int i) const { return LoopbackAddress(by_source_ ? 0 : i % addresses_, port_); }
  const sockaddr_in* From(int i) {
    if (!by_source_) return nullptr;
    from_ = LoopbackAddress(i % addresses_, 0);
    return &from_;
  }

 private:
  int port_;
  int addresses_;
  bool by_source_;
  sockaddr_in from_{};
};

class Epoll {
 public:
  Epoll() : fd_(::epoll_create1(EPOLL_CLOEXEC)), events_(4096) {
    if (fd_ < 0) throw std::runtime_error("epoll_create1 failed");
  }
  ~Epoll() { ::close(fd_); }
  void Add(int fd, int index, bool connecting) { Control(EPOLL_CTL_ADD, fd, index, connecting); }
  void Connected(int fd, int index) { Control(EPOLL_CTL_MOD, fd, index, false); }
  // Calls on_event(index) for each ready descriptor; waits up to `timeout_ms`.
  template <typename OnEvent>
  void Poll(int timeout_ms, OnEvent&& on_event) {
    const int ready =
        ::epoll_wait(fd_, events_.data(), static_cast<int>(events_.size()), timeout_ms);
    for (int i = 0; i < ready; ++i) on_event(static_cast<int>(events_[i].data.u64));
  }

 private:
  void Control(int op, int fd, int index, bool connecting) {
    epoll_event event{};
    event.events = connecting ? EPOLLOUT : EPOLLIN;
    event.data.u64 = static_cast<std::uint64_t>(index);
    if (::epoll_ctl(fd_, op, fd, &event) != 0) throw std::runtime_error("epoll_ctl failed");
  }
  int fd_;
  std::vector<epoll_event> events_;
};

Bytes Encode(Command command, std::vector<std::string> keys, std::vector<Bytes> values = {},
             std::int64_t number = 0) {
  return StormConn::Encode({command, std::move(keys), std::move(values), number, 0});
}

// Shared by both modes: the clients, their endpoints and the loop; connects with retries.
class Driver {
 public:
  explicit Driver(const Flags& flags, int addresses) : flags_(flags), endpoints_(flags, addresses) {
    for (int i = 0; i < flags.clients; ++i) conns_.push_back(std::make_unique<StormConn>(i));
  }

 protected:
  // Starts client i's connect; the handshake follows at once or on EPOLLOUT.
  void Connect(int i) {
    auto& conn = *conns_[i];
    const bool connected = conn.Open(endpoints_.To(i), endpoints_.From(i));
    epoll_.Add(conn.fd(), i, !connected);
    if (connected) conn.SendHandshake();
  }
  // Handles an event of client i; true when its reply is complete.
  bool OnEvent(int i) {
    auto& conn = *conns_[i];
    if (conn.connecting()) {
      conn.FinishConnect();
      epoll_.Connected(conn.fd(), i);
      conn.SendHandshake();
      return false;
    }
    return conn.Read();
  }
  // OnEvent that reconnects a client whose connect or handshake failed.
  bool OnEventRetrying(int i) {
    try {
      return OnEvent(i);
    } catch (const std::runtime_error&) {
      ++retries_;
      Connect(i);
      return false;
    }
  }

  const Flags& flags_;
  Endpoints endpoints_;
  Epoll epoll_;
  std::vector<std::unique_ptr<StormConn>> conns_;
  long retries_ = 0;
};

class Storm : public Driver {
 public:
  using Driver::Driver;

  void Run(int addresses) {
    const int n = flags_.clients;
    steps_.assign(static_cast<std::size_t>(n), Step::kHandshake);
    start_ = Clock::now();
    cpu_start_ = CpuSeconds();
    const auto deadline = start_ + std::chrono::duration<double>(flags_.timeout_s);
    for (int i = 0; i < n; ++i) {
      Connect(i);
      if (i % 64 == 63) epoll_.Poll(0, [this](int c) { Advance(c); });
    }
    while (released_.size() < static_cast<std::size_t>(n) && Clock::now() < deadline) {
      epoll_.Poll(100, [this](int c) { Advance(c); });
    }
    Print(addresses);
  }

 private:
  enum class Step { kHandshake, kAdd, kWait, kReleased };

  void Advance(int i) {
    auto& step = steps_[static_cast<std::size_t>(i)];
    if (step == Step::kHandshake ? !OnEventRetrying(i) : !OnEvent(i)) return;
    auto& conn = *conns_[i];
    if (step == Step::kHandshake && flags_.idle) {
      connected_s_ = Since(start_);
      released_.push_back(connected_s_);
      step = Step::kReleased;
    } else if (step == Step::kHandshake) {
      connected_s_ = Since(start_);
      conn.Send(Encode(Command::kAdd, {"storm/count"}, {}, 1), ReplyKind::kI64);
      step = Step::kAdd;
    } else if (step == Step::kAdd) {
      added_s_ = Since(start_);
      Bytes requests;
      if (conn.ReplyI64() == flags_.clients)
        requests = Encode(Command::kSet, {"storm/done"}, {{'1'}});
      const Bytes wait = Encode(Command::kWait, {"storm/done"});
      requests.insert(requests.end(), wait.begin(), wait.end());
      conn.Send(requests, ReplyKind::kU8);
      step = Step::kWait;
    } else if (step == Step::kWait) {
      released_.push_back(Since(start_));
      step = Step::kReleased;
    }
  }

  void Print(int addresses) const {
    std::vector<double> sorted = released_;
    std::sort(sorted.begin(), sorted.end());
    const double p50 = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    std::printf(
        "{\"mode\": \"%s\", \"clients\": %d, \"released\": %zu, \"addresses\": %d, "
        "\"spread\": \"%s\", \"connected_s\": %.4f, \"added_s\": %.4f, "
        "\"released_s\": %.4f, \"release_p50_s\": %.4f, \"connect_retries\": %ld, "
        "\"load_cpu_s\": %.3f}\n",
        flags_.idle ? "idle" : "storm", flags_.clients, released_.size(), addresses,
        flags_.spread.c_str(), connected_s_, added_s_, sorted.empty() ? 0 : sorted.back(), p50,
        retries_, CpuSeconds() - cpu_start_);
    std::fflush(stdout);
  }

  std::vector<Step> steps_;
  Clock::time_point start_;
  double cpu_start_ = 0;
  double connected_s_ = 0;
  double added_s_ = 0;
  std::vector<double> released_;
};

class Sustain : public Driver {
 public:
  using Driver::Driver;

  void Run() {
    const int n = flags_.clients;
    state_.assign(static_cast<std::size_t>(n), {});
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(flags_.sustain_s);
    for (int i = 0; i < n; ++i) Connect(i);
    while (Clock::now() < end) epoll_.Poll(100, [this](int c) { Advance(c); });
    const double seconds = Since(start);
    std::printf(
        "{\"mode\": \"sustain\", \"clients\": %d, \"seconds\": %.1f, \"ops\": %ld, "
        "\"ops_per_s\": %.0f, \"barrier_rounds\": %ld, \"reconnects\": %ld}\n",
        n, seconds, ops_, static_cast<double>(ops_) / seconds, rounds_, reconnects_);
  }

 private:
  enum class Step {
    kHandshake,
    kSetWait,
    kGet,
    kAdd,
    kCheck,
    kCas,
    kMultiGet,
    kDelete,
    kBarrierAdd,
    kBarrierWait,
    kCleanCount,
    kCleanDone
  };
  struct State {
    Step step = Step::kHandshake;
    long cycle = 0;
    bool last = false;  // got N from the barrier round's ADD
  };

  std::string Key(int i, const std::string& what) const {
    return "sustain/" + std::to_string(i) + "/" + what;
  }
  std::string Round(const std::string& what, long round) const {
    return "sustain/round/" + std::to_string(round) + "/" + what;
  }
  void Send(int i, Step step, Bytes requests, int count, ReplyKind kind, int values = 1) {
    state_[static_cast<std::size_t>(i)].step = step;
    ops_ += count;
    conns_[i]->Send(requests, kind, values);
  }
  static Bytes Join(Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  void Advance(int i) {
    auto& state = state_[static_cast<std::size_t>(i)];
    if (state.step == Step::kHandshake ? !OnEventRetrying(i) : !OnEvent(i)) return;
    const std::string slot = Key(i, std::to_string(state.cycle % 16));
    const long round = state.cycle / flags_.barrier_every;
    switch (state.step) {
      case Step::kHandshake:
        return StartCycle(i);
      case Step::kSetWait:
        return Send(i, Step::kGet, Encode(Command::kGet, {slot}), 1, ReplyKind::kValues);
      case Step::kGet:
        return Send(i, Step::kAdd,
                    Encode(Command::kAdd, {"sustain/counter/" + std::to_string(i % 8)}, {}, 1), 1,
                    ReplyKind::kI64);
      case Step::kAdd:
        return Send(i, Step::kCheck,
                    Join(Encode(Command::kAppend, {Key(i, "log")}, {Bytes(16, 'a')}),
                         Encode(Command::kCheck, {slot})),
                    2, ReplyKind::kU8);
      case Step::kCheck:
        return Send(i, Step::kCas, Encode(Command::kCompareSet, {Key(i, "cas")}, {{}, {'v'}}), 1,
                    ReplyKind::kValues);
      case Step::kCas:
        return Send(i, Step::kMultiGet, Encode(Command::kMultiGet, {slot, Key(i, "cas")}), 1,
                    ReplyKind::kValues, 2);
      case Step::kMultiGet:
        return Send(i, Step::kDelete, Encode(Command::kDeleteKey, {Key(i, "log")}), 1,
                    ReplyKind::kI64);
      case Step::kDelete:
        return EndCycle(i);
      case Step::kBarrierAdd: {
        state.last = conns_[i]->ReplyI64() == flags_.clients;
        Bytes wait = Encode(Command::kWait, {Round("done", round)});
        if (!state.last) return Send(i, Step::kBarrierWait, wait, 1, ReplyKind::kU8);
        return Send(i, Step::kBarrierWait,
                    Join(Encode(Command::kSet, {Round("done", round)}, {{'1'}}), wait), 2,
                    ReplyKind::kU8);
      }
      case Step::kBarrierWait:
        if (state.last) ++rounds_;
        if (!state.last || round < 2) return StartCycle(i);
        // Every client has left the previous round: its keys can go.
        return Send(i, Step::kCleanCount, Encode(Command::kDeleteKey, {Round("count", round - 1)}),
                    1, ReplyKind::kI64);
      case Step::kCleanCount:
        return Send(i, Step::kCleanDone, Encode(Command::kDeleteKey, {Round("done", round - 1)}), 1,
                    ReplyKind::kI64);
      case Step::kCleanDone:
        return StartCycle(i);
    }
  }

  void StartCycle(int i) {
    const std::string slot = Key(i, std::to_string(state_[static_cast<std::size_t>(i)].cycle % 16));
    Send(i, Step::kSetWait,
         Join(Encode(Command::kSet, {slot},
                     {Bytes(static_cast<std::size_t>(flags_.value_bytes), 'x')}),
              Encode(Command::kWait, {slot})),
         2, ReplyKind::kU8);
  }

  void EndCycle(int i) {
    auto& state = state_[static_cast<std::size_t>(i)];
    ++state.cycle;
    if (state.cycle % flags_.barrier_every == 0) {
      const long round = state.cycle / flags_.barrier_every;
      return Send(i, Step::kBarrierAdd, Encode(Command::kAdd, {Round("count", round)}, {}, 1), 1,
                  ReplyKind::kI64);
    }
    if (state.cycle % flags_.reconnect_every == 0) {
      ++reconnects_;
      state.step = Step::kHandshake;
      return Connect(i);
    }
    StartCycle(i);
  }

  std::vector<State> state_;
  long ops_ = 0;
  long rounds_ = 0;
  long reconnects_ = 0;
};

int Run(const Flags& flags) {
  const int addresses = flags.addresses > 0 ? flags.addresses : (flags.clients + 7999) / 8000;
  const rlim_t files = RaiseFileLimit(static_cast<rlim_t>(flags.clients) + 64);
  if (files < static_cast<rlim_t>(flags.clients) + 16) {
    throw std::runtime_error("RLIMIT_NOFILE is " + std::to_string(files) + ", too low for " +
                             std::to_string(flags.clients) + " clients (ulimit -Hn)");
  }
  if (flags.sustain_s > 0) {
    Sustain(flags, addresses).Run();
    return 0;
  }
  Storm storm(flags, addresses);
  storm.Run(addresses);
  if (flags.hold) {  // the connections stay open until stdin closes
    std::string line;
    while (std::getline(std::cin, line)) {
    }
  }
  return 0;
}

}  // namespace
}  // namespace ddprun::bench

int main(int argc, char** argv) {
  ddprun::bench::Flags flags;
  CLI::App app{"storm_load: N clients meet at a c10d store barrier, or a sustained mixed load"};
  app.add_option("--port", flags.port)->required();
  app.add_option("--clients", flags.clients)->check(CLI::Range(1, 1 << 20));
  app.add_option("--addresses", flags.addresses, "loopback addresses to spread over (0: auto)")
      ->check(CLI::Range(0, 254));
  app.add_option("--spread", flags.spread,
                 "spread the clients over destination or source addresses")
      ->check(CLI::IsMember({"destination", "source"}));
  app.add_option("--timeout", flags.timeout_s, "seconds to wait for every release");
  app.add_flag("--hold", flags.hold, "keep the connections open until stdin closes");
  app.add_flag("--idle", flags.idle, "connect and handshake only (the clients stay idle)");
  app.add_option("--sustain-seconds", flags.sustain_s, "run the sustained mixed load instead");
  app.add_option("--barrier-every", flags.barrier_every)->check(CLI::Range(1, 1 << 20));
  app.add_option("--reconnect-every", flags.reconnect_every)->check(CLI::Range(1, 1 << 20));
  app.add_option("--value-bytes", flags.value_bytes)->check(CLI::Range(0, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  try {
    return ddprun::bench::Run(flags);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "storm_load: %s\n", error.what());
    return 1;
  }
}
