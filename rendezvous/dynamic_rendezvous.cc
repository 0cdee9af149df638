#include "rendezvous/dynamic_rendezvous.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/duration.h"
#include "rendezvous/dynamic_rendezvous_values.h"
#include "rendezvous/member_watch.h"

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;
using values::IntAt;
using values::IntField;
using values::IntText;

// A seal ADD -> its "sealed" record: the sealer's few store requests, plus member_timeout when
// it waits for the accounting (a seal by MAX). Past it, the sealer is taken for dead.
constexpr milliseconds kSealPublishGrace{10'000};

constexpr std::pair<RoundChange::Kind, const char*> kKindNames[] = {
    {RoundChange::Kind::kFailure, "failure"},
    {RoundChange::Kind::kNodeLost, "node_lost"},
    {RoundChange::Kind::kNodeWaiting, "node_waiting"},
    {RoundChange::Kind::kNodeLeaving, "node_leaving"},
    {RoundChange::Kind::kClosed, "closed"},
};

}  // namespace

const char* RoundChange::KindName(Kind kind) {
  for (const auto& [value, name] : kKindNames) {
    if (value == kind) return name;
  }
  return "unknown";
}

std::string RoundChange::Encode() const {
  return Json{
      {"kind", KindName(kind)}, {"group_rank", group_rank}, {"host", host}, {"detail", detail}}
      .dump();
}

RoundChange RoundChange::Decode(const std::string& text) {
  try {
    const Json json = Json::parse(text);
    RoundChange change;
    const std::string kind = json.at("kind").get<std::string>();
    const auto* found = std::find_if(std::begin(kKindNames), std::end(kKindNames),
                                     [&](const auto& entry) { return kind == entry.second; });
    if (found == std::end(kKindNames)) throw std::invalid_argument("unknown kind " + kind);
    change.kind = found->first;
    change.group_rank = IntField(json, "group_rank");
    change.host = json.at("host").get<std::string>();
    change.detail = json.at("detail").get<std::string>();
    return change;
  } catch (const Json::exception& error) {
    throw std::invalid_argument(std::string("malformed round change: ") + error.what());
  }
}

DynamicRendezvous::DynamicRendezvous(DynamicRendezvousOptions options,
                                     std::shared_ptr<store::Store> store)
    : options_(std::move(options)), store_(std::move(store)), keys_{options_.run_id} {}

milliseconds DynamicRendezvous::Left(TimePoint deadline) const {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - clock().Now());
  return std::max(left, milliseconds{1});
}

FormedRound DynamicRendezvous::Join(const std::optional<FormedRound>& previous) {
  return Join(previous, std::nullopt);
}

FormedRound DynamicRendezvous::Join(const std::optional<FormedRound>& previous,
                                    const std::optional<Arrival>& resume) {
  const auto deadline = clock().Now() + options_.join_timeout;
  ThrowIfClosed();  // (a node late for the last round would learn it there, but not one early)
  int first = previous ? previous->round + 1 : RoundHint();
  std::optional<FormedRound> member = previous;
  std::optional<Ticket> resumed;
  if (resume && Resumable(*resume)) {
    resumed = Ticket{resume->round, SeqValue{resume->seq}};
    pending_ = resume;
    ticket_rounds_.insert(resume->round);
    const bool missed_one = resume->round > 0 && !MemberBefore(member, resume->round);
    AfterArrival(*resumed, member, missed_one, deadline);
  }
  bool dropped = false;
  for (;;) {  // bounded by the deadline: Arrive throws once it passed
    const Ticket ticket = resumed ? *resumed : Arrive(first, member, deadline, dropped);
    resumed.reset();
    if (auto formed = AwaitSeal(ticket, deadline)) {
      pending_.reset();
      return *formed;
    }
    // Dropped as dead while the round formed (this node was slow, not dead: its beats did not
    // reach the store in time): it waits at the next one, and says so to the round it missed,
    // which has room for it (a member still counts).
    if (MemberBefore(member, ticket.round)) {
      MarkAccounted(ticket.round, member->group_rank, member->group_world_size, true);
    }
    first = ticket.round + 1;
    member.reset();
    dropped = true;
  }
}

