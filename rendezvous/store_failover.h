// Where the rendezvous store is, and who serves it once it is lost (docs/elastic.md, "Surviving
// the loss of the store host"). Policy only, over the StoreSite seam (probe, connect, serve; its
// time is a Clock and its waits a CancellablePause): launcher/ implements the site over TCP,
// tests with a fake site on a fake clock (tests/unit/rendezvous/fake_store_site.h).
//   Reconnect: is the store still there? Refused means the process that held it is gone (and
//     its keys), so at once; silent is retried for the window (the heartbeat timeout); a store
//     without this job's state is gone too.
//   Succeed: the survivors walk the lost round's first members in group-rank order (the lost
//     store host left out): this node → serve and seed, unless another serves already (the
//     first survivors passed over this node while it was away); another → join it if it serves
//     this job's store of a newer epoch within the window, else a glance at the others (one
//     passed earlier may serve now), then the next one.
//   Locate: a node without a round tries the endpoint list (the first one as is, the others
//     only when they carry a moved store of this job).
//   FindMoved: a node that serves a fresh store at the first endpoint (Locate found no moved
//     one) looks again while it waits alone in it: the survivors may move the store only after
//     it started (a restarted store host); then it joins theirs.
#pragma once
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cancellable_pause.h"
#include "common/clock.h"
#include "common/host_port.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "store/store.h"

namespace ddprun::rendezvous {

enum class Reach { kAnswered, kRefused, kSilent };

// The operating system's side of finding and serving stores, and the time they are sought on:
// deadlines read clock(), the waits between tries are Pause()s on it.
class StoreSite {
 public:
  explicit StoreSite(Clock& clock = RealClock()) : pause_(clock) {}
  virtual ~StoreSite() = default;
  StoreSite(const StoreSite&) = delete;
  StoreSite& operator=(const StoreSite&) = delete;
  // One connection attempt within `timeout`: answered, refused (nothing listens there) or silent
  // (no answer: the host is down or cut off).
  virtual Reach Probe(const HostPort& at, std::chrono::milliseconds timeout) = 0;
  // A store client of `at`, retrying until `timeout`; throws StoreConnectionError.
  virtual std::shared_ptr<store::Store> Connect(const HostPort& at,
                                                std::chrono::milliseconds timeout) = 0;
  // Serves an empty store on every interface at `port`, in this process, from now on; returns
  // where this process reaches it, or nullopt when the port is taken.
  virtual std::optional<HostPort> Serve(int port) = 0;
  // Stops the store Serve() started, once its clients are gone (no-op when none).
  virtual void StopServing() {}

  Clock& clock() const { return pause_.clock(); }
  // Waits `duration` on clock(); false (at once) when cancelled.
  bool Pause(std::chrono::milliseconds duration) { return pause_.Pause(duration); }
  // Any thread, for good: every Pause returns false at once, and Probe promptly.
  void Cancel() { pause_.Cancel(); }
  bool Cancelled() const { return pause_.Cancelled(); }

 private:
  CancellablePause pause_;
};

// What a member knows of the round it formed, for taking over a lost store.
struct FailoverBasis {
  FormedRound round;
  std::vector<RoundMember> candidates;  // the round's first members, group-rank order
  int epoch = 0;                        // of the store that served the round
};

inline constexpr int kSuccessorCandidates = 8;

// The candidates in the order they take over: group-rank order, the lost store host left out.
std::vector<RoundMember> SuccessorOrder(const FailoverBasis& basis);

struct FailoverOptions {
  std::string run_id;
  int port = kDefaultRendezvousPort;         // every successor serves at this port
  std::chrono::milliseconds window{15'000};  // the heartbeat timeout
  std::chrono::milliseconds retry{100};      // between two probes of one address
  std::chrono::milliseconds probe_timeout{1000};
  // A node serving a fresh store at the first endpoint looks for a moved one this often while
  // it waits alone in its first round (0: never; the launcher: keep_alive_interval).
  std::chrono::milliseconds relocate_check{0};
};

// A connected store and where it is.
struct StoreAt {
  HostPort address;
  std::shared_ptr<store::Store> store;
  int epoch = 0;
  bool serving = false;  // served by this process
};

class StoreFailover {
 public:
  // Fills an empty store this node now serves, so that the basis's members can rejoin it.
  using Seed = std::function<void(store::Store&, const MovedStoreMarker&)>;

