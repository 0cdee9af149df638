// How a round of the dynamic rendezvous closes and what it settles (docs/elastic.md, "The
// round protocol"): the accounting of the previous round's members, the seal, the restart
// count, the quorum after a loss, and the nodes dropped as dead while the round formed.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/dynamic_rendezvous_values.h"

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;
using values::IntField;
using values::IntText;

constexpr milliseconds kRecordWait{1'000};  // a node's ADD -> the key it writes right after

}  // namespace

// One ADD per member and round decides whether this call is the one that counts it; the
// member's kind (late) is written before `accounted` moves, so whoever sees the count
// complete also sees it.
bool DynamicRendezvous::MarkAccounted(int round, int rank, int members, bool late) {
  const std::string mark = RoundKey(round, "acct/" + std::to_string(rank));
  if (late && store_->Add(RoundKey(round, "late/" + std::to_string(rank)), 1) == 1) {
    store_->Add(RoundKey(round, "late"), 1);
  }
  const bool first = store_->Add(mark, 1) == 1;
  if (store_->Add(RoundKey(round, "accounted"), first ? 1 : 0) < members) return false;
  store_->SetString(RoundKey(round, "all_accounted"), "1");
  return true;
}

bool DynamicRendezvous::AwaitsAccounting(int round) {
  if (round == 0 || !store_->Check({RoundKey(round - 1, "sealed")})) return false;
  return !store_->Check({RoundKey(round, "all_accounted")});
}

bool DynamicRendezvous::AccountedAndSealable(int round) {
  const SeqValue seq{store_->Add(RoundKey(round, "seq"), 0)};
  if (seq.Seals() > 0) return false;
  if (seq.Arrivals() >= options_.min_nodes) return true;
  // Fewer than MIN: seal now only when the quorum is lost for good, i.e. every member of the
  // previous round rejoined or is gone, and too few rejoined.
  const Quorum quorum = CountQuorum(round, seq.Arrivals(), {});
  if (quorum.Holds()) return false;
  for (int rank = 0; rank < quorum.previous_nodes; ++rank) {
    if (quorum.rejoined.contains(rank)) continue;
    if (!store_->Check({keys_.Gone(round - 1, rank)})) return false;
  }
  return true;
}

// The ADD of kSeal is ordered with every arrival's, so its result counts exactly the nodes of
// the round; only the first sealer (seal count 1) goes on. A seal by MAX closes the round to
// arrivals at once (a waiting spare takes its place there) but settles the restart count only
// once the previous round's members are accounted for: a member that died with its workers'
// peers failing around it is declared lost by its ring neighbour or the sweep within the
// heartbeat timeout, and that loss, not a failure, ended the round.
void DynamicRendezvous::Seal(int round, SealBy by, const Ticket* mine) {
  const SeqValue seq{store_->Add(RoundKey(round, "seq"), SeqValue::kSeal)};
  if (seq.Seals() != 1) return;
  // For a node that settles the round should this sealer die: later ADDs (late nodes) move the
  // counter on, but only this value counts the round.
  store_->SetString(RoundKey(round, "sealed_seq"), std::to_string(seq.raw));
  if (by == SealBy::kMax && mine != nullptr && options_.member_timeout.count() > 0 &&
      AwaitsAccounting(round)) {
    store_->SetString(RoundKey(round, "settling"),
                      std::to_string(WallClockMs(clock())));  // for views
    try {
      WaitBeating(RoundKey(round, "all_accounted"), *mine, options_.member_timeout);
    } catch (const store::StoreTimeout&) {
      // A member nobody declared gone in member_timeout: settle with what is known.
    }
  }
  // A spare queued behind a full round may have died while it waited (its beats stopped).
  const bool drop_dead = options_.keep_alive_interval.count() > 0 &&
                         (by == SealBy::kLastCall || (by == SealBy::kMax && round > 0));
  const auto dropped = drop_dead
                           ? DeadWhileForming(round, std::min(seq.Arrivals(), options_.max_nodes))
                           : std::vector<std::pair<int, int>>{};
  Publish(round, seq, dropped);
}

std::optional<SeqValue> DynamicRendezvous::RecordedSeq(int round, const std::string& name) {
  try {
    store_->Wait({RoundKey(round, name)}, kRecordWait);
  } catch (const store::StoreTimeout&) {
    return std::nullopt;
  }
  return SeqValue{IntText(store_->GetString(RoundKey(round, name)))};
}

// Without the record (the sealer died between its ADD and that write), the counter as it is.
SeqValue DynamicRendezvous::SealedSeq(int round) {
  if (auto sealed = RecordedSeq(round, "sealed_seq")) return *sealed;
  return SeqValue{store_->Add(RoundKey(round, "seq"), 0)};
}

