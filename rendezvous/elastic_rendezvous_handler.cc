#include "rendezvous/elastic_rendezvous_handler.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/duration.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "rendezvous/member_watch.h"
#include "store/prefix_store.h"

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;
constexpr milliseconds kOwnConnectTimeout{10'000};  // a barrier's own connection
constexpr int kMaxMovesPerJoin = kSuccessorCandidates + 1;

}  // namespace

ElasticRendezvousHandler::ElasticRendezvousHandler(ElasticHandlerOptions options, StoreSite& site,
                                                   WorkerStoreHost& worker_store)
    : options_(std::move(options)),
      keys_{options_.rendezvous.run_id},
      site_(site),
      failover_(options_.failover, site),
      worker_store_(worker_store) {}

RendezvousInfo ElasticRendezvousHandler::NextRendezvous() {
  for (int moves = 0;; ++moves) {
    PrepareStore();
    const auto attempt_started = site_.clock().Now();
    try {
      if (options_.replicated_store && !answered_) {  // a first contact, read_timeout-bound
        store_->Check({keys_.Closed()});
        answered_ = true;
        outage_since_.reset();  // from now on an outage may last the join timeout
      }
      if (outage_round_) rendezvous_->MarkOutage(*outage_round_);
      const FormedRound formed = rendezvous_->Join(Current(), TakeInterrupted());
      outage_round_.reset();
      {
        std::lock_guard lock(mutex_);
        current_ = formed;
      }
      if (outage_since_) spdlog::info("the rendezvous store answers again");
      outage_since_.reset();
      if (auto info = Publish(formed)) return std::move(*info);
    } catch (const JoinAbandonedError&) {
      if (!moved_) throw;
      JoinMovedStore();
    } catch (const RendezvousQuorumError& error) {
      if (MoveAfterLostQuorum(error)) continue;
      if (!RejoinElsewhere(error)) throw;
    } catch (const store::StoreConnectionError& error) {
      if (shutdown_) ThrowClosed();
      if (auto arrival = rendezvous_->PendingArrival()) {
        interrupted_ = Interrupted{*arrival, StoreAddress(), epoch_};
      }
      if (options_.replicated_store) {
        AwaitReplicatedStore(error, attempt_started);
        continue;
      }
      if (moves + 1 >= kMaxMovesPerJoin) {
        throw RendezvousConnectionError(std::string("lost the rendezvous store: ") + error.what());
      }
      spdlog::warn("lost the rendezvous store at {} while joining ({}); {}",
                   StoreAddress().ToString(), error.what(),
                   Current() ? "checking it again" : "trying the endpoints again");
      if (WaitsAsSpare() && FollowMovedStoreAsSpare()) continue;
      if (!Current()) {  // a newcomer has no round to move the store for: it looks again
        std::lock_guard lock(mutex_);
        store_.reset();
      }
    }
  }
}

std::optional<Arrival> ElasticRendezvousHandler::TakeInterrupted() {
  std::optional<Interrupted> interrupted = std::exchange(interrupted_, std::nullopt);
  if (!interrupted || interrupted->epoch != epoch_ || interrupted->at != StoreAddress()) {
    return std::nullopt;
  }
  return interrupted->arrival;
}