// The ticket is still this node's in this store: the round counts it, and its record is
// missing (the error came first) or this node's (not a store that restarted meanwhile).
bool DynamicRendezvous::Resumable(const Arrival& arrival) {
  const SeqValue mine{arrival.seq};
  if (SeqValue{store_->Add(RoundKey(arrival.round, "seq"), 0)}.Arrivals() < mine.Arrivals()) {
    return false;
  }
  const std::string record = keys_.Node(arrival.round, mine.Arrivals());
  if (!store_->Check({record})) return true;
  const NodeDescriptor node = NodeRecord::Decode(store_->GetString(record)).node;
  return node.addr == options_.node.addr && node.pid == options_.node.pid;
}

// One ADD per round tried; a sealed round sends the node on to the next one, where it waits
// (and is seen waiting by the members of the round it missed). A member of the previous round
// that comes late is still accounted for in the round it missed.
DynamicRendezvous::Ticket DynamicRendezvous::Arrive(int round,
                                                    const std::optional<FormedRound>& previous,
                                                    TimePoint deadline, bool missed_one) {
  const std::int64_t delta =
      SeqValue::kArrival + SeqValue::kWorker * options_.node.local_world_size;
  for (;; ++round, missed_one = true) {
    if (clock().Now() >= deadline) ThrowTooFew(round);
    const SeqValue seq{store_->Add(RoundKey(round, "seq"), delta)};
    // The MAX-th arrival's ADD counts the round's workers; arrivals after it wait for the next
    // round (a full round's spares), even before the seal.
    if (seq.Arrivals() == options_.max_nodes && seq.Seals() == 0) {
      store_->SetString(RoundKey(round, "full"), std::to_string(seq.raw));
    }
    if (seq.Seals() > 0 || seq.Arrivals() > options_.max_nodes) {
      if (MemberBefore(previous, round)) {
        MarkAccounted(round, previous->group_rank, previous->group_world_size, true);
      }
      continue;
    }
    const Ticket ticket{round, seq};
    pending_ = Arrival{round, seq.raw};
    ticket_rounds_.insert(round);
    AfterArrival(ticket, previous, missed_one, deadline);
    return ticket;
  }
}

void DynamicRendezvous::AfterArrival(const Ticket& ticket,
                                     const std::optional<FormedRound>& previous, bool missed_one,
                                     TimePoint deadline) {
  const int round = ticket.round;
  const int number = ticket.seq.Arrivals();
  const bool member = MemberBefore(previous, round);
  const NodeDescriptor& node = options_.node;
  // Before this member is accounted for: the sealer reads it (RestartCountFor).
  if (member && outage_round_ == previous->round) store_->Add(RoundKey(round, "outage"), 1);
  store_->SetString(
      keys_.Node(round, number),
      NodeRecord{node, WallClockMs(clock()), member ? previous->group_rank : -1}.Encode());
  const bool all_accounted =
      member && MarkAccounted(round, previous->group_rank, previous->group_world_size);
  if (number == 1) store_->SetString(keys_.Hint(), std::to_string(round));
  if (missed_one) SignalWaiting(round - 1, ticket);
  if (member) AnnounceRejoin(*previous);
  if (round > 0) AwaitEndOf(round - 1, ticket, deadline);
  if (number >= options_.min_nodes) store_->SetString(RoundKey(round, "min"), "1");
  if (all_accounted && AccountedAndSealable(round)) {
    Seal(round, SealBy::kAccounting);
  } else if (number == options_.max_nodes) {
    Seal(round, SealBy::kMax, &ticket);
  }
}

// The round this node missed may still be settling its restart count (a seal by MAX waits for
// the accounting): its record comes within member_timeout, unless its sealer died.
void DynamicRendezvous::SignalWaiting(int round, const Ticket& mine) {
  try {
    WaitBeating(RoundKey(round, "sealed"), mine, options_.member_timeout + kSealPublishGrace,
                /*sweep=*/false);
  } catch (const store::StoreTimeout&) {
    return;
  }
  const Json sealed = Json::parse(store_->GetString(RoundKey(round, "sealed")));
  if (IntField(sealed, "nodes") >= options_.max_nodes) return;  // no room: wait for a change
  Announce(round, {RoundChange::Kind::kNodeWaiting, -1, options_.node.host,
                   "node " + options_.node.host + " is waiting to join"});
}

