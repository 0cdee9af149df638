// The c10d and etcd elastic handler: DynamicRendezvous rounds over one connection to
// the rendezvous store, plus the round's worker store. The member of group rank 0 serves a
// fresh c10d store for the round's workers (WorkerStoreHost; no key of an earlier round can
// reach them, whatever ended it) and publishes its address in the round; the others read it.
// Every agent conversation of the round (failure barrier, exit barrier) is under the round's
// own prefix of the rendezvous store. Where the rendezvous store is, is decided per round
// (StoreFailover): before each round a member checks that its store is still there and, when
// it is lost, moves it to a successor among the last round's members (docs/elastic.md); etcd
// (replicated_store) never moves, its outages are waited out until the join timeout.
// NextRendezvous and AnnounceRoundEnd block: they run on the agent's runner thread;
// Shutdown() and StoreAddress() may be called from any thread; Shutdown cancels at once.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/rendezvous_handler.h"
#include "rendezvous/static_rendezvous.h"
#include "rendezvous/store_failover.h"

namespace ddprun::rendezvous {

// Where the c10d store of one round's workers is: served by this agent, or (an authenticated
// rendezvous, which PyTorch clients cannot join) by the workers themselves on a port the agent
// picks (TORCHELASTIC_USE_AGENT_STORE=False).
class WorkerStoreHost {
 public:
  virtual ~WorkerStoreHost() = default;
  // Stops any earlier store and serves a new, empty one (or picks the workers' port); returns
  // its port.
  virtual int Serve() = 0;
  virtual void Stop() = 0;
  // False: rank 0's worker serves the store at the port Serve() returned.
  virtual bool AgentServes() const { return true; }
};

struct ElasticHandlerOptions {
  DynamicRendezvousOptions rendezvous;
  std::string advertised_addr;  // workers' MASTER_ADDR when this node has group rank 0
  std::chrono::milliseconds read_timeout{60'000};  // waiting for rank 0's worker store address
  std::vector<HostPort> endpoints;  // --rdzv_endpoint, a list (the first: the original store)
  bool serve_first = false;         // this machine is the first endpoint's: serve it
  FailoverOptions failover;
  // The rendezvous store replicates itself (etcd): it is never served here nor moved; the
  // site's Connect(endpoints.front()) reaches the whole cluster, and while no member answers a
  // join waits it out (pausing `outage_retry` between tries) until the join timeout, or until
  // read_timeout when it never answered yet (a wrong endpoint fails within read_timeout).
  bool replicated_store = false;
  std::chrono::milliseconds outage_retry{1'000};
};

class ElasticRendezvousHandler : public RendezvousHandler {
 public:
  ElasticRendezvousHandler(ElasticHandlerOptions options, StoreSite& site,
                           WorkerStoreHost& worker_store);

  RendezvousInfo NextRendezvous() override;
  void SetClosed() override;
  void Shutdown() override;
  std::string RunId() const override { return options_.rendezvous.run_id; }
  bool Elastic() const override { return true; }
  void AnnounceRoundEnd(const RoundEnd& end) override;

  // Where the rendezvous store of the current round is (for the round's monitor).
  HostPort StoreAddress() const;

 private:
  // The round this node is a member of (none before the first one formed).
  std::optional<FormedRound> Current() const;
  // Before a join: find the store (a first join), check it is still there, or move it.
  void PrepareStore();
  // A replicated store that did not answer a join attempt started at `attempt_started`: waits
  // and retries until the join timeout (read_timeout before its first answer) since the outage
  // began, then throws RendezvousConnectionError.
  void AwaitReplicatedStore(const store::StoreConnectionError& error,
                            std::chrono::steady_clock::time_point attempt_started);
  void MoveStore(const FormedRound& current, const std::string& why);
  // Logs and records the loss of the store (and of its host, when a member); returns that
  // member's group rank, or -1.
  int ReportLost(const std::string& why);
  // `relocate`: this node serves `at`, a fresh store at the first endpoint. While a node waits
  // alone or as a spare at a store it serves, it looks for a moved store of the job of a newer
  // epoch (FindMoved) and joins that instead.
  void UseStore(StoreAt at, bool relocate = false);
  // A moved store appeared while this node waited alone at its own: stop serving, join it.
  void JoinMovedStore();
  bool MoveAfterLostQuorum(const RendezvousQuorumError& error);
  bool RejoinElsewhere(const RendezvousQuorumError& error);
  bool RejoinsAsMember(const StoreAt& moved);
  void JoinAsNewcomer(StoreAt moved, nlohmann::json event);
  // A hot spare starts to wait for a formed round to end: it learns that round's successor
  // candidates, so that it can follow the store when it moves (it never formed a round, so
  // basis_ is empty, and the endpoints name only the lost store).
  void LearnSpareBasis();
  // A spare lost the store: when it is gone (not merely slow) and a candidate of the round it
  // waited behind serves the moved store, joins that as a newcomer; false otherwise.
  bool FollowMovedStoreAsSpare();
  bool WaitsAsSpare() const;
  // current_ formed at the store this node uses now (no move since).
  bool AtStoreOfCurrentRound() const;
  void Event(const std::string& name, const std::string& fields_json);
  std::optional<RendezvousInfo> Publish(const FormedRound& formed);
  // Waits for group rank 0's worker store address; false: rank 0 was declared lost instead.
  bool AwaitMaster(const FormedRound& formed, const std::string& master_key);
  [[noreturn]] void ThrowClosed() const;

  ElasticHandlerOptions options_;
  RendezvousKeys keys_;
  StoreSite& site_;
  StoreFailover failover_;
  WorkerStoreHost& worker_store_;
  std::shared_ptr<store::Store> store_;
  HostPort store_at_;
  int epoch_ = 0;
  std::unique_ptr<DynamicRendezvous> rendezvous_;
  std::shared_ptr<store::Store> round_store_;  // the round's agent keys
  std::shared_ptr<store::Store> job_store_;    // the job's keys that outlive rounds
  std::optional<FailoverBasis> basis_;         // the current round's successor candidates
  std::optional<FailoverBasis> spare_basis_;   // those of the round this spare waits behind
  std::optional<StoreAt> moved_;  // found by the join's give_up_alone (runner thread only)
  std::optional<std::chrono::steady_clock::time_point> outage_since_;  // replicated store
  bool answered_ = false;                                    // the replicated store answered once
  std::vector<std::pair<std::string, std::string>> events_;  // for the next round's info
  mutable std::mutex mutex_;  // current_, store_ and store_at_ for other threads
  std::optional<FormedRound> current_;
  std::atomic<bool> shutdown_{false};
  // A join that a store error interrupted after its ADD, and the store it arrived at: the
  // retry resumes it there (no second arrival), and forgets it in any other store.
  struct Interrupted {
    Arrival arrival;
    HostPort at;
    int epoch = 0;
  };
  std::optional<Interrupted> interrupted_;
  // The round this node left because the store did not answer it (RoundEnd::kStoreLost),
  // recorded at its next arrival.
  std::optional<int> outage_round_;
  // The interrupted arrival, when the retry is in the same store; consumed.
  std::optional<Arrival> TakeInterrupted();
};

}  // namespace ddprun::rendezvous