void ElasticRendezvousHandler::PrepareStore() {
  if (shutdown_) ThrowClosed();
  if (options_.replicated_store) {
    if (!store_) {
      UseStore({options_.endpoints.front(),
                site_.Connect(options_.endpoints.front(), options_.rendezvous.join_timeout)});
    }
    return;
  }
  if (!store_) {
    StoreAt located = failover_.Locate(options_.endpoints, options_.serve_first,
                                       site_.clock().Now() + options_.rendezvous.join_timeout);
    // Served here because no moved store was found (yet): the survivors of a lost store host
    // may move it only now that this restarted one serves a fresh store.
    const bool relocate = located.serving && located.epoch == 0 && options_.serve_first &&
                          options_.endpoints.size() > 1 &&
                          options_.failover.relocate_check.count() > 0;
    UseStore(std::move(located), relocate);
    return;
  }
  const auto current = Current();
  if (!current) return;  // a node that never formed a round has nothing to move
  if (auto again = failover_.Reconnect(store_at_, epoch_, current->round)) {
    if (again->epoch > epoch_) {  // a successor already serves at the same address (one host)
      const std::string at = store_at_.ToString();
      ReportLost("taken over at the same address");
      spdlog::warn("the rendezvous store moved to {} (epoch {}; joining it)", at, again->epoch);
      Event("store_moved", Json{{"epoch", again->epoch},
                                {"address", at},
                                {"basis", current->round},
                                {"serving", false}}
                               .dump());
    }
    UseStore(std::move(*again));
    return;
  }
  MoveStore(*current, "it refused or did not answer connections for the heartbeat timeout");
}

// Before the store ever answered (a wrong endpoint, a cluster not up yet) the wait is bounded by
// read_timeout; once it has, an outage is waited out for the join timeout.
void ElasticRendezvousHandler::AwaitReplicatedStore(
    const store::StoreConnectionError& error,
    std::chrono::steady_clock::time_point attempt_started) {
  const auto now = site_.clock().Now();
  const auto limit = answered_ ? options_.rendezvous.join_timeout : options_.read_timeout;
  const char* limit_name = answered_ ? "join timeout" : "read timeout";
  if (!outage_since_) {
    outage_since_ = attempt_started;  // the failed call itself waited (the client's patience)
    spdlog::warn("the rendezvous store does not answer ({}); retrying until the {} ({})",
                 error.what(), limit_name, DurationText(limit));
  }
  if (now - *outage_since_ >= limit) {
    throw RendezvousConnectionError(fmt::format("the rendezvous store {} for the {} ({}): {}",
                                                answered_ ? "did not answer" : "never answered",
                                                limit_name, DurationText(limit), error.what()));
  }
  if (!site_.Pause(options_.outage_retry)) ThrowClosed();
}

void ElasticRendezvousHandler::MoveStore(const FormedRound& current, const std::string& why) {
  const std::string lost_at = store_at_.ToString();
  const int lost_rank = ReportLost(why);
  if (!basis_ || basis_->round.round != current.round) {
    throw RendezvousConnectionError("the rendezvous store at " + lost_at +
                                    " is lost and this node never learnt round " +
                                    std::to_string(current.round) + "'s members to move it to");
  }
  DynamicRendezvousOptions seeding = options_.rendezvous;
  seeding.node.serves_store = true;
  const FailoverBasis basis = *basis_;
  std::optional<StoreAt> found;
  try {
    found = failover_.Succeed(
        basis, current.group_rank,
        [&](store::Store& store, const MovedStoreMarker& marker) {
          DynamicRendezvous(seeding, std::shared_ptr<store::Store>(&store, [](store::Store*) {}))
              .SeedMovedStore(basis.round, basis.candidates, lost_rank, marker);
        },
        store_at_);
  } catch (const RendezvousConnectionError& error) {
    // No candidate took over: this node may have been the one cut off (its incoming traffic),
    // and the store never moved. It answers now: rejoin it.
    found = failover_.Reconnect(store_at_, epoch_, current.round);
    if (!found || failover_.Closed(*found)) throw;
    spdlog::warn("{}", error.what());
  }
  if (found->epoch == epoch_ && found->address == store_at_) {
    spdlog::warn("the store at {} answers again (this node was the one cut off): rejoining it",
                 lost_at);
    UseStore(std::move(*found));
    return;
  }
  StoreAt moved = std::move(*found);
  const std::string where =
      moved.serving ? options_.advertised_addr + ":" + std::to_string(options_.failover.port)
                    : moved.address.ToString();
  spdlog::warn("the rendezvous store moved to {} (epoch {}; {})", where, moved.epoch,
               moved.serving ? "served by this node" : "joining it");
  Event("store_moved", Json{{"epoch", moved.epoch},
                            {"address", where},
                            {"basis", current.round},
                            {"serving", moved.serving}}
                           .dump());
  UseStore(std::move(moved));
}

