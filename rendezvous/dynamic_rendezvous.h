// The dynamic (elastic) rendezvous over any Store: rounds of MIN..MAX nodes that form, close,
// and form again when a node fails, is lost, or arrives. Written against the Store seam only,
// so the c10d TCP store and etcd can carry it unchanged. docs/elastic.md explains the protocol;
// in short, under "ddprun/rdzv/<run_id>/r<k>/":
//   seq      one packed counter: arrivals (ticket), their workers (rank base), and the seal.
//            A join is one ADD; the ADD that seals the round is atomic with every arrival, so
//            a node either made the round or knows at once that it is late.
//   node/<t> the node with ticket t (group rank t-1): JSON {host, addr, pid, nproc, at, store,
//            prev}: `store` when it serves the rendezvous store, `prev` its group rank in
//            round k-1 (-1: a newcomer).
//   gone/<r> set once group rank r of round k is declared lost or leaving.
//   min      set once MIN nodes arrived (starts everyone's last call).
//   sealed   {"nodes", "world", "restarts", "dropped": [[ticket, nproc], ...]}, written by the
//            first sealer; nodes and world exclude the dropped (dead while the round formed).
//   fhb_at/<t> while the round forms (or its spares wait for round k-1 to end): the wall-clock
//            time (epoch ms) of ticket t's last beat.
//   acct/<r> member r of round k-1 is accounted for (rejoined, late, or declared gone): the
//            first ADD on it moves `accounted` on, so each member counts once.
//   accounted  members of round k-1 accounted for: when it reaches round k-1's size with at
//            least MIN arrivals, round k seals at once (no last call), and `all_accounted` is
//            set; the restart count of round k is settled only then (or member_timeout after
//            a seal by MAX), so a loss nobody declared yet is never charged as a restart.
//   full     the MAX-th arrival's seq (arrivals past MAX are spares for round k+1).
//   settling set (epoch ms) while a round closed by MAX waits for the accounting.
//   sealed_seq the first sealer's seal ADD result, written right after it (the count a node
//            settling the round for a sealer that died uses).
//   late     members of round k-1 that came back after round k sealed (they wait in round
//            k+1): they count for round k's quorum, since they reached this store.
//   failures number of worker failures that ended round k-1; the restart count moves on when
//            there was one and `gone` (members of round k-1 declared lost or leaving) is 0.
//   lost, left  members of round k-1 declared lost / leaving: after a loss, round k seals only
//            with a quorum of round k-1 (docs/elastic.md, failover): sealed gets "quorum",
//            "survivors" and "members", and a round without quorum fails every member.
//   strict   seeded in a moved store's first round: its quorum is more than half, not half.
//   hb_base  seeded in a moved store's basis round: when its members' beats start to count.
//   change   the first reason round k must end (failure, node lost, node waiting, leaving).
//   hb/<t>   heartbeat counter of group rank t (ticket t+1); its ring neighbour watches it;
//   hb_at/<t> the wall-clock time (epoch ms) of its last beat, for views.
//   alive/<t> (etcd) attached to group rank t's lease while it keeps it alive; its ring
//            neighbour watches it (rendezvous/lease_liveness_rules.h).
//   master   "host:port" of the round's worker store (served by group rank 0).
//   agent/   the round's agent keys (failure and exit barriers).
// plus "ddprun/rdzv/<run_id>/round" (the newest round opened, a hint for joiners),
// "ddprun/rdzv/<run_id>/closed" once the job has finished (its value: why), and
// "ddprun/rdzv/<run_id>/store" in a store that took over from a lost one: {epoch, addr, basis}.
// Round k+1 forms only after round k has a change (its members are leaving it), so a newcomer
// never starts a second group. A round seals when MAX nodes arrived, when every member of the
// previous round is accounted for (with MIN arrivals), or when last_call_timeout passed since
// MIN arrived. Group ranks are arrival order within the round; global ranks are prefix sums of
// nproc in that order.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "rendezvous/rendezvous_handler.h"
#include "store/store.h"