// Arrivals past MAX (spares queued for a full round) are not of it: the MAX-th arrival's own
// ADD counted the round's workers (`full`, written right after it). Without that record (it
// died in between, one round trip), everyone counts.
SeqValue DynamicRendezvous::CountedArrivals(int round, SeqValue sealed) {
  if (sealed.Arrivals() <= options_.max_nodes) return sealed;
  return RecordedSeq(round, "full").value_or(sealed);
}

void DynamicRendezvous::Publish(int round, SeqValue sealed_seq,
                                const std::vector<std::pair<int, int>>& dropped) {
  const SeqValue seq = CountedArrivals(round, sealed_seq);
  int dropped_workers = 0;
  for (const auto& [ticket, nproc] : dropped) dropped_workers += nproc;
  Json sealed{{"nodes", seq.Arrivals() - static_cast<int>(dropped.size())},
              {"world", seq.Workers() - dropped_workers},
              {"restarts", RestartCountFor(round)},
              {"dropped", dropped}};
  const Quorum quorum = CountQuorum(round, seq.Arrivals(), dropped);
  if (quorum.needed) {
    sealed["quorum"] = quorum.Holds();
    sealed["survivors"] = quorum.survivors;
    sealed["members"] = quorum.members;
    sealed["needed"] = quorum.Needed();
  }
  const store::Bytes mine = store::Store::ToBytes(sealed.dump());
  if (store_->CompareSet(RoundKey(round, "sealed"), {}, mine) != mine) return;
  if (quorum.Holds()) return;
  // This side stops: wake the round's nodes still waiting for MIN, and tell later ones why.
  const std::string why = QuorumMessage(round, quorum.survivors, quorum.members, quorum.Needed());
  store_->SetString(RoundKey(round, "min"), "1");
  store_->SetString(keys_.Closed(), why);
  Announce(round, {RoundChange::Kind::kClosed, -1, options_.node.host, why});
}

bool DynamicRendezvous::QuorumLostWithout(int round) {
  if (ticket_rounds_.contains(round)) return false;
  const std::string sealed = RoundKey(round, "sealed");
  if (!store_->Check({sealed})) return false;
  return !Json::parse(store_->GetString(sealed)).value("quorum", true);
}

// Needed after a loss (lost > 0) and in a moved store's first round (strict): the survivors are
// the round's nodes that were members of the previous round (their records' "prev"), and the
// members that came back after the round sealed (`late`: a spare took their place).
DynamicRendezvous::Quorum DynamicRendezvous::CountQuorum(
    int round, int nodes, const std::vector<std::pair<int, int>>& dropped) {
  Quorum quorum;
  if (round == 0) return quorum;
  quorum.strict = store_->Check({RoundKey(round, "strict")});
  quorum.needed = quorum.strict || store_->Add(RoundKey(round, "lost"), 0) > 0;
  if (!quorum.needed || !store_->Check({RoundKey(round - 1, "sealed")})) {
    quorum.needed = false;
    return quorum;
  }
  const Json previous = Json::parse(store_->GetString(RoundKey(round - 1, "sealed")));
  quorum.previous_nodes = IntField(previous, "nodes");
  quorum.members =
      quorum.previous_nodes - static_cast<int>(store_->Add(RoundKey(round, "left"), 0));
  std::set<int> skipped;
  for (const auto& [ticket, nproc] : dropped) skipped.insert(ticket);
  std::set<std::pair<std::string, int>> newcomers;  // (addr, pid)
  int late_members = 0;
  for (int ticket = 1; ticket <= nodes; ++ticket) {
    if (skipped.contains(ticket)) continue;
    const std::string record = keys_.Node(round, ticket);
    try {  // written right after the node's ADD; a node that died in between does not count
      store_->Wait({record}, std::max(options_.keep_alive_interval, milliseconds{1000}));
    } catch (const store::StoreTimeout&) {
      continue;
    }
    const NodeRecord node = NodeRecord::Decode(store_->GetString(record));
    const int prev = node.prev.value_or(-1);
    if (prev >= 0) quorum.rejoined.insert(prev);
    if (prev < 0) newcomers.emplace(node.node.addr, node.node.pid);
  }
  // A member that never saw the previous round sealed (its store died first) came as a
  // newcomer: it is still one of the previous round's members.
  const int previous_tickets = IntField(previous, "nodes") +
                               static_cast<int>(previous.value("dropped", Json::array()).size());
  for (int ticket = 1; !newcomers.empty() && ticket <= previous_tickets; ++ticket) {
    const std::string record = keys_.Node(round - 1, ticket);
    if (!store_->Check({record})) continue;
    const NodeDescriptor node = NodeRecord::Decode(store_->GetString(record)).node;
    late_members += static_cast<int>(newcomers.erase({node.addr, node.pid}));
  }
  late_members += static_cast<int>(store_->Add(RoundKey(round, "late"), 0));
  quorum.survivors = static_cast<int>(quorum.rejoined.size()) + late_members;
  return quorum;
}

