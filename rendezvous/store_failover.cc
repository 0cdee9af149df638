#include "rendezvous/store_failover.h"

#include <algorithm>
#include <stdexcept>

#include "common/duration.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;

}  // namespace

std::vector<RoundMember> SuccessorOrder(const FailoverBasis& basis) {
  std::vector<RoundMember> order;
  for (const RoundMember& member : basis.candidates) {
    if (!member.node.serves_store) order.push_back(member);
  }
  std::sort(order.begin(), order.end(),
            [](const RoundMember& a, const RoundMember& b) { return a.group_rank < b.group_rank; });
  return order;
}

namespace {

// The position of `group_rank` in `order`, or order.size() when it is not there.
std::size_t Index(const std::vector<RoundMember>& order, int group_rank) {
  const auto found = std::find_if(order.begin(), order.end(), [&](const RoundMember& member) {
    return member.group_rank == group_rank;
  });
  return static_cast<std::size_t>(found - order.begin());
}

}  // namespace

StoreFailover::StoreFailover(FailoverOptions options, StoreSite& site)
    : options_(std::move(options)), site_(site), keys_{options_.run_id} {}

std::optional<StoreAt> StoreFailover::TryStore(const HostPort& at, int above, bool fail_on_auth,
                                               milliseconds timeout) {
  try {
    auto store = site_.Connect(at, timeout.count() > 0 ? timeout : options_.probe_timeout);
    const MovedStoreMarker marker = ReadMovedStoreMarker(*store, keys_);
    if (!marker.ready) return std::nullopt;  // its successor is still seeding it
    if (above >= 0 && marker.epoch <= above) return std::nullopt;
    return StoreAt{at, std::move(store), marker.epoch, false};
  } catch (const store::StoreConnectionError&) {
    return std::nullopt;
  } catch (const store::StoreTimeout&) {
    return std::nullopt;
  } catch (const std::invalid_argument&) {  // a malformed marker: not this job's store
    return std::nullopt;
  } catch (const store::StoreAuthError&) {  // another job's store (or one without the token)
    if (fail_on_auth) throw;
    return std::nullopt;
  }
}

std::optional<StoreAt> StoreFailover::Reconnect(const HostPort& at, int epoch, int round) {
  const auto deadline = site_.clock().Now() + options_.window;
  for (;;) {
    const Reach reach = site_.Probe(at, options_.probe_timeout);
    if (reach == Reach::kRefused) return std::nullopt;
    if (reach == Reach::kAnswered) {
      if (auto found = TryStore(at, -1, false, ConnectBudget(deadline))) {
        if (!Holds(*found, epoch, round)) return std::nullopt;
        return found;
      }
    }
    if (site_.clock().Now() >= deadline) return std::nullopt;
    if (!site_.Pause(options_.retry)) ThrowCancelled();
  }
}

// Still this job's store (its state is there), or one that took over since.
bool StoreFailover::Holds(const StoreAt& found, int epoch, int round) {
  if (!found.store->Check({keys_.Hint()}) || found.epoch < epoch) return false;
  return found.epoch != epoch || round < 0 || found.store->Check({keys_.Round(round, "sealed")});
}

bool StoreFailover::Closed(const StoreAt& found) { return found.store->Check({keys_.Closed()}); }

std::optional<StoreAt> StoreFailover::AnswersAgain(const HostPort& at, int epoch, int round,
                                                   milliseconds probe_timeout) {
  if (site_.Probe(at, probe_timeout) != Reach::kAnswered) return std::nullopt;
  auto found = TryStore(at, -1);
  if (!found || found->epoch != epoch || !Holds(*found, epoch, round) || Closed(*found)) {
    return std::nullopt;
  }
  return found;
}

std::optional<StoreAt> StoreFailover::AwaitCandidate(const HostPort& at, int above) {
  const auto deadline = site_.clock().Now() + options_.window;
  for (;;) {
    // Answered without the marker: it may be seeding; refused or silent: it may not have
    // noticed the loss yet. Either way, it has the window.
    if (site_.Probe(at, options_.probe_timeout) == Reach::kAnswered) {
      if (auto found = TryStore(at, above, false, ConnectBudget(deadline))) return found;
    }
    if (site_.clock().Now() >= deadline) return std::nullopt;
    if (!site_.Pause(options_.retry)) ThrowCancelled();
  }
}