int ElasticRendezvousHandler::ReportLost(const std::string& why) {
  const std::string at = store_at_.ToString();
  spdlog::warn("the rendezvous store at {} is lost ({}); it moves to a member of the last round",
               at, why);
  Event("store_lost", Json{{"address", at}, {"reason", why}}.dump());
  if (!basis_) return -1;
  for (const RoundMember& member : basis_->candidates) {
    if (!member.node.serves_store) continue;
    spdlog::warn("node {} (host {}) lost: it served the rendezvous store", member.group_rank,
                 member.node.host);
    Event("node_lost", Json{{"node", member.group_rank},
                            {"node_host", member.node.host},
                            {"reason", "it served the lost rendezvous store"}}
                           .dump());
    return member.group_rank;
  }
  return -1;
}

void ElasticRendezvousHandler::UseStore(StoreAt at, bool relocate) {
  std::lock_guard lock(mutex_);
  // Served here: a store this node began to serve, or the one it serves, reconnected to.
  const bool serving =
      at.serving || (options_.rendezvous.node.serves_store && at.address == store_at_);
  store_ = std::move(at.store);
  store_at_ = at.address;
  epoch_ = at.epoch;
  if (at.serving) options_.rendezvous.node.serves_store = true;
  DynamicRendezvousOptions rendezvous = options_.rendezvous;
  if (!options_.replicated_store) {  // a spare follows a moved store (etcd never moves)
    rendezvous.on_waiting = [this, told = rendezvous.on_waiting](const std::string& line) {
      if (told) told(line);
      LearnSpareBasis();
    };
  }
  // A node serving the store it waits at, alone or as a spare, looks out for the job at a moved
  // store: the others may have moved it while this node was away (a restarted or cut-off store
  // host), and nobody will come here to say so.
  const bool look_out =
      relocate || (serving && !options_.replicated_store && options_.endpoints.size() > 1 &&
                   options_.failover.relocate_check.count() > 0);
  if (look_out) {
    const std::chrono::milliseconds every = options_.failover.relocate_check;
    rendezvous.alone_check_interval = every;
    // All the probes of one look within half the interval: silent endpoints (a partition) delay
    // this node's beats and sweeps little, however long the endpoint list.
    const auto others = static_cast<int>(options_.endpoints.size()) - 1;
    const milliseconds probe = std::max(every / 2 / std::max(others, 1), milliseconds{1});
    rendezvous.give_up_alone = [this, probe, above = at.epoch] {
      moved_ = failover_.FindMoved(options_.endpoints, above, probe);
      return moved_.has_value();
    };
  }
  rendezvous_ = std::make_unique<DynamicRendezvous>(std::move(rendezvous), store_);
  if (shutdown_) store_->Interrupt();
}

// The store's side sealed the round after this node's without a quorum and stopped, counting
// this member out (its requests did not reach the store in time: the store host was cut off or
// paused, and the others' silence swept them). This node is then on the other side, which may
// go on: it moves the store as if the store host were lost. At most one side goes on all the
// same: the store's side stopped, and the moved store's first round needs more than half of
// this round's members. Once per store a round formed in; never by the host of that store.
bool ElasticRendezvousHandler::MoveAfterLostQuorum(const RendezvousQuorumError& error) {
  const auto current = Current();
  if (options_.replicated_store || !AtStoreOfCurrentRound() ||
      options_.rendezvous.node.serves_store ||
      !rendezvous_->QuorumLostWithout(current->round + 1)) {
    return false;
  }
  spdlog::warn("{}; but this node, a member of round {}, was not counted there: moving the store",
               error.what(), current->round);
  MoveStore(*current, std::string("its side stopped without this node: ") + error.what());
  return true;
}