// A member back at the next round ends its round if nothing did yet: it stopped its workers
// without a word (the store did not answer it: a partition, a loss, a paused process), so the
// others still run theirs and would never see a change, and every member back would wait for
// one as a hot spare of its own round. Its group rank names it; no restart is spent.
void DynamicRendezvous::AnnounceRejoin(const FormedRound& previous) {
  if (store_->Check({RoundKey(previous.round, "change")})) return;
  Announce(previous.round,
           {RoundChange::Kind::kNodeWaiting, previous.group_rank, options_.node.host,
            "node " + std::to_string(previous.group_rank) + " (" + options_.node.host +
                ") rejoins: it stopped its workers when the rendezvous store did not answer it"});
}

// Round `round` + 1 may form only once the members of `round` are leaving it, so that a
// newcomer never starts a second group next to a running one.
void DynamicRendezvous::AwaitEndOf(int round, const Ticket& mine, TimePoint deadline) {
  // No change yet: the round runs full (a node with room would have announced itself).
  if (options_.on_waiting && !store_->Check({RoundKey(round, "change")})) {
    options_.on_waiting("round " + std::to_string(round) + " runs with the maximum of " +
                        std::to_string(options_.max_nodes) +
                        " node(s): this node waits as a hot spare and takes the place of a "
                        "member that is lost or leaves");
  }
  try {
    // A hot spare waits here for as long as the round runs: it beats, so that a spare that
    // died meanwhile is dropped from the round it would fill (DeadWhileForming).
    if (options_.give_up_alone && options_.alone_check_interval.count() > 0) {
      WaitAlone(RoundKey(round, "change"), mine, Left(deadline), /*spare=*/true);
    } else {
      WaitBeating(RoundKey(round, "change"), mine, Left(deadline), /*sweep=*/false);
    }
  } catch (const store::StoreTimeout&) {
    ThrowIfClosed();
    throw RendezvousTimeoutError("round " + std::to_string(round) + " is full (the maximum of " +
                                 std::to_string(options_.max_nodes) +
                                 " nodes) and none of its nodes left within "
                                 "join_timeout=" +
                                 DurationText(options_.join_timeout) +
                                 "; raise the maximum of --nnodes");
  }
  if (RoundChange::Decode(store_->GetString(RoundKey(round, "change"))).kind ==
      RoundChange::Kind::kClosed) {
    ThrowIfClosed();
  }
}

// Common case: two WAITs (MIN, then the seal), each answered by the server when the key comes.
std::optional<FormedRound> DynamicRendezvous::AwaitSeal(const Ticket& ticket, TimePoint deadline) {
  const std::string sealed = RoundKey(ticket.round, "sealed");
  try {
    if (options_.give_up_alone && options_.alone_check_interval.count() > 0 &&
        ticket.seq.Arrivals() == 1) {
      WaitAlone(RoundKey(ticket.round, "min"), ticket, Left(deadline));
    } else {
      WaitBeating(RoundKey(ticket.round, "min"), ticket, Left(deadline));
    }
  } catch (const store::StoreTimeout&) {
    ThrowTooFew(ticket.round);
  }
  // Rounds after the first wait for missing members to be declared gone (member_timeout).
  const auto last_call = ticket.round > 0
                             ? std::max(options_.last_call_timeout, options_.member_timeout)
                             : options_.last_call_timeout;
  try {
    WaitBeating(sealed, ticket, std::min(last_call, Left(deadline)));
  } catch (const store::StoreTimeout&) {
    Seal(ticket.round, SealBy::kLastCall);  // last call is over (or the join deadline came)
    try {
      store_->Wait({sealed}, options_.member_timeout + kSealPublishGrace);  // another sealer's
    } catch (const store::StoreTimeout&) {  // it died before publishing: settle the round here
      Publish(ticket.round, SealedSeq(ticket.round), {});
    }
  }
  return ReadSealed(ticket);
}

// The ADD of kSeal is ordered with every arrival's ADD: its result counts exactly the nodes of
// the round. Only the first sealer (seal count 1) publishes it.
void DynamicRendezvous::WaitBeating(const std::string& key, const Ticket& ticket,
                                    milliseconds timeout, bool sweep) {
  const milliseconds interval = options_.keep_alive_interval;
  if (interval.count() <= 0) {
    store_->Wait({key}, timeout);
    return;
  }
  const auto deadline = clock().Now() + timeout;
  const std::string beat = keys_.FormingHeartbeatAt(ticket.round, ticket.seq.Arrivals());
  for (;;) {
    try {
      store_->Wait({key}, std::min(interval, Left(deadline)));
      return;
    } catch (const store::StoreTimeout&) {
      if (clock().Now() >= deadline) throw;
    }
    store_->SetString(beat, std::to_string(WallClockMs(clock())));
    if (sweep && ticket.seq.Arrivals() == 1 && ticket.round > 0) {
      SweepSilentMembers(ticket.round);
    }
  }
}