  StoreFailover(FailoverOptions options, StoreSite& site);

  // The store at `at` (of epoch `epoch` or newer) if it is still there; nullopt once it is
  // gone. `round` (>= 0): the round this node formed there, which the same epoch's store must
  // hold (a fresh store a restarted store host serves, where it arrived already, does not).
  // Throws RendezvousClosedError when cancelled.
  std::optional<StoreAt> Reconnect(const HostPort& at, int epoch, int round = -1);
  // The store that takes over from the lost one: served here (seeded by `seed`) or found at an
  // earlier candidate. Throws RendezvousConnectionError when no candidate serves one.
  // `lost`: the lost store's address; should it answer again with the basis round (this node
  // was the one cut off, and nobody moved the store), it is returned (its epoch, the basis's).
  StoreAt Succeed(const FailoverBasis& basis, int my_group_rank, const Seed& seed,
                  const std::optional<HostPort>& lost = std::nullopt);
  // Its rendezvous is closed (the job finished, or a side lost its quorum there).
  bool Closed(const StoreAt& found);
  // For a node without a round: `serve_first` (this machine is the first endpoint's) looks for
  // a moved store at the others, then serves the first endpoint's port unless it is taken;
  // then the endpoints in order until `deadline`. Throws RendezvousConnectionError.
  StoreAt Locate(const std::vector<HostPort>& endpoints, bool serve_first,
                 Clock::TimePoint deadline);
  // A moved store of this job (marker epoch above `above`, ready, not closed) at the endpoints
  // after the first, probed once each within `probe_timeout` (capped by the options'); nullopt
  // when none.
  std::optional<StoreAt> FindMoved(const std::vector<HostPort>& endpoints, int above,
                                   std::chrono::milliseconds probe_timeout);

 private:
  // A store of this job at `at` with a marker epoch above `above` (or any, when `above` < 0),
  // connecting within `timeout` (0: probe_timeout). A store that refuses the token
  // (StoreAuthError) is not this job's: nullopt, or rethrown with fail_on_auth.
  std::optional<StoreAt> TryStore(const HostPort& at, int above, bool fail_on_auth = false,
                                  std::chrono::milliseconds timeout = {});
  // What is left of the window until `deadline`, never less than probe_timeout: an address
  // that answered a probe is alive, and a slow link must not cut its connection short.
  std::chrono::milliseconds ConnectBudget(Clock::TimePoint deadline);
  std::optional<StoreAt> AwaitCandidate(const HostPort& at, int above);
  // `found` holds this job's state, of epoch `epoch` or newer; of `epoch` itself, round `round`
  // sealed there (unless round < 0).
  bool Holds(const StoreAt& found, int epoch, int round);
  // The store at `at` of epoch `epoch` itself, holding round `round` and not closed, after one
  // probe.
  std::optional<StoreAt> AnswersAgain(const HostPort& at, int epoch, int round,
                                      std::chrono::milliseconds probe_timeout);
  // The first candidate but those at `skip` that serves a moved store above epoch `above`.
  std::optional<StoreAt> ServingAmong(const std::vector<RoundMember>& order,
                                      std::initializer_list<std::size_t> skip, int above,
                                      std::chrono::milliseconds probe_timeout);
  StoreAt ServeHere(const HostPort& served, const HostPort& advertised, const FailoverBasis& basis,
                    const Seed& seed);
  [[noreturn]] void ThrowCancelled() const;

  FailoverOptions options_;
  StoreSite& site_;
  RendezvousKeys keys_;
};

}  // namespace ddprun::rendezvous
