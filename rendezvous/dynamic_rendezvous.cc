#include "rendezvous/dynamic_rendezvous.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

// An int-valued field of a value read from the store: a JSON integer within int's range
// (get<int>() would convert a float or a larger number instead, undefined for a float).
// Throws std::invalid_argument naming the field.
int IntValue(const Json& value, const std::string& what) {
  const bool fits = value.is_number_unsigned()
                        ? std::in_range<int>(value.get<std::uint64_t>())
                        : value.is_number_integer() && std::in_range<int>(value.get<std::int64_t>());
  if (!fits) throw std::invalid_argument(what + " is not an int");
  return value.get<int>();
}

int IntField(const Json& json, const char* name) {
  return IntValue(json.at(name), std::string("\"") + name + "\"");
}

int IntAt(const Json& array, std::size_t index) {
  return IntValue(array.at(index), "entry " + std::to_string(index));
}

constexpr milliseconds kSealPublishTimeout{60'000};  // first sealer -> "sealed" key

constexpr std::pair<RoundChange::Kind, const char*> kKindNames[] = {
    {RoundChange::Kind::kFailure, "failure"},
    {RoundChange::Kind::kNodeLost, "node_lost"},
    {RoundChange::Kind::kNodeWaiting, "node_waiting"},
    {RoundChange::Kind::kNodeLeaving, "node_leaving"},
    {RoundChange::Kind::kClosed, "closed"},
};

milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, milliseconds{1});
}