// This side lost its quorum. If the job goes on at a moved store of a newer epoch (the majority
// moved it while this node was paused or cut off, or moves it now), this node joins it instead
// of ending: its own round is over, the others' is not.
bool ElasticRendezvousHandler::RejoinElsewhere(const RendezvousQuorumError& error) {
  if (options_.replicated_store || options_.endpoints.size() < 2) return false;
  // The closed store's own side waits (its host, the members it counted, its spares): the
  // others may learn they were counted out only after a request that waited out read_timeout,
  // then move the store within two heartbeat timeouts. A node whose own moved store lost its
  // quorum looks once: the job is not on its side.
  const bool moved_since_formed = Current() && !AtStoreOfCurrentRound();
  const auto patience =
      moved_since_formed ? milliseconds{0} : options_.read_timeout + 2 * options_.failover.window;
  const auto deadline = site_.clock().Now() + patience;
  bool told = false;
  for (;;) {
    std::optional<StoreAt> moved =
        failover_.FindMoved(options_.endpoints, epoch_, options_.failover.probe_timeout);
    if (moved) {
      if (RejoinsAsMember(*moved)) {
        spdlog::warn("{}; but the job goes on at {} (epoch {}), moved after round {}: rejoining it",
                     error.what(), moved->address.ToString(), moved->epoch, Current()->round);
        Event("store_moved", Json{{"epoch", moved->epoch},
                                  {"address", moved->address.ToString()},
                                  {"basis", Current()->round},
                                  {"serving", false},
                                  {"reason", "lost quorum"}}
                                 .dump());
        UseStore(std::move(*moved));
        return true;
      }
      spdlog::warn("{}; but the job goes on at {} (epoch {}): joining it as a new member",
                   error.what(), moved->address.ToString(), moved->epoch);
      JoinAsNewcomer(std::move(*moved), Json{{"reason", "lost quorum"}});
      return true;
    }
    if (site_.clock().Now() >= deadline) return false;
    if (!std::exchange(told, true)) {
      // Not the reason itself: the error line that ends the node, if none is found, says it.
      spdlog::warn(
          "this side of the job stopped; looking for the job at a moved store for {} "
          "before this node ends",
          DurationText(std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                             site_.clock().Now())));
    }
    if (!site_.Pause(std::max(options_.rendezvous.keep_alive_interval, options_.failover.retry))) {
      ThrowClosed();
    }
  }
}

// A member of the round this node's store formed, moved after that very round: the store's side
// stopped (its round sealed without a quorum), so nobody goes on there, and this node counts at
// the moved store as any survivor of the round. The store's own host comes as a newcomer: the
// moved store counts it lost.
bool ElasticRendezvousHandler::RejoinsAsMember(const StoreAt& moved) {
  const auto current = Current();
  if (!AtStoreOfCurrentRound() || options_.rendezvous.node.serves_store) return false;
  try {
    return ReadMovedStoreMarker(*moved.store, keys_).basis == current->round;
  } catch (const std::exception&) {
    return false;
  }
}

void ElasticRendezvousHandler::JoinMovedStore() {
  StoreAt moved = std::move(*moved_);
  moved_.reset();
  int basis = -1;
  try {
    basis = ReadMovedStoreMarker(*moved.store, keys_).basis;
  } catch (const std::exception&) {  // read again by the join; the event just lacks it
  }
  spdlog::warn(
      "the rendezvous store moved to {} while this node waited at its own (epoch {}); "
      "joining it",
      moved.address.ToString(), moved.epoch);
  JoinAsNewcomer(std::move(moved), Json{{"basis", basis}});
}