// As WaitBeating (the same beats and sweeps), with a look at the round's arrivals every
// alone_check_interval while this node is the only one: once another arrived, the round is a
// real one and the wait goes on as any other.
void DynamicRendezvous::WaitAlone(const std::string& key, const Ticket& ticket,
                                  milliseconds timeout, bool spare) {
  const milliseconds beat_every = options_.keep_alive_interval;
  const milliseconds check_every = options_.alone_check_interval;
  const auto deadline = clock().Now() + timeout;
  const std::string beat = keys_.FormingHeartbeatAt(ticket.round, ticket.seq.Arrivals());
  auto next_beat = beat_every.count() > 0 ? clock().Now() + beat_every : TimePoint::max();
  auto next_check = clock().Now() + check_every;
  bool alone = true;
  for (;;) {
    const TimePoint until = std::min({deadline, next_beat, alone ? next_check : TimePoint::max()});
    try {
      store_->Wait({key}, Left(until));
      return;
    } catch (const store::StoreTimeout&) {
      if (clock().Now() >= deadline) throw;
    }
    const TimePoint now = clock().Now();
    if (now >= next_beat) {
      store_->SetString(beat, std::to_string(WallClockMs(clock())));
      if (ticket.round > 0 && !spare) SweepSilentMembers(ticket.round);
      next_beat = now + beat_every;
    }
    if (alone && now >= next_check) {
      alone = spare || SeqValue{store_->Add(RoundKey(ticket.round, "seq"), 0)}.Arrivals() <= 1;
      if (alone && options_.give_up_alone()) {
        throw JoinAbandonedError("node " + options_.node.host + " gave up waiting alone in round " +
                                 std::to_string(ticket.round));
      }
      next_check = clock().Now() + check_every;
    }
  }
}

void DynamicRendezvous::SweepSilentMembers(int round) {
  const std::string previous_sealed = RoundKey(round - 1, "sealed");
  if (!store_->Check({previous_sealed})) return;
  const int members = IntField(Json::parse(store_->GetString(previous_sealed)), "nodes");
  if (store_->Add(RoundKey(round, "accounted"), 0) >= members) return;
  const std::int64_t patience = options_.HeartbeatTimeout().count();
  const std::string base_key = RoundKey(round - 1, "hb_base");
  const std::optional<std::int64_t> base =
      store_->Check({base_key}) ? std::optional<std::int64_t>(IntText(store_->GetString(base_key)))
                                : std::nullopt;
  const std::int64_t now = WallClockMs(clock());
  for (int rank = 0; rank < members; ++rank) {
    if (store_->Check({RoundKey(round, "acct/" + std::to_string(rank))})) continue;
    const std::string beat = keys_.HeartbeatAt(round - 1, rank);
    const std::optional<std::int64_t> last =
        store_->Check({beat}) ? std::optional<std::int64_t>(IntText(store_->GetString(beat)))
                              : base;
    if (!last || now - *last <= patience) continue;
    const std::string host = MemberHost(*store_, keys_, round - 1, rank);
    DeclareGone(round - 1, rank,
                {RoundChange::Kind::kNodeLost, rank, host,
                 "heartbeats stopped " + DurationText(milliseconds{now - *last}) +
                     " ago and it did not rejoin (seen by round " + std::to_string(round) +
                     "'s first node)"});
  }
}