std::int64_t WallClockMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Seconds(milliseconds duration) {
  const double seconds = static_cast<double>(duration.count()) / 1000.0;
  std::string text = std::to_string(seconds);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

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

DynamicRendezvous::DynamicRendezvous(DynamicRendezvousOptions options, std::shared_ptr<Store> store)
    : options_(std::move(options)), store_(std::move(store)), keys_{options_.run_id} {}

FormedRound DynamicRendezvous::Join(const std::optional<FormedRound>& previous) {
  const auto deadline = Clock::now() + options_.join_timeout;
  ThrowIfClosed();  // (a node late for the last round would learn it there, but not one early)
  int first = previous ? previous->round + 1 : RoundHint();
  std::optional<FormedRound> member = previous;
  for (;;) {  // bounded by the deadline: Arrive throws once it passed
    const Ticket ticket = Arrive(first, member, deadline);
    if (auto formed = AwaitSeal(ticket, deadline)) return *formed;
    first = ticket.round + 1;  // dropped as dead while the round formed: wait for the next one
    member.reset();
  }
}

// One ADD per round tried; a sealed round sends the node on to the next one, where it waits
// (and is seen waiting by the members of the round it missed).
DynamicRendezvous::Ticket DynamicRendezvous::Arrive(int round,
                                                    const std::optional<FormedRound>& previous,
                                                    Clock::time_point deadline) {
  const std::int64_t delta =
      SeqValue::kArrival + SeqValue::kWorker * options_.node.local_world_size;
  bool missed_one = false;
  for (;; ++round, missed_one = true) {
    if (Clock::now() >= deadline) ThrowTooFew(round);
    const SeqValue seq{store_->Add(RoundKey(round, "seq"), delta)};
    if (seq.Seals() > 0) continue;
    const int ticket = seq.Arrivals();
    const NodeDescriptor& node = options_.node;
    store_->SetString(RoundKey(round, "node/" + std::to_string(ticket)),
                      Json{{"host", node.host},
                           {"addr", node.addr},
                           {"pid", node.pid},
                           {"nproc", node.local_world_size},
                           {"at", WallClockMs()},
                           {"store", node.serves_store},
                           {"prev", previous && previous->round + 1 == round ? previous->group_rank
                                                                              : -1}}
                          .dump());
    if (ticket == 1) store_->SetString(keys_.Hint(), std::to_string(round));
    if (missed_one) SignalWaiting(round - 1);
    if (round > 0) AwaitEndOf(round - 1, deadline);
    if (ticket >= options_.min_nodes) store_->SetString(RoundKey(round, "min"), "1");
    if (ticket >= options_.max_nodes || EveryPreviousMemberAccounted(round, previous)) {
      Seal(round);
    }
    return {round, seq};
  }
}

void DynamicRendezvous::SignalWaiting(int round) {
  if (!store_->Check({RoundKey(round, "sealed")})) return;
  const Json sealed = Json::parse(store_->GetString(RoundKey(round, "sealed")));
  if (IntField(sealed, "nodes") >= options_.max_nodes) return;  // no room: wait for a change
  Announce(round, {RoundChange::Kind::kNodeWaiting, -1, options_.node.host,
                   "node " + options_.node.host + " is waiting to join"});
}

// Round `round` + 1 may form only once the members of `round` are leaving it, so that a
// newcomer never starts a second group next to a running one.
void DynamicRendezvous::AwaitEndOf(int round, Clock::time_point deadline) {
  try {
    store_->Wait({RoundKey(round, "change")}, Left(deadline));
  } catch (const StoreTimeout&) {
    ThrowIfClosed();
    throw RendezvousTimeoutError("round " + std::to_string(round) + " is full (the maximum of " +
                                 std::to_string(options_.max_nodes) +
                                 " nodes) and none of its nodes left within "
                                 "join_timeout=" +
                                 Seconds(options_.join_timeout) +
                                 "; raise the maximum of --nnodes");
  }
  if (RoundChange::Decode(store_->GetString(RoundKey(round, "change"))).kind ==
      RoundChange::Kind::kClosed) {
    ThrowIfClosed();
  }
}

bool DynamicRendezvous::EveryPreviousMemberAccounted(int round,
                                                     const std::optional<FormedRound>& previous) {
  if (!previous || previous->round + 1 != round) return false;
  const std::int64_t accounted = store_->Add(RoundKey(round, "accounted"), 1);
  if (accounted < previous->group_world_size) return false;
  return AccountedAndSealable(round);
}

bool DynamicRendezvous::AccountedAndSealable(int round) {
  const SeqValue seq{store_->Add(RoundKey(round, "seq"), 0)};
  if (seq.Seals() > 0) return false;
  if (seq.Arrivals() >= options_.min_nodes) return true;
  // Fewer than MIN: seal now only when the quorum is lost for good, i.e. every member of the
  // previous round rejoined or is gone, each counted once (a member declared gone may rejoin,
  // and `accounted` then counts it twice), and too few rejoined.
  const Quorum quorum = CountQuorum(round, seq.Arrivals(), {});
  if (quorum.Holds()) return false;
  for (int rank = 0; rank < quorum.previous_nodes; ++rank) {
    if (quorum.rejoined.contains(rank)) continue;
    if (!store_->Check({RoundKey(round - 1, "gone/" + std::to_string(rank))})) return false;
  }
  return true;
}

// Common case: two WAITs (MIN, then the seal), each answered by the server when the key comes.
std::optional<FormedRound> DynamicRendezvous::AwaitSeal(const Ticket& ticket,
                                                        Clock::time_point deadline) {
  const std::string sealed = RoundKey(ticket.round, "sealed");
  try {
    WaitBeating(RoundKey(ticket.round, "min"), ticket, Left(deadline));
  } catch (const StoreTimeout&) {
    ThrowTooFew(ticket.round);
  }
  // Rounds after the first wait for missing members to be declared gone (member_timeout).
  const auto last_call = ticket.round > 0
                             ? std::max(options_.last_call_timeout, options_.member_timeout)
                             : options_.last_call_timeout;
  try {
    WaitBeating(sealed, ticket, std::min(last_call, Left(deadline)));
  } catch (const StoreTimeout&) {
    Seal(ticket.round, true);  // last call is over (or the join deadline came): close the round
    store_->Wait({sealed}, kSealPublishTimeout);  // another sealer may have been first
  }
  return ReadSealed(ticket);
}

// The ADD of kSeal is ordered with every arrival's ADD: its result counts exactly the nodes of
// the round. Only the first sealer (seal count 1) publishes it.
void DynamicRendezvous::WaitBeating(const std::string& key, const Ticket& ticket,
                                    milliseconds timeout) {
  const milliseconds interval = options_.keep_alive_interval;
  if (interval.count() <= 0) {
    store_->Wait({key}, timeout);
    return;
  }
  const auto deadline = Clock::now() + timeout;
  const std::string beat =
      RoundKey(ticket.round, "fhb_at/" + std::to_string(ticket.seq.Arrivals()));
  for (;;) {
    try {
      store_->Wait({key}, std::min(interval, Left(deadline)));
      return;
    } catch (const StoreTimeout&) {
      if (Clock::now() >= deadline) throw;
    }
    store_->SetString(beat, std::to_string(WallClockMs()));
    if (ticket.seq.Arrivals() == 1 && ticket.round > 0) SweepSilentMembers(ticket.round);
  }
}

void DynamicRendezvous::SweepSilentMembers(int round) {
  const std::string previous_sealed = RoundKey(round - 1, "sealed");
  if (!store_->Check({previous_sealed})) return;
  const int members = IntField(Json::parse(store_->GetString(previous_sealed)), "nodes");
  if (store_->Add(RoundKey(round, "accounted"), 0) >= members) return;
  std::set<int> rejoined;
  const int arrivals = SeqValue{store_->Add(RoundKey(round, "seq"), 0)}.Arrivals();
  for (int ticket = 1; ticket <= arrivals; ++ticket) {
    const std::string record = RoundKey(round, "node/" + std::to_string(ticket));
    if (store_->Check({record})) rejoined.insert(Json::parse(store_->GetString(record)).value("prev", -1));
  }
  const std::int64_t patience =
      (options_.keep_alive_interval * options_.keep_alive_max_attempt).count();
  const std::string base_key = RoundKey(round - 1, "hb_base");
  const std::optional<std::int64_t> base =
      store_->Check({base_key})
          ? std::optional<std::int64_t>(std::stoll(store_->GetString(base_key)))
          : std::nullopt;
  const std::int64_t now = WallClockMs();
  for (int rank = 0; rank < members; ++rank) {
    if (rejoined.contains(rank) || store_->Check({RoundKey(round - 1, "gone/" + std::to_string(rank))})) {
      continue;
    }
    const std::string beat = RoundKey(round - 1, "hb_at/" + std::to_string(rank));
    const std::optional<std::int64_t> last =
        store_->Check({beat}) ? std::optional<std::int64_t>(std::stoll(store_->GetString(beat)))
                              : base;
    if (!last || now - *last <= patience) continue;
    std::string host = "<unknown>";
    const std::string record = RoundKey(round - 1, "node/" + std::to_string(rank + 1));
    if (store_->Check({record})) host = Json::parse(store_->GetString(record)).value("host", host);
    DeclareGone(round - 1, rank,
                {RoundChange::Kind::kNodeLost, rank, host,
                 "heartbeats stopped " + Seconds(milliseconds{now - *last}) +
                     " ago and it did not rejoin (seen by round " + std::to_string(round) +
                     "'s first node)"});
  }
}

// The ADD of kSeal is ordered with every arrival's, so its result counts exactly the nodes of
// the round; only the first sealer (seal count 1) publishes the round.
void DynamicRendezvous::Seal(int round, bool last_call) {
  const SeqValue seq{store_->Add(RoundKey(round, "seq"), SeqValue::kSeal)};
  if (seq.Seals() != 1) return;
  const auto dropped = last_call && options_.keep_alive_interval.count() > 0
                           ? DeadWhileForming(round, seq.Arrivals())
                           : std::vector<std::pair<int, int>>{};
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
  store_->SetString(RoundKey(round, "sealed"), sealed.dump());
  if (quorum.Holds()) return;
  // This side stops: wake the round's nodes still waiting for MIN, and tell later ones why.
  const std::string why =
      QuorumMessage(round, quorum.survivors, quorum.members, quorum.Needed());
  store_->SetString(RoundKey(round, "min"), "1");
  store_->SetString(keys_.Closed(), why);
  Announce(round, {RoundChange::Kind::kClosed, -1, options_.node.host, why});
}

// Needed after a loss (lost > 0) and in a moved store's first round (strict): the survivors are
// the round's nodes that were members of the previous round (their records' "prev").
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
    const std::string record = RoundKey(round, "node/" + std::to_string(ticket));
    try {  // written right after the node's ADD; a node that died in between does not count
      store_->Wait({record}, std::max(options_.keep_alive_interval, milliseconds{1000}));
    } catch (const StoreTimeout&) {
      continue;
    }
    const Json node = Json::parse(store_->GetString(record));
    const int prev = node.value("prev", -1);
    if (prev >= 0) quorum.rejoined.insert(prev);
    if (prev < 0) newcomers.emplace(node.value("addr", ""), node.value("pid", 0));
  }
  // A member that never saw the previous round sealed (its store died first) came as a
  // newcomer: it is still one of the previous round's members.
  const int previous_tickets = IntField(previous, "nodes") +
                               static_cast<int>(previous.value("dropped", Json::array()).size());
  for (int ticket = 1; !newcomers.empty() && ticket <= previous_tickets; ++ticket) {
    const std::string record = RoundKey(round - 1, "node/" + std::to_string(ticket));
    if (!store_->Check({record})) continue;
    const Json node = Json::parse(store_->GetString(record));
    late_members += static_cast<int>(newcomers.erase({node.value("addr", ""), node.value("pid", 0)}));
  }
  quorum.survivors = static_cast<int>(quorum.rejoined.size()) + late_members;
  return quorum;
}