void ElasticRendezvousHandler::LearnSpareBasis() {
  const auto arrival = rendezvous_->PendingArrival();
  if (!arrival || arrival->round < 1) return;
  const int behind = arrival->round - 1;
  try {
    FormedRound round;
    round.round = behind;
    spare_basis_ = FailoverBasis{round, rendezvous_->Members(behind, kSuccessorCandidates), epoch_};
  } catch (const store::StoreConnectionError&) {
    // The join's own next call meets the same store and reports it.
  } catch (const store::StoreTimeout&) {
  }
}

// basis_ is learnt where the round formed (Publish), at that store's epoch; a move since changes
// epoch_, a new member's join clears both.
bool ElasticRendezvousHandler::AtStoreOfCurrentRound() const {
  const auto current = Current();
  return current && basis_ && basis_->round.round == current->round && basis_->epoch == epoch_;
}

// A node that never formed a round, or whose last round is older than the one it waited
// behind (it fell behind the job: a member left out of later rounds, queued as a spare).
bool ElasticRendezvousHandler::WaitsAsSpare() const {
  const auto current = Current();
  return !current || (spare_basis_ && spare_basis_->round.round > current->round);
}

bool ElasticRendezvousHandler::FollowMovedStoreAsSpare() {
  if (!spare_basis_ || spare_basis_->epoch != epoch_) return false;
  // Still there: join again, and still a spare behind the same round should it go later.
  if (failover_.Reconnect(store_at_, epoch_)) return false;
  const FailoverBasis basis = *std::exchange(spare_basis_, std::nullopt);
  try {
    StoreAt moved =
        failover_.Succeed(basis, /*my_group_rank=*/-1, [](store::Store&, const MovedStoreMarker&) {
          throw std::logic_error("a spare never serves the store");
        });
    spdlog::warn(
        "the rendezvous store moved to {} (epoch {}) while this node waited as a spare "
        "behind round {}; joining it",
        moved.address.ToString(), moved.epoch, basis.round.round);
    JoinAsNewcomer(std::move(moved), Json{{"basis", basis.round.round}, {"spare", true}});
    return true;
  } catch (const RendezvousConnectionError& error) {
    spdlog::warn("{}; trying the endpoints again", error.what());
    return false;
  }
}

// Leaves this node's store for `moved` as a newcomer there (its rounds here mean nothing to the
// moved store), and stops serving its own so that nobody else lands on it.
void ElasticRendezvousHandler::JoinAsNewcomer(StoreAt moved, Json event) {
  event["epoch"] = moved.epoch;
  event["address"] = moved.address.ToString();
  event["serving"] = false;
  event["abandoned"] = StoreAddress().ToString();
  Event("store_moved", event.dump());
  const bool served_own = options_.rendezvous.node.serves_store;
  options_.rendezvous.node.serves_store = false;
  interrupted_.reset();  // its arrival in the abandoned store
  {
    std::lock_guard lock(mutex_);
    current_.reset();
  }
  basis_.reset();
  UseStore(std::move(moved));  // drops this node's connection to its own store
  if (served_own) site_.StopServing();
}

void ElasticRendezvousHandler::Event(const std::string& name, const std::string& fields_json) {
  events_.emplace_back(name, fields_json);
}

