// The RendezvousHandler seam: forms a round of agents and tells this agent its place in it.
// Failures are typed so that the agent can branch on them.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace ddprun::rendezvous {

class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class RendezvousTimeoutError : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};
class RendezvousClosedError : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};
class RendezvousConnectionError : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};
// Too few members of the previous round came back after a loss: the rest may be training on
// the other side of a network partition, so this side stops (docs/elastic.md, failover).
class RendezvousQuorumError : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};

// The outcome of one round.
struct RendezvousInfo {
  store::Store* store =
      nullptr;  // the round's store; null when the round has one node and no store
  // Keys that outlive the round (--hang-timeout=auto's learned timeout): the job's own prefix of
  // the rendezvous store, valid until the next round; null: none.
  store::Store* job_store = nullptr;
  int group_rank = 0;
  int group_world_size = 1;
  int round = 0;
  std::string master_addr;  // what workers get as MASTER_ADDR / MASTER_PORT
  int master_port = 0;
  bool use_agent_store = false;
  // Decided by a dynamic rendezvous (absent: the agent exchanges role infos, and counts its own
  // restarts): this node's first global rank, the world size, the job-wide restart count.
  std::optional<int> base_global_rank;
  std::optional<int> global_world_size;
  std::optional<int> restart_count;
  // Opens this node's own connection to the round's agent keys (those of `store`), so that a
  // barrier blocked on it can be interrupted at once without breaking `store`. Empty: barriers
  // use `store` and cannot be cancelled before their timeout.
  std::function<std::shared_ptr<store::Store>()> open_round_store;
  // What happened while this round formed, for the event log (e.g. "store_lost",
  // "store_moved"), each already logged on the console by the handler.
  std::vector<std::pair<std::string, std::string>> events;  // name, JSON object of fields
};

// Why a dynamic round ends early, as the agent reports it to the other members.
struct RoundEnd {
  // kStoreLost: this member stopped its workers because the store did not answer it; nothing
  // can be written now, its next arrival says so (a failure of that round then spends no
  // restart: the workers that fail meanwhile lost their peers, not their own run).
  enum class Kind { kFailure, kLeaving, kStoreLost };
  Kind kind = Kind::kFailure;
  std::string record;  // kFailure: the failure record (JSON); kLeaving, kStoreLost: the reason
};

class RendezvousHandler {
 public:
  virtual ~RendezvousHandler() = default;
  // Blocks until the next round is complete; throws a RendezvousError.
  virtual RendezvousInfo NextRendezvous() = 0;
  // The job is over (succeeded, or failed for good): later joins fail with
  // RendezvousClosedError. Membership changes reach the agent as PeerMonitor events, not by
  // polling the handler (torchrun's num_nodes_waiting).
  virtual void SetClosed() = 0;
  virtual void Shutdown() = 0;
  virtual std::string RunId() const = 0;
  // Elastic handlers: the job survives membership changes (the agent re-rendezvouses instead of
  // failing on a lost node) and rounds end through AnnounceRoundEnd. Others: false / no-op.
  virtual bool Elastic() const { return false; }
  // Blocking (runs on the agent's runner): tells every member of the current round to leave it.
  virtual void AnnounceRoundEnd(const RoundEnd&) {}
};

}  // namespace ddprun::rendezvous