StoreAt StoreFailover::Succeed(const FailoverBasis& basis, int my_group_rank, const Seed& seed,
                               const std::optional<HostPort>& lost) {
  // The lost store answering again: this node was the one cut off, and nobody moved it.
  const auto back = [&](milliseconds probe_timeout) -> std::optional<StoreAt> {
    if (!lost) return std::nullopt;
    return AnswersAgain(*lost, basis.epoch, basis.round.round, probe_timeout);
  };
  const std::vector<RoundMember> order = SuccessorOrder(basis);
  const milliseconds glance = std::min(options_.retry, options_.probe_timeout);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const RoundMember& candidate = order[i];
    const HostPort at{candidate.node.addr, options_.port};
    if (candidate.group_rank == my_group_rank) {
      // The survivors that came first may have passed over this node (it was away for the
      // window), or an earlier candidate began to serve after this node passed it: a second
      // successor beside it would split the survivors. A full look: this one decides.
      if (auto other = ServingAmong(order, {i}, basis.epoch, options_.probe_timeout)) {
        return *other;
      }
      if (auto again = back(options_.probe_timeout)) return *again;
      if (auto served = site_.Serve(options_.port)) return ServeHere(*served, at, basis, seed);
      // The port is taken here: another agent of this machine may serve it; probe as any other.
    }
    if (auto found = AwaitCandidate(at, basis.epoch)) return *found;
    // One of the others may have begun meanwhile (a candidate passed earlier): a glance, so
    // that a survivor joins it a window later at most, not after the whole walk.
    if (auto other = ServingAmong(order, {i, Index(order, my_group_rank)}, basis.epoch, glance)) {
      return *other;
    }
    if (auto again = back(glance)) return *again;
  }
  throw RendezvousConnectionError(
      "the rendezvous store was lost and none of the " + std::to_string(order.size()) +
      " successor candidates of round " + std::to_string(basis.round.round) +
      " (its first members) served it within " + DurationText(options_.window, 1) +
      " each; the job cannot go on: restart it, or check the network between the nodes");
}

std::optional<StoreAt> StoreFailover::ServingAmong(const std::vector<RoundMember>& order,
                                                   std::initializer_list<std::size_t> skip,
                                                   int above, milliseconds probe_timeout) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    const HostPort at{order[i].node.addr, options_.port};
    if (site_.Probe(at, probe_timeout) != Reach::kAnswered) continue;
    if (auto found = TryStore(at, above)) return found;
  }
  return std::nullopt;
}

StoreAt StoreFailover::ServeHere(const HostPort& served, const HostPort& advertised,
                                 const FailoverBasis& basis, const Seed& seed) {
  auto store = site_.Connect(served, options_.window);
  const MovedStoreMarker marker{basis.epoch + 1, advertised.ToString(), basis.round.round};
  seed(*store, marker);
  return StoreAt{served, std::move(store), marker.epoch, true};
}

StoreAt StoreFailover::Locate(const std::vector<HostPort>& endpoints, bool serve_first,
                              Clock::TimePoint deadline) {
  if (serve_first && !endpoints.empty()) {
    // The job moved while this node was away.
    if (auto found = FindMoved(endpoints, 0, options_.probe_timeout)) return *found;
    if (auto served = site_.Serve(endpoints[0].port.value_or(options_.port))) {
      return StoreAt{*served, site_.Connect(*served, options_.window), 0, true};
    }
  }
  std::string tried;
  for (const HostPort& endpoint : endpoints)
    tried += (tried.empty() ? "" : ",") + endpoint.ToString();
  for (;;) {
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      if (site_.Probe(endpoints[i], options_.probe_timeout) != Reach::kAnswered) continue;
      // The job's own endpoint refusing its token is final: every node needs the same one.
      if (auto found = TryStore(endpoints[i], i == 0 ? -1 : 0, i == 0)) return *found;
    }
    if (site_.clock().Now() >= deadline) break;
    if (!site_.Pause(options_.retry)) ThrowCancelled();
  }
  throw RendezvousConnectionError("no rendezvous store answered at " + tried +
                                  " within join_timeout; start the node of --rdzv_endpoint, or "
                                  "check its address");
}

std::optional<StoreAt> StoreFailover::FindMoved(const std::vector<HostPort>& endpoints, int above,
                                                milliseconds probe_timeout) {
  const milliseconds timeout = std::min(probe_timeout, options_.probe_timeout);
  for (std::size_t i = 1; i < endpoints.size(); ++i) {
    if (site_.Probe(endpoints[i], timeout) != Reach::kAnswered) continue;
    // A closed one is a side that stopped there (a lost quorum): the job is not there.
    if (auto found = TryStore(endpoints[i], above); found && !Closed(*found)) return found;
  }
  return std::nullopt;
}

milliseconds StoreFailover::ConnectBudget(Clock::TimePoint deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - site_.clock().Now());
  return std::max(left, options_.probe_timeout);
}

void StoreFailover::ThrowCancelled() const {
  throw RendezvousClosedError("the rendezvous '" + options_.run_id + "' was shut down");
}

}  // namespace ddprun::rendezvous