std::string DynamicRendezvous::QuorumMessage(int round, int survivors, int members,
                                             int needed) const {
  return "lost quorum: only " + std::to_string(survivors) + " of the " +
         std::to_string(members) + " nodes of round " + std::to_string(round - 1) +
         " came back to the rendezvous store (at least " + std::to_string(needed) +
         " needed); the others may be training on the other side of a network partition, so "
         "this side stops";
}

// The nodes silent for keep_alive_interval x keep_alive_max_attempt, or none when fewer than
// MIN would remain (the round then forms with everyone, as without the check).
std::vector<std::pair<int, int>> DynamicRendezvous::DeadWhileForming(int round, int nodes) {
  const std::int64_t patience =
      (options_.keep_alive_interval * options_.keep_alive_max_attempt).count();
  const std::int64_t now = WallClockMs();
  std::vector<std::pair<int, int>> dropped;
  for (int ticket = 1; ticket <= nodes; ++ticket) {
    const std::string record = RoundKey(round, "node/" + std::to_string(ticket));
    try {  // written right after the node's ADD; never, if it died in between
      store_->Wait({record}, options_.keep_alive_interval);
    } catch (const StoreTimeout&) {
      return {};  // its worker count is unknown: drop nobody (the ring watch will, later)
    }
    const Json node = Json::parse(store_->GetString(record));
    std::int64_t last = node.value("at", now);
    const std::string beat = RoundKey(round, "fhb_at/" + std::to_string(ticket));
    if (store_->Check({beat}))
      last = std::max<std::int64_t>(last, std::stoll(store_->GetString(beat)));
    if (now - last > patience) dropped.emplace_back(ticket, node.value("nproc", 1));
  }
  if (nodes - static_cast<int>(dropped.size()) < options_.min_nodes) return {};
  return dropped;
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

// The restart count moves on only when a worker failure ended the previous round and no member
// of it was lost or left: workers of the survivors of a lost node fail too (their collective
// breaks, e.g. gloo's "Connection closed by peer"), and that is the loss, not a failure.
int DynamicRendezvous::RestartCountFor(int round) {
  int restarts = 0;
  if (round > 0 && store_->Check({RoundKey(round - 1, "sealed")})) {
    restarts =
        IntField(Json::parse(store_->GetString(RoundKey(round - 1, "sealed"))), "restarts");
  }
  const bool failed = store_->Add(RoundKey(round, "failures"), 0) > 0;
  const bool lost_a_member = store_->Add(RoundKey(round, "gone"), 0) > 0;
  return restarts + (failed && !lost_a_member ? 1 : 0);
}

RoundChange DynamicRendezvous::Announce(int round, const RoundChange& change) {
  const Bytes now_stored =
      store_->CompareSet(RoundKey(round, "change"), {}, Store::ToBytes(change.Encode()));
  return RoundChange::Decode(Store::ToString(now_stored));
}

void DynamicRendezvous::CountFailure(int round) { store_->Add(RoundKey(round + 1, "failures"), 1); }

void DynamicRendezvous::DeclareGone(int round, int group_rank, const RoundChange& change) {
  const std::string token = options_.node.host + ":" + std::to_string(options_.node.pid);
  const Bytes mark = Store::ToBytes(token);
  const std::string gone = RoundKey(round, "gone/" + std::to_string(group_rank));
  Announce(round, change);
  // Counted once, whoever declares it and however often (the same watch may declare twice).
  if (store_->Add(gone + "/n", 1) != 1) return;
  store_->Set(gone, mark);
  store_->Add(RoundKey(round + 1, "gone"), 1);  // before "accounted": read by the sealer
  if (change.kind == RoundChange::Kind::kNodeLost) store_->Add(RoundKey(round + 1, "lost"), 1);
  if (change.kind == RoundChange::Kind::kNodeLeaving) store_->Add(RoundKey(round + 1, "left"), 1);
  const std::int64_t accounted = store_->Add(RoundKey(round + 1, "accounted"), 1);
  // The survivors may all have rejoined already (their workers failed with the lost peer's
  // connections): the declaration that accounts for the last member seals the next round.
  if (!store_->Check({RoundKey(round, "sealed")})) return;
  const int members =
      IntField(Json::parse(store_->GetString(RoundKey(round, "sealed"))), "nodes");
  if (accounted >= members && AccountedAndSealable(round + 1)) Seal(round + 1);
}

int DynamicRendezvous::NodesWaiting(int round) {
  return SeqValue{store_->Add(RoundKey(round + 1, "seq"), 0)}.Arrivals();
}

void DynamicRendezvous::Close(int round) {
  store_->SetString(keys_.Closed(), "1");
  Announce(round, {RoundChange::Kind::kClosed, -1, options_.node.host, "the job has finished"});
}

bool DynamicRendezvous::IsClosed() { return store_->Check({keys_.Closed()}); }

// One ADD of 0 reads the decimal hint (a missing one reads, and becomes, 0).
int DynamicRendezvous::RoundHint() { return static_cast<int>(store_->Add(keys_.Hint(), 0)); }

void DynamicRendezvous::ThrowIfClosed() {
  if (!IsClosed()) return;
  const std::string why = store_->GetString(keys_.Closed());
  if (why != "1") throw RendezvousQuorumError(why);
  throw RendezvousClosedError("the rendezvous '" + options_.run_id +
                              "' is closed: the job has finished");
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
    if (!dropped.contains(ticket)) records.push_back(RoundKey(round, "node/" + std::to_string(ticket)));
  }
  std::vector<RoundMember> members;
  if (records.empty() || !store_->Check(records)) return members;  // one died before its record
  const std::vector<Bytes> values = store_->MultiGet(records);
  for (const Bytes& value : values) {
    const Json node = Json::parse(Store::ToString(value));
    members.push_back({static_cast<int>(members.size()),
                       {node.value("host", ""), node.value("addr", ""), node.value("pid", 0),
                        node.value("nproc", 1), node.value("store", false)}});
  }
  return members;
}