namespace ddprun::rendezvous {

// The names of one job's keys (layout above), for the rendezvous and for views of it.
struct RendezvousKeys {
  std::string run_id;
  std::string Prefix() const { return "ddprun/rdzv/" + run_id + "/"; }
  std::string Hint() const { return Prefix() + "round"; }
  std::string Closed() const { return Prefix() + "closed"; }
  std::string MovedStore() const { return Prefix() + "store"; }
  // The prefix of the agents' keys that outlive rounds (RendezvousInfo::job_store).
  std::string Job() const { return Prefix() + "job"; }
  std::string Round(int round, const std::string& name) const {
    return Prefix() + "r" + std::to_string(round) + "/" + name;
  }
  // The NodeRecord of the round's arrival with `ticket` (1, 2, ...): "r<round>/node/<ticket>".
  std::string Node(int round, int ticket) const {
    return Round(round, "node/" + std::to_string(ticket));
  }
  // The liveness keys of group rank `rank` of `round` (layout above): hb/<r>, hb_at/<r>,
  // alive/<r>, gone/<r>; fhb_at/<ticket> while the round forms; "gone", how many members of
  // round-1 were declared gone.
  std::string Heartbeat(int round, int rank) const {
    return Round(round, "hb/" + std::to_string(rank));
  }
  std::string HeartbeatAt(int round, int rank) const {
    return Round(round, "hb_at/" + std::to_string(rank));
  }
  std::string FormingHeartbeatAt(int round, int ticket) const {
    return Round(round, "fhb_at/" + std::to_string(ticket));
  }
  std::string Alive(int round, int rank) const {
    return Round(round, "alive/" + std::to_string(rank));
  }
  std::string Gone(int round, int rank) const {
    return Round(round, "gone/" + std::to_string(rank));
  }
  std::string GoneCount(int round) const { return Round(round, "gone"); }
};

// What a node announces about itself when it joins a round.
struct NodeDescriptor {
  std::string host;  // host name, for messages
  std::string addr;  // address other nodes reach it at (--local_addr or FQDN)
  int pid = 0;
  int local_world_size = 1;
  bool serves_store = false;  // this node's agent serves the rendezvous store
};

// What RendezvousKeys::Node holds (layout above): the descriptor of the node with that ticket,
// written when it takes the ticket (or by the seeder of a moved store), read by the round's other
// nodes, the monitors and `ddprun-store rdzv`. The one codec of that JSON.
struct NodeRecord {
  NodeDescriptor node;
  std::optional<std::int64_t> at_ms;  // wall clock (epoch ms) at its arrival; none when seeded
  std::optional<int> prev;  // its group rank in the previous round, -1 a newcomer; none when seeded