std::string DynamicRendezvous::QuorumMessage(int round, int survivors, int members,
                                             int needed) const {
  return "lost quorum: only " + std::to_string(survivors) + " of the " + std::to_string(members) +
         " nodes of round " + std::to_string(round - 1) +
         " came back to the rendezvous store (at least " + std::to_string(needed) +
         " needed); the others may be training on the other side of a network partition, so "
         "this side stops";
}

// The nodes silent for keep_alive_interval x keep_alive_max_attempt, or none when fewer than
// MIN would remain (the round then forms with everyone, as without the check).
std::vector<std::pair<int, int>> DynamicRendezvous::DeadWhileForming(int round, int nodes) {
  const std::int64_t patience = options_.HeartbeatTimeout().count();
  const std::int64_t now = WallClockMs(clock());
  std::vector<std::pair<int, int>> dropped;
  for (int ticket = 1; ticket <= nodes; ++ticket) {
    const std::string record = keys_.Node(round, ticket);
    try {  // written right after the node's ADD; never, if it died in between
      store_->Wait({record}, options_.keep_alive_interval);
    } catch (const store::StoreTimeout&) {
      return {};  // its worker count is unknown: drop nobody (the ring watch will, later)
    }
    const NodeRecord node = NodeRecord::Decode(store_->GetString(record));
    std::int64_t last = node.at_ms.value_or(now);
    const std::string beat = keys_.FormingHeartbeatAt(round, ticket);
    if (store_->Check({beat}))
      last = std::max<std::int64_t>(last, IntText(store_->GetString(beat)));
    if (now - last > patience) dropped.emplace_back(ticket, node.node.local_world_size);
  }
  if (nodes - static_cast<int>(dropped.size()) < options_.min_nodes) return {};
  return dropped;
}

// The restart count moves on only when a worker failure ended the previous round and no member
// of it was lost or left: workers of the survivors of a lost node fail too (their collective
// breaks, e.g. gloo's "Connection closed by peer"), and that is the loss, not a failure.
int DynamicRendezvous::RestartCountFor(int round) {
  int restarts = 0;
  if (round > 0 && store_->Check({RoundKey(round - 1, "sealed")})) {
    restarts = IntField(Json::parse(store_->GetString(RoundKey(round - 1, "sealed"))), "restarts");
  }
  const bool failed = store_->Add(RoundKey(round, "failures"), 0) > 0;
  const bool lost_a_member = store_->Add(keys_.GoneCount(round), 0) > 0;
  // A member that lost the store stopped its workers, so the others' failed: not a failure.
  const bool outage = store_->Add(RoundKey(round, "outage"), 0) > 0;
  return restarts + (failed && !lost_a_member && !outage ? 1 : 0);
}

void DynamicRendezvous::DeclareGone(int round, int group_rank, const RoundChange& change) {
  Announce(round, change);
  AccountGone(round, group_rank, change);
}

void DynamicRendezvous::AccountGone(int round, int group_rank, const RoundChange& change) {
  const std::string token = options_.node.host + ":" + std::to_string(options_.node.pid);
  const store::Bytes mark = store::Store::ToBytes(token);
  const std::string gone = keys_.Gone(round, group_rank);
  // Counted once, whoever declares it and however often (the same watch may declare twice).
  if (store_->Add(gone + "/n", 1) != 1) return;
  store_->Set(gone, mark);
  store_->Add(keys_.GoneCount(round + 1), 1);  // before the accounting: read by the sealer
  if (change.kind == RoundChange::Kind::kNodeLost) store_->Add(RoundKey(round + 1, "lost"), 1);
  if (change.kind == RoundChange::Kind::kNodeLeaving) store_->Add(RoundKey(round + 1, "left"), 1);
  if (!store_->Check({RoundKey(round, "sealed")})) return;
  const int members = IntField(Json::parse(store_->GetString(RoundKey(round, "sealed"))), "nodes");
  // The survivors may all have rejoined already (their workers failed with the lost peer's
  // connections): the declaration that accounts for the last member seals the next round, or
  // lets its sealer (a seal by MAX, waiting for this) settle it.
  if (MarkAccounted(round + 1, group_rank, members) && AccountedAndSealable(round + 1)) {
    Seal(round + 1, SealBy::kAccounting);
  }
}

}  // namespace ddprun::rendezvous