// Rank 0 serves the workers' store and tells the others where it is. None: rank 0 never told
// (it died between the seal and that write), so it was declared lost and the node rejoins.
std::optional<RendezvousInfo> ElasticRendezvousHandler::Publish(const FormedRound& formed) {
  // First: should the store die now, the survivors of this round know where to move it.
  basis_ = FailoverBasis{formed, rendezvous_->Members(formed.round, kSuccessorCandidates), epoch_};
  const std::string master_key = keys_.Round(formed.round, "master");
  HostPort master{options_.advertised_addr, 0};
  if (formed.group_rank == 0) {
    master.port = worker_store_.Serve();
    store_->SetString(master_key, master.ToString());
  } else {
    worker_store_.Stop();
    if (!AwaitMaster(formed, master_key)) return std::nullopt;
    master = ParseHostPort(store_->GetString(master_key), "the round's worker store");
  }
  round_store_ = std::make_shared<store::PrefixStore>(keys_.Round(formed.round, "agent"), store_);
  job_store_ = std::make_shared<store::PrefixStore>(keys_.Job(), store_);
  RendezvousInfo info;
  info.store = round_store_.get();
  info.job_store = job_store_.get();
  info.group_rank = formed.group_rank;
  info.group_world_size = formed.group_world_size;
  info.round = formed.round;
  info.master_addr = master.host;
  info.master_port = master.port.value_or(0);
  info.use_agent_store = worker_store_.AgentServes();
  info.base_global_rank = formed.base_global_rank;
  info.global_world_size = formed.global_world_size;
  info.restart_count = formed.restart_count;
  info.open_round_store = [&site = site_, at = store_at_,
                           prefix = keys_.Round(formed.round, "agent")] {
    return std::make_shared<store::PrefixStore>(prefix, site.Connect(at, kOwnConnectTimeout));
  };
  info.events = std::move(events_);
  events_.clear();
  return info;
}

// Group rank 0 writes the key right after the seal; its watch (and so its beats) starts only
// after that, so a rank 0 that died in between is seen only as this silence. It is then lost as
// any member is (no restart spent), instead of every other node failing on the wait.
bool ElasticRendezvousHandler::AwaitMaster(const FormedRound& formed,
                                           const std::string& master_key) {
  try {
    store_->Wait({master_key}, options_.read_timeout);
    return true;
  } catch (const store::StoreTimeout&) {
  }
  const std::string why = "it did not publish the workers' store address within read_timeout=" +
                          DurationText(options_.read_timeout) + " of round " +
                          std::to_string(formed.round) + "'s seal";
  spdlog::warn("node 0 of round {} lost: {}; rejoining without it", formed.round, why);
  const std::string host = MemberHost(*store_, keys_, formed.round, 0);
  rendezvous_->DeclareGone(formed.round, 0, {RoundChange::Kind::kNodeLost, 0, host, why});
  Event("node_lost", Json{{"node", 0}, {"node_host", host}, {"reason", why}}.dump());
  return false;
}

void ElasticRendezvousHandler::AnnounceRoundEnd(const RoundEnd& end) {
  const auto current = Current();
  if (!current || !rendezvous_) return;
  const NodeDescriptor& node = options_.rendezvous.node;
  if (end.kind == RoundEnd::Kind::kStoreLost) {  // said at this node's next arrival
    outage_round_ = current->round;
    return;
  }
  if (end.kind == RoundEnd::Kind::kFailure) {
    rendezvous_->ReportFailure(
        current->round, {RoundChange::Kind::kFailure, current->group_rank, node.host, end.record});
    return;
  }
  rendezvous_->DeclareGone(
      current->round, current->group_rank,
      {RoundChange::Kind::kNodeLeaving, current->group_rank, node.host, end.record});
}

void ElasticRendezvousHandler::SetClosed() {
  const auto current = Current();
  if (!rendezvous_ || shutdown_) return;
  if (options_.replicated_store && !answered_) return;  // nothing was ever written there
  rendezvous_->Close(current ? current->round : 0);
}

void ElasticRendezvousHandler::Shutdown() {
  shutdown_ = true;
  site_.Cancel();
  std::lock_guard lock(mutex_);
  if (store_) store_->Interrupt();
}

HostPort ElasticRendezvousHandler::StoreAddress() const {
  std::lock_guard lock(mutex_);
  return store_at_;
}

std::optional<FormedRound> ElasticRendezvousHandler::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

void ElasticRendezvousHandler::ThrowClosed() const {
  throw RendezvousClosedError("the rendezvous '" + options_.rendezvous.run_id + "' was shut down");
}

}  // namespace ddprun::rendezvous