  std::string Encode() const;  // at_ms and prev only when set
  // A missing field takes its default (host and addr "", pid 0, nproc 1, store false, no at or
  // prev): the protocol reads what it needs. Throws std::invalid_argument ("malformed node
  // descriptor: ...") for text that is not a JSON object, or a field of another type (ints
  // within int's range, at within int64's).
  static NodeRecord Decode(const std::string& text);
};

// The host named by the NodeRecord at `node_key` (RendezvousKeys::Node), for messages about that
// node: "<unknown>" when there is no record or it names none.
std::string RecordedHost(store::Store& store, const std::string& node_key);

// A member of a formed round, as the others know it.
struct RoundMember {
  int group_rank = 0;
  NodeDescriptor node;
};

// The marker of a store that took over from a lost one (epoch 0: the original store).
struct MovedStoreMarker {
  int epoch = 0;
  std::string addr;   // host:port it serves at
  int basis = -1;     // the last round formed in the lost store
  bool ready = true;  // false while the successor seeds it (written first, then true last)
};

struct DynamicRendezvousOptions {
  std::string run_id = "none";
  int min_nodes = 1;
  int max_nodes = 1;
  NodeDescriptor node;
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{30'000};
  // How long a round after a formed one may wait for a missing member to be declared gone
  // (keep_alive_interval x (keep_alive_max_attempt + 1)): a member that vanished is accounted
  // for then and the round seals at once, its loss counted as a loss, not as a failure. The
  // last call waits at least this long while earlier members are missing.
  std::chrono::milliseconds member_timeout{0};
  // Liveness while a round forms (0: off): a node waiting for the seal writes fhb_at/<ticket>
  // (its wall clock, epoch ms) every interval; a round sealed by its last call drops the nodes
  // whose last beat is older than interval x attempts on the sealer's clock (as torchrun's
  // keep-alives, clocks are assumed in step), unless fewer than MIN would remain.
  std::chrono::milliseconds keep_alive_interval{0};
  int keep_alive_max_attempt = 3;
  // interval x attempts: how long a node may be silent before it counts as gone.
  std::chrono::milliseconds HeartbeatTimeout() const {
    return keep_alive_interval * keep_alive_max_attempt;
  }
  // Close() gives up after this long (torchrun's close_timeout): RendezvousTimeoutError.
  std::chrono::milliseconds close_timeout{30'000};
  // Told one line when this node starts to wait for a running round to end (a hot spare).
  std::function<void(const std::string&)> on_waiting;
  // Asked every `alone_check_interval` (0: never) while this node waits for MIN as the only
  // arrival of its round, or as a hot spare for a running round to end: true gives the join up
  // (JoinAbandonedError). The handler of a node serving the store it waits at asks whether the
  // job's store moved meanwhile (StoreFailover::FindMoved): the job may go on elsewhere.
  std::function<bool()> give_up_alone;
  std::chrono::milliseconds alone_check_interval{0};
  // Deadlines and the beats' wall-clock times (not owned; outlives the rendezvous). The store's
  // own waits are bounded by the store, in its time.
  Clock* clock = &RealClock();
};

// Join gave up at give_up_alone's word: this node's arrival stays behind in this store.
class JoinAbandonedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A node's place in a round it arrived at: kept across a store error, so that a retried join
// resumes it instead of arriving twice (docs/elastic.md).
struct Arrival {
  int round = 0;
  std::int64_t seq = 0;  // the ADD's result (SeqValue)
};

// Why a round must end; the first one written wins (CompareSet), every member wakes on it.
struct RoundChange {
  enum class Kind { kFailure, kNodeLost, kNodeWaiting, kNodeLeaving, kClosed };
  Kind kind = Kind::kNodeWaiting;
  int group_rank = -1;  // the node concerned (-1: a newcomer)
  std::string host;
  std::string detail;  // one line: a failure record (JSON) or a reason

  std::string Encode() const;
  static RoundChange Decode(const std::string& text);  // throws std::invalid_argument
  static const char* KindName(Kind kind);
};

// The formed round as this node sees it (also what RendezvousInfo carries).
struct FormedRound {
  int round = 0;
  int group_rank = 0;
  int group_world_size = 0;
  int base_global_rank = 0;
  int global_world_size = 0;
  int restart_count = 0;
};

// Packed `seq` counter: bits 0-19 arrivals, 20-49 workers, 50-62 seals.
struct SeqValue {
  static constexpr std::int64_t kArrival = 1;
  static constexpr std::int64_t kWorker = std::int64_t{1} << 20;
  static constexpr std::int64_t kSeal = std::int64_t{1} << 50;
  std::int64_t raw = 0;
  int Arrivals() const { return static_cast<int>(raw & (kWorker - 1)); }
  int Workers() const { return static_cast<int>((raw / kWorker) & ((kSeal / kWorker) - 1)); }
  int Seals() const { return static_cast<int>(raw / kSeal); }
};

// `store`'s takeover marker for job `keys` (epoch 0: none, the original store); throws
// std::invalid_argument when the key holds something else.
MovedStoreMarker ReadMovedStoreMarker(store::Store& store, const RendezvousKeys& keys);

class DynamicRendezvous {
 public:
  // `store` is this node's own connection to the rendezvous store (blocking calls run on the
  // caller's thread); Interrupt() on it cancels a join at once.
  DynamicRendezvous(DynamicRendezvousOptions options, std::shared_ptr<store::Store> store);

  // Joins the next round: after `previous` when this node was a member of it, else the round
  // now forming. Blocks until the round seals. Throws RendezvousTimeoutError (fewer than MIN
  // nodes for join_timeout, naming how many came), RendezvousClosedError (the job finished, or
  // Interrupt()), or StoreConnectionError (the store is gone).
  FormedRound Join(const std::optional<FormedRound>& previous);
  // The same, resuming `arrival` (a join of this node that a store error interrupted after its
  // ADD, in this same store) instead of taking a new ticket.
  FormedRound Join(const std::optional<FormedRound>& previous,
                   const std::optional<Arrival>& resume);
  // The arrival of the join in progress or interrupted (none before its ADD, or once formed).
  std::optional<Arrival> PendingArrival() const { return pending_; }
  // This member stopped its workers in `round` because the store did not answer it: its
  // arrival at the next round records the outage, and a failure reported in `round` then
  // spends no restart (its peers' workers failed because this node's stopped).
  void MarkOutage(int round) { outage_round_ = round; }

  // Writes `change` for `round` unless a reason is already there; returns the one in force.
  RoundChange Announce(int round, const RoundChange& change);
  // Counts `failures` toward the restart count of the round after `round`.
  void CountFailure(int round);
  // A member's worker failure in `round` (`failure`: kFailure): counted, then announced. When
  // another reason ended the round first (a node waiting, a member leaving, the job closed),
  // the failure is its consequence (the members that saw it stopped their workers and broke
  // this one's collective) and is counted out again. Returns the change in force.
  RoundChange ReportFailure(int round, const RoundChange& failure);
  // Announces `change` for `round`, then declares member `group_rank` of it gone (lost or
  // leaving) in the next round's accounting: Announce, then AccountGone.
  void DeclareGone(int round, int group_rank, const RoundChange& change);
  // The accounting half of DeclareGone, once whoever declares it and however often (about ten
  // store round trips). A ring watch calls it after it has handed the announced change to its
  // agent, so that the agent rejoins meanwhile.
  void AccountGone(int round, int group_rank, const RoundChange& change);
  // Nodes that arrived for the round after `round` (a newcomer waiting, or members rejoining).
  int NodesWaiting(int round);
  // Marks the job finished after `round`: later joins, and nodes waiting for that round to
  // end, throw RendezvousClosedError (RendezvousQuorumError where a lost quorum closed it
  // first: that reason stays). Bounded by close_timeout: past it, throws
  // RendezvousTimeoutError naming the setting.
  void Close(int round);
  bool IsClosed();
  // `round` sealed without a quorum, and this node took no ticket in it here: the seal did not
  // count it (its requests did not reach the store in time, or it came after the seal).
  bool QuorumLostWithout(int round);

  // The first `count` members of formed `round` in group-rank order (the successor candidates).
  std::vector<RoundMember> Members(int round, int count);
  // Seeds an empty store that takes over from a lost one, after `basis` (formed there, with
  // `members` known; `lost_rank`: the member that served the lost store, -1 if none), so that
  // the basis's members rejoin it as round basis+1 (docs/elastic.md). Writes `marker` last.
  void SeedMovedStore(const FormedRound& basis, const std::vector<RoundMember>& members,
                      int lost_rank, const MovedStoreMarker& marker);

  // Key names, for monitors and views.
  std::string RoundKey(int round, const std::string& name) const {
    return keys_.Round(round, name);
  }
  const RendezvousKeys& Keys() const { return keys_; }

 private:
  using TimePoint = Clock::TimePoint;
  struct Ticket {
    int round = 0;
    SeqValue seq;
  };

  enum class SealBy { kMax, kAccounting, kLastCall };

  // `previous` (this node's last round) is the round just before `round`: it arrives there as
  // one of that round's members.
  static bool MemberBefore(const std::optional<FormedRound>& previous, int round) {
    return previous && previous->round + 1 == round;
  }
  // Moves the count of `failures` toward the round after `round` by `delta`.
  void AddFailures(int round, int delta);
  // `missed_one`: this node already missed round `round` - 1 (dropped from it as dead).
  Ticket Arrive(int round, const std::optional<FormedRound>& previous, TimePoint deadline,
                bool missed_one = false);
  // What follows a node's ADD (its record, the wait for the previous round's end, MIN, the
  // accounting, a seal); idempotent, so a resumed arrival runs it again.
  bool Resumable(const Arrival& arrival);
  void AfterArrival(const Ticket& ticket, const std::optional<FormedRound>& previous,
                    bool missed_one, TimePoint deadline);
  // Wait for `key`, beating (fhb_at/<ticket>) every keep_alive_interval meanwhile; `sweep`: the
  // round's first arrival also sweeps the previous round's silent members.
  void WaitBeating(const std::string& key, const Ticket& ticket, std::chrono::milliseconds timeout,
                   bool sweep = true);
  // WaitBeating for MIN, asking give_up_alone every alone_check_interval while this node is the
  // round's only arrival (`spare`: all along, without sweeping: it waits for a running round to
  // end); throws JoinAbandonedError when it says so.
  void WaitAlone(const std::string& key, const Ticket& ticket, std::chrono::milliseconds timeout,
                 bool spare = false);
  // (ticket, nproc) of the nodes of `round`'s `nodes` arrivals that died while it formed.
  std::vector<std::pair<int, int>> DeadWhileForming(int round, int nodes);
  void SignalWaiting(int round, const Ticket& mine);
  void AnnounceRejoin(const FormedRound& previous);
  void AwaitEndOf(int round, const Ticket& mine, TimePoint deadline);
  // Accounts for member `rank` of round `round`-1 (of `members`) in round `round`, once;
  // `late`: it came back after `round` sealed. True when every member is now accounted for.
  bool MarkAccounted(int round, int rank, int members, bool late = false);
  // Round `round` follows a formed round whose members are not all accounted for yet.
  bool AwaitsAccounting(int round);
  std::optional<FormedRound> AwaitSeal(const Ticket& ticket, TimePoint deadline);
  // Closes `round` to arrivals (the seal ADD); the first sealer publishes it. `by` kMax waits
  // (beating as `mine`) up to member_timeout for the previous round's accounting first;
  // kLastCall, and kMax after a formed round (hot spares), drop the nodes that died while the
  // round formed.
  void Seal(int round, SealBy by, const Ticket* mine = nullptr);
  // Settles and writes `sealed` for the `seq` arrivals (first writer wins). A round without
  // quorum then stops this side.
  void Publish(int round, SeqValue seq, const std::vector<std::pair<int, int>>& dropped);
  SeqValue CountedArrivals(int round, SeqValue sealed);
  // The first sealer's ADD result (`sealed_seq`): the round's count, whatever ADDs came after.
  SeqValue SealedSeq(int round);
  // The seq value a node wrote under `name` of `round` right after its ADD; none when it did
  // not come within a round trip's bound (the node died in between).
  std::optional<SeqValue> RecordedSeq(int round, const std::string& name);
  std::optional<FormedRound> ReadSealed(const Ticket& ticket);  // none: this node was dropped
  int RestartCountFor(int round);
  // Round `round`'s quorum of the previous round's members (needed after a loss, or in a moved
  // store's first round), from its first `nodes` tickets, `dropped` excluded.
  struct Quorum {
    bool needed = false;
    bool strict = false;  // more than half (a moved store's first round), else at least half
    int survivors = 0;    // members of the previous round that rejoined
    int members = 0;      // the previous round's members, those that left gracefully excepted
    int previous_nodes = 0;
    std::set<int> rejoined;  // their group ranks in the previous round
    int Needed() const { return strict ? members / 2 + 1 : (members + 1) / 2; }
    bool Holds() const { return !needed || survivors >= Needed(); }
  };
  Quorum CountQuorum(int round, int nodes, const std::vector<std::pair<int, int>>& dropped);
  std::string QuorumMessage(int round, int survivors, int members, int needed) const;
  // Every member of round `round`-1 rejoined or was declared gone; may the round seal now?
  // MIN arrived, or the quorum is lost already (no later arrival can restore it).
  bool AccountedAndSealable(int round);
  // The first arrival of a round after another declares lost the previous round's members
  // that neither rejoined nor were declared gone and stopped beating (docs/elastic.md).
  void SweepSilentMembers(int round);

  int RoundHint();
  Clock& clock() const { return *options_.clock; }
  // What is left until `deadline` on the clock, at least 1 ms.
  std::chrono::milliseconds Left(TimePoint deadline) const;
  void ThrowIfClosed();
  [[noreturn]] void ThrowTooFew(int round);

  DynamicRendezvousOptions options_;
  std::shared_ptr<store::Store> store_;
  RendezvousKeys keys_;
  std::optional<Arrival> pending_;
  std::set<int> ticket_rounds_;  // the rounds this node took (or resumed) a ticket in
  std::optional<int> outage_round_;
};

}  // namespace ddprun::rendezvous