std::optional<FormedRound> DynamicRendezvous::ReadSealed(const Ticket& ticket) {
  const Json sealed = Json::parse(store_->GetString(RoundKey(ticket.round, "sealed")));
  if (!sealed.value("quorum", true)) {
    throw RendezvousQuorumError(QuorumMessage(ticket.round, IntField(sealed, "survivors"),
                                              IntField(sealed, "members"),
                                              IntField(sealed, "needed")));
  }
  const int mine = ticket.seq.Arrivals();
  int dropped_before = 0;
  int dropped_workers_before = 0;
  for (const auto& entry : sealed.value("dropped", Json::array())) {
    const int dropped_ticket = IntAt(entry, 0);
    if (dropped_ticket == mine) return std::nullopt;
    if (dropped_ticket < mine) {
      ++dropped_before;
      dropped_workers_before += IntAt(entry, 1);
    }
  }
  FormedRound formed;
  formed.round = ticket.round;
  formed.group_rank = mine - 1 - dropped_before;
  formed.group_world_size = IntField(sealed, "nodes");
  formed.base_global_rank =
      ticket.seq.Workers() - options_.node.local_world_size - dropped_workers_before;
  formed.global_world_size = IntField(sealed, "world");
  formed.restart_count = IntField(sealed, "restarts");
  return formed;
}

RoundChange DynamicRendezvous::Announce(int round, const RoundChange& change) {
  const store::Bytes now_stored =
      store_->CompareSet(RoundKey(round, "change"), {}, store::Store::ToBytes(change.Encode()));
  return RoundChange::Decode(store::Store::ToString(now_stored));
}

void DynamicRendezvous::CountFailure(int round) { AddFailures(round, 1); }

void DynamicRendezvous::AddFailures(int round, int delta) {
  store_->Add(RoundKey(round + 1, "failures"), delta);
}

// Counted before the announcement, which wakes the sealer of the next round: a failure that
// ended the round is never missed. A sealer that read the count between the two writes spends
// a restart, as before the correction.
RoundChange DynamicRendezvous::ReportFailure(int round, const RoundChange& failure) {
  CountFailure(round);
  const RoundChange in_force = Announce(round, failure);
  if (in_force.kind != RoundChange::Kind::kFailure) AddFailures(round, -1);
  return in_force;
}

int DynamicRendezvous::NodesWaiting(int round) {
  return SeqValue{store_->Add(RoundKey(round + 1, "seq"), 0)}.Arrivals();
}

// As torchrun's close operation, bounded by close_timeout: each request waits at most what is
// left of it (the c10d client honours the store timeout; etcd's requests have their own bound,
// and the deadline is checked between them).
void DynamicRendezvous::Close(int round) {
  const auto deadline = clock().Now() + options_.close_timeout;
  const milliseconds saved = store_->Timeout();
  const auto within = [&](const auto& request) {
    if (clock().Now() >= deadline) {
      throw store::StoreConnectionError("the store did not answer in time");
    }
    // Rounded up: a request that times out ends at or after the deadline.
    store_->SetTimeout(std::min(saved, std::chrono::ceil<milliseconds>(deadline - clock().Now())));
    request();
  };
  try {
    // A reason there already (a lost quorum) stays: later nodes are told that one.
    within([&] { store_->CompareSet(keys_.Closed(), {}, store::Store::ToBytes("1")); });
    within([&] {
      Announce(round, {RoundChange::Kind::kClosed, -1, options_.node.host, "the job has finished"});
    });
  } catch (const store::StoreConnectionError& error) {
    store_->SetTimeout(saved);
    if (clock().Now() < deadline) throw;
    throw RendezvousTimeoutError(
        "closing the rendezvous '" + options_.run_id + "' took longer than close_timeout=" +
        DurationText(options_.close_timeout) + " (" + error.what() +
        "); the other nodes learn that the job finished when their round ends; raise "
        "close_timeout in --rdzv_conf if the store is slow");
  }
  store_->SetTimeout(saved);
}

bool DynamicRendezvous::IsClosed() { return store_->Check({keys_.Closed()}); }

// One ADD of 0 reads the decimal hint (a missing one reads, and becomes, 0).
int DynamicRendezvous::RoundHint() { return static_cast<int>(store_->Add(keys_.Hint(), 0)); }

void DynamicRendezvous::ThrowIfClosed() {
  if (!IsClosed()) return;
  const std::string why = store_->GetString(keys_.Closed());
  const std::string closed = "the rendezvous '" + options_.run_id + "' is closed: ";
  if (why != "1") throw RendezvousQuorumError(closed + why);  // a lost quorum closed it
  throw RendezvousClosedError(closed + "the job has finished");
}