MovedStoreMarker ReadMovedStoreMarker(Store& store, const RendezvousKeys& keys) {
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
    store_->SetString(keys_.MovedStore(), Json{{"epoch", marker.epoch},
                                               {"addr", marker.addr},
                                               {"basis", round},
                                               {"ready", ready}}
                                              .dump());
  };
  write_marker(false);
  store_->SetString(keys_.Hint(), std::to_string(round + 1));
  for (const RoundMember& member : members) {  // for views and the sweep's messages
    const NodeDescriptor& node = member.node;
    store_->SetString(RoundKey(round, "node/" + std::to_string(member.group_rank + 1)),
                      Json{{"host", node.host}, {"addr", node.addr}, {"pid", node.pid},
                           {"nproc", node.local_world_size}, {"store", node.serves_store}}
                          .dump());
  }
  store_->SetString(RoundKey(round, "sealed"), Json{{"nodes", basis.group_world_size},
                                                    {"world", basis.global_world_size},
                                                    {"restarts", basis.restart_count},
                                                    {"dropped", Json::array()}}
                                                   .dump());
  // A survivor that never saw the basis sealed joins it late: the seal sends it on to round+1.
  store_->Add(RoundKey(round, "seq"), SeqValue::kSeal);
  store_->SetString(RoundKey(round, "hb_base"), std::to_string(WallClockMs()));
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
                               " within join_timeout=" + Seconds(options_.join_timeout) +
                               "; start the missing nodes or lower the minimum of --nnodes");
}

}  // namespace ddprun::rendezvous
