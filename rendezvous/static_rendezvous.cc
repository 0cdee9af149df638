#include "rendezvous/static_rendezvous.h"

#include <algorithm>

#include "common/duration.h"
#include "common/host_port.h"
#include "common/integer.h"
#include "store/prefix_store.h"

namespace ddprun::rendezvous {
namespace {

constexpr std::chrono::milliseconds kSlice{1000};
constexpr std::chrono::milliseconds kOwnConnectTimeout{10'000};  // a barrier's own connection

std::chrono::milliseconds Ms(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration);
}

std::string JoinKey(int node_rank) { return "ddprun/join/" + std::to_string(node_rank); }
constexpr const char* kWorkerPortKey = "ddprun/worker_port";

}  // namespace

StaticRendezvous::StaticRendezvous(StaticRendezvousOptions options, StoreConnector connect)
    : options_(std::move(options)), connect_(std::move(connect)) {}

std::string StaticRendezvous::RoundPrefix(const std::string& run_id, int round) {
  return "ddprun/" + run_id + "/" + std::to_string(round);
}

void StaticRendezvous::Shutdown() {
  closed_ = true;
  std::lock_guard lock(store_mutex_);
  if (store_) store_->Interrupt();
}

RendezvousInfo StaticRendezvous::NextRendezvous() {
  try {
    return Join();
  } catch (const store::StoreConnectionError&) {
    ThrowIfClosed();  // Shutdown() interrupted the store
    throw;
  }
}

RendezvousInfo StaticRendezvous::Join() {
  ThrowIfClosed();
  const auto start = options_.clock->Now();
  const auto deadline = start + options_.join_timeout;
  Report(0, start, false);
  if (!store_) ConnectUntil(start, deadline);
  const int round = round_++;
  round_store_ = std::make_shared<store::PrefixStore>(RoundPrefix(options_.run_id, round), store_);
  if (!job_store_) {
    job_store_ = std::make_shared<store::PrefixStore>("ddprun/" + options_.run_id + "/job", store_);
  }
  const bool own_store = static_cast<bool>(options_.pick_worker_port);
  if (own_store && options_.node_rank == 0) {  // before joining: it is there once all joined
    round_store_->SetString(kWorkerPortKey, std::to_string(options_.pick_worker_port()));
  }
  round_store_->SetString(JoinKey(options_.node_rank), options_.host);
  WaitForAll(*round_store_, start, deadline);
  RendezvousInfo info;
  info.store = round_store_.get();
  info.job_store = job_store_.get();
  info.group_rank = options_.node_rank;
  info.group_world_size = options_.num_nodes;
  info.round = round;
  info.master_addr = options_.master_addr;
  info.master_port = own_store ? WorkerPort(*round_store_) : options_.master_port;
  info.use_agent_store = !own_store;
  info.open_round_store = [connect = connect_, prefix = RoundPrefix(options_.run_id, round)] {
    return std::make_shared<store::PrefixStore>(prefix, connect(kOwnConnectTimeout));
  };
  return info;
}

// Retries in short attempts so that Shutdown() is noticed while node 0 is not up yet.
void StaticRendezvous::ConnectUntil(TimePoint start, TimePoint deadline) {
  std::string last_error;
  while (options_.clock->Now() < deadline) {
    ThrowIfClosed();
    try {
      auto store = connect_(
          std::clamp(Ms(deadline - options_.clock->Now()), std::chrono::milliseconds{1}, kSlice));
      std::lock_guard lock(store_mutex_);
      store_ = std::move(store);
      if (closed_) store_->Interrupt();
      return;
    } catch (const store::StoreConnectionError& error) {
      last_error = error.what();
    }
    Report(0, start, false);
  }
  Report(0, start, true);
  throw RendezvousTimeoutError(
      "rendezvous timed out after " + DurationText(options_.join_timeout) + ": node 0's store at " +
      HostPort{options_.master_addr, options_.master_port}.ToString() + " never answered (" +
      last_error +
      "); start node 0, check --master_addr/--master_port, or raise --rdzv_conf "
      "join_timeout=SECONDS");
}

void StaticRendezvous::WaitForAll(store::Store& store, TimePoint start, TimePoint deadline) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < options_.num_nodes; ++rank) keys.push_back(JoinKey(rank));
  for (;;) {
    ThrowIfClosed();
    const auto left = Ms(deadline - options_.clock->Now());
    try {
      store.Wait(keys, std::clamp(left, std::chrono::milliseconds{1}, kSlice));
      Report(options_.num_nodes, start, true);
      return;
    } catch (const store::StoreTimeout&) {
    }
    std::string missing;
    const int joined = CountJoined(store, missing);
    if (options_.clock->Now() >= deadline) {
      Report(joined, start, true);
      throw RendezvousTimeoutError(
          "rendezvous timed out after " + DurationText(options_.join_timeout) + ": " +
          std::to_string(joined) + "/" + std::to_string(options_.num_nodes) +
          " nodes joined; missing node_rank " + missing + " (waiting at " +
          HostPort{options_.master_addr, options_.master_port}.ToString() +
          "); start them or raise --rdzv_conf join_timeout=SECONDS");
    }
    Report(joined, start, false);
  }
}

int StaticRendezvous::WorkerPort(store::Store& round_store) {
  const std::string text = round_store.GetString(kWorkerPortKey);
  const auto port = ParseInt(text);
  if (port && *port > 0 && *port < 65536) return static_cast<int>(*port);
  throw RendezvousConnectionError("the round's worker store port '" + text +
                                  "' published by node 0 is not a port");
}

int StaticRendezvous::CountJoined(store::Store& store, std::string& missing) {
  int joined = 0;
  for (int rank = 0; rank < options_.num_nodes; ++rank) {
    if (store.Check({JoinKey(rank)})) {
      ++joined;
    } else {
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  return joined;
}

void StaticRendezvous::Report(int joined, TimePoint start, bool done) {
  if (!options_.on_progress) return;
  options_.on_progress(
      {joined, options_.num_nodes, Ms(options_.clock->Now() - start), options_.join_timeout, done});
}

void StaticRendezvous::ThrowIfClosed() const {
  if (closed_) {
    throw RendezvousClosedError("the rendezvous '" + options_.run_id + "' was shut down");
  }
}

}  // namespace ddprun::rendezvous