std::vector<RoundMember> DynamicRendezvous::Members(int round, int count) {
  const Json sealed = Json::parse(store_->GetString(RoundKey(round, "sealed")));
  std::set<int> dropped;
  for (const auto& entry : sealed.value("dropped", Json::array())) {
    dropped.insert(IntAt(entry, 0));
  }
  const int tickets = IntField(sealed, "nodes") + static_cast<int>(dropped.size());
  std::vector<std::string> records;
  for (int ticket = 1; ticket <= tickets && static_cast<int>(records.size()) < count; ++ticket) {
    if (!dropped.contains(ticket)) records.push_back(keys_.Node(round, ticket));
  }
  std::vector<RoundMember> members;
  if (records.empty() || !store_->Check(records)) return members;  // one died before its record
  const std::vector<store::Bytes> values = store_->MultiGet(records);
  for (const store::Bytes& value : values) {
    members.push_back(
        {static_cast<int>(members.size()), NodeRecord::Decode(store::Store::ToString(value)).node});
  }
  return members;
}

MovedStoreMarker ReadMovedStoreMarker(store::Store& store, const RendezvousKeys& keys) {
  if (!store.Check({keys.MovedStore()})) return {};
  try {
    const Json marker = Json::parse(store.GetString(keys.MovedStore()));
    return {IntField(marker, "epoch"), marker.at("addr").get<std::string>(),
            IntField(marker, "basis"), marker.value("ready", true)};
  } catch (const Json::exception& error) {
    throw std::invalid_argument("malformed moved-store marker " + keys.MovedStore() + ": " +
                                error.what());
  }
}

void DynamicRendezvous::SeedMovedStore(const FormedRound& basis,
                                       const std::vector<RoundMember>& members, int lost_rank,
                                       const MovedStoreMarker& marker) {
  const int round = basis.round;
  // First the marker, not ready: a member that reconnects to this address (a successor on the
  // lost store's host) must not take the half-seeded store for the lost one.
  const auto write_marker = [&](bool ready) {
    store_->SetString(
        keys_.MovedStore(),
        Json{{"epoch", marker.epoch}, {"addr", marker.addr}, {"basis", round}, {"ready", ready}}
            .dump());
  };
  write_marker(false);
  store_->SetString(keys_.Hint(), std::to_string(round + 1));
  for (const RoundMember& member : members) {  // for views and the sweep's messages
    const NodeRecord seeded{member.node, std::nullopt, std::nullopt};  // no arrival time, no prev
    store_->SetString(keys_.Node(round, member.group_rank + 1), seeded.Encode());
  }
  store_->SetString(RoundKey(round, "sealed"), Json{{"nodes", basis.group_world_size},
                                                    {"world", basis.global_world_size},
                                                    {"restarts", basis.restart_count},
                                                    {"dropped", Json::array()}}
                                                   .dump());
  // A survivor that never saw the basis sealed joins it late: the seal sends it on to round+1.
  store_->Add(RoundKey(round, "seq"), SeqValue::kSeal);
  // The members' silence counts from one heartbeat timeout after now: a survivor may spend that
  // long awaiting this successor (StoreFailover's window) before it gets here over a slow link.
  store_->SetString(RoundKey(round, "hb_base"),
                    std::to_string(WallClockMs(clock()) + options_.HeartbeatTimeout().count()));
  store_->SetString(RoundKey(round + 1, "strict"), "1");
  std::string host = "<unknown>";
  for (const RoundMember& member : members) {
    if (member.group_rank == lost_rank) host = member.node.host;
  }
  const RoundChange lost{RoundChange::Kind::kNodeLost, lost_rank, host,
                         "the rendezvous store it served was lost"};
  if (lost_rank >= 0) {
    DeclareGone(round, lost_rank, lost);
  } else {
    Announce(round, lost);
  }
  write_marker(true);
}

void DynamicRendezvous::ThrowTooFew(int round) {
  ThrowIfClosed();
  const int arrived = SeqValue{store_->Add(RoundKey(round, "seq"), 0)}.Arrivals();
  throw RendezvousTimeoutError("only " + std::to_string(arrived) + " of the minimum " +
                               std::to_string(options_.min_nodes) + " nodes joined round " +
                               std::to_string(round) +
                               " within join_timeout=" + DurationText(options_.join_timeout) +
                               "; start the missing nodes or lower the minimum of --nnodes");
}

}  // namespace ddprun::rendezvous
