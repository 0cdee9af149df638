#include "tests/sim/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "rendezvous/heartbeat_watch.h"
#include "rendezvous/member_liveness.h"

namespace ddprun::sim {
namespace {

using rendezvous::ChangeNotice;
using rendezvous::RoundChange;
using std::chrono::milliseconds;

constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();

}  // namespace

nlohmann::json AgentRecord::ToJson() const {
  return {{"host", host},
          {"incarnation", incarnation},
          {"pid", pid},
          {"start", start},
          {"exit", exit ? nlohmann::json(*exit) : nlohmann::json()},
          {"rc", rc ? nlohmann::json(*rc) : nlohmann::json()},
          {"errors", errors},
          {"foreign", nlohmann::json::array()},
          {"stderr_tail", errors},
          {"events", events}};
}

double World::Now() {
  return static_cast<double>(network.simulation().Deadline(milliseconds{0})) / 1e9;
}

// The round's worker store (WorkerStoreHost): a fresh port per round, so that each group is
// named by its own "addr:port" as the chaos history names it.
class Node::WorkerPorts : public rendezvous::WorkerStoreHost {
 public:
  explicit WorkerPorts(std::atomic<int>& next) : next_(next) {}
  int Serve() override { return next_++; }
  void Stop() override {}

 private:
  std::atomic<int>& next_;
};

Node::Node(World& world, int id, int incarnation)
    : world_(world),
      simulation_(world.network.simulation()),
      id_(id),
      incarnation_(incarnation),
      site_(world.network, id, incarnation, world.job.read_timeout),
      watch_site_(world.network, id, incarnation, world.job.Heartbeat()),
      worker_store_(std::make_unique<WorkerPorts>(world.next_worker_port)) {
  const JobOptions& job = world.job;
  rendezvous::DynamicRendezvousOptions& rdzv = options_.rendezvous;
  rdzv.run_id = job.run_id;
  rdzv.min_nodes = job.min_nodes;
  rdzv.max_nodes = job.max_nodes;
  rdzv.node = {NodeAddress(id), NodeAddress(id), 100'000 + id * 16 + incarnation, job.nproc};
  rdzv.join_timeout = job.join_timeout;
  rdzv.last_call_timeout = job.last_call;
  rdzv.member_timeout = job.Heartbeat() + job.keep_alive;  // launch_plan.cc's TimeoutsOf
  rdzv.keep_alive_interval = job.keep_alive;
  rdzv.keep_alive_max_attempt = job.max_attempts;
  rdzv.close_timeout = job.close_timeout;
  rdzv.clock = &simulation_;
  options_.advertised_addr = NodeAddress(id);
  options_.read_timeout = job.read_timeout;
  // Every node's address, the original store host first, as a job script passes its node list
  // (docs/elastic.md, "Later arrivals and restarted hosts"): a node started after the store
  // moved finds it at whichever member took it over.
  for (int node = 0; node < world.network.Nodes(); ++node) {
    options_.endpoints.push_back({NodeAddress(node), job.port});
  }
  options_.serve_first = id == 0;
  options_.failover.run_id = job.run_id;  // elastic_backend.cc's HandlerOptions
  options_.failover.port = job.port;
  options_.failover.window = job.Heartbeat();
  options_.failover.relocate_check = job.keep_alive;
  handler_ =
      std::make_unique<rendezvous::ElasticRendezvousHandler>(options_, site_, *worker_store_);
  std::lock_guard lock(world.mutex);
  AgentRecord record;
  record.host = id;
  record.incarnation = incarnation;
  record.pid = rdzv.node.pid;
  record.start = world.Now();
  world.records.push_back(std::move(record));
  record_ = world.records.size() - 1;
}

Node::~Node() = default;

void Node::Emit(const std::string& event, nlohmann::json fields) {
  fields["event"] = event;
  fields["time"] = world_.Now();
  fields["host"] = NodeAddress(id_);
  fields["restart_count"] = restart_count_;
  if (info_) {
    fields["round"] = info_->round;
    fields["group_rank"] = info_->group_rank;
  }
  spdlog::info("event {}", fields.dump());  // --verbose
  std::lock_guard lock(world_.mutex);
  world_.records[record_].events.push_back(std::move(fields));
}

void Node::Exit(int rc, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    if (killed_) return;  // its record says so already
  }
  std::lock_guard lock(world_.mutex);
  AgentRecord& record = world_.records[record_];
  record.exit = world_.Now();
  record.rc = rc;
  if (!error.empty()) record.errors.push_back("ddprun: error: " + error);
}

void Node::Kill() {
  {
    std::lock_guard lock(mutex_);
    killed_ = true;
  }
  {
    std::lock_guard lock(world_.mutex);
    AgentRecord& record = world_.records[record_];
    if (!record.rc) {
      record.exit = world_.Now();
      record.rc = 137;  // SIGKILL
    }
  }
  world_.training.KillNode(id_);
  handler_->Shutdown();
  simulation_.Changed();
}

bool Node::FinishedLocked() {
  std::lock_guard lock(mutex_);
  return finished_;
}

bool Node::Finished() { return FinishedLocked(); }

// --- the agent (elastic/agent.cc, elastic/agent_multinode.cc) ---------------------------------

void Node::RunAgent() {
  try {
    AgentLoop();
  } catch (const NodeKilled&) {
  }
  StopWatch();
}

void Node::AgentLoop() {
  Emit("rendezvous_started");
  for (;;) {
    rendezvous::RendezvousInfo info;
    try {
      info = handler_->NextRendezvous();
    } catch (const std::exception& error) {
      world_.network.Enter(id_, incarnation_);  // a killed node's Shutdown says nothing
      Exit(1, error.what());
      return;
    }
    TakeRound(info);
    if (restart_count_ > world_.job.max_restarts) {  // Agent::OnRendezvousDone
      Emit("finished", {{"state", "FAILED"}});
      try {
        handler_->SetClosed();
      } catch (const std::exception&) {
      }
      Exit(1, "the job's " + std::to_string(world_.job.max_restarts) +
                  " restart(s) are spent; stopping");
      return;
    }
    StartWatch(info);
    WorkersStart start;
    start.master = info.master_addr + ":" + std::to_string(info.master_port);
    start.group_world_size = info.group_world_size;
    start.group_rank = info.group_rank;
    start.node = id_;
    start.incarnation = incarnation_;
    start.base_rank = info.base_global_rank.value_or(0);
    start.nproc = world_.job.nproc;
    start.world_size = info.global_world_size.value_or(world_.job.nproc);
    start.restart_count = restart_count_;
    const int handle = world_.training.Start(start);
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < start.nproc; ++r) ranks.push_back(start.base_rank + r);
    Emit("workers_started", {{"ranks", ranks}, {"pids", {world_.training.Pid(handle)}}});
    const RoundEnd end = RunRound(info, handle);
    if (end == RoundEnd::kExit) return;
    if (end == RoundEnd::kDone) {
      Emit("finished", {{"state", "SUCCEEDED"}});
      try {
        handler_->SetClosed();  // launcher/run.cc's CloseRendezvous
      } catch (const std::exception&) {
      }
      Exit(0);
      return;
    }
  }
}

void Node::TakeRound(const rendezvous::RendezvousInfo& info) {
  for (const auto& [event, fields] : info.events) {
    Emit(event, nlohmann::json::parse(fields, nullptr, false));
  }
  info_ = info;
  if (info.restart_count) restart_count_ = *info.restart_count;
  Emit("round_formed", {{"group_world_size", info.group_world_size},
                        {"world_size", info.global_world_size.value_or(0)},
                        {"base_global_rank", info.base_global_rank.value_or(0)},
                        {"master", info.master_addr + ":" + std::to_string(info.master_port)}});
}

Node::RoundEnd Node::RunRound(const rendezvous::RendezvousInfo& info, int handle) {
  (void)info;
  for (;;) {
    const WorkersState state = world_.training.Await(handle, [this] {
      return NoticePendingLocked() || Leaving() || !world_.network.AliveLocked(id_, incarnation_);
    });
    world_.network.Enter(id_, incarnation_);  // paused: the agent acts once it runs again
    if (Leaving()) {  // Agent::HandleSignal(SIGTERM): declared gone first, then stopped
      Emit("leaving");
      try {
        handler_->AnnounceRoundEnd({rendezvous::RoundEnd::Kind::kLeaving,
                                    "node " + NodeAddress(id_) + " leaves (SIGTERM)"});
      } catch (const std::exception& error) {
        Emit("publish_failed", {{"error", error.what()}});
      }
      world_.training.Stop(handle);
      Exit(143, "received SIGTERM: this node left the job");
      return RoundEnd::kExit;
    }
    if (state == WorkersState::kRunning) {
      if (auto notice = TakeNotice()) {
        const RoundEnd end = OnNotice(*notice, handle);
        if (end == RoundEnd::kRejoin) return end;
      }
      continue;
    }
    if (state == WorkersState::kSucceeded) return RoundEnd::kDone;
    // Its own workers failed (a killed worker, or peers gone): Agent::Publish, then rejoin.
    nlohmann::json record{{"node", info_->group_rank},
                          {"host", NodeAddress(id_)},
                          {"rank", info_->base_global_rank.value_or(0)},
                          {"exitcode", 1}};
    Emit("worker_exited", {{"rank", info_->base_global_rank.value_or(0)}, {"exitcode", 1}});
    try {
      handler_->AnnounceRoundEnd({rendezvous::RoundEnd::Kind::kFailure, record.dump()});
    } catch (const std::exception& error) {
      world_.network.Enter(id_, incarnation_);
      Emit("publish_failed", {{"error", error.what()}});
    }
    Emit("restart", {{"cause", "failure"}});
    return RoundEnd::kRejoin;
  }
}

Node::RoundEnd Node::OnNotice(const ChangeNotice& notice, int handle) {
  switch (notice.kind) {
    case ChangeNotice::Kind::kNone:
      return RoundEnd::kDone;                 // not an end: the caller goes on
    case ChangeNotice::Kind::kRemoteFailure:  // HandleRemoteFailure, StopAfterFailure
      Emit("remote_failure", {{"record", notice.text}});
      world_.training.Stop(handle);
      Emit("restart", {{"cause", "failure"}});
      return RoundEnd::kRejoin;
    case ChangeNotice::Kind::kNodeLost: {  // HandleNodeLost
      const bool self = notice.node >= 0 && notice.node == info_->group_rank;
      if (notice.node >= 0) {
        Emit("node_lost", {{"node", notice.node}, {"reason", notice.text}, {"self", self}});
      } else {
        Emit("store_unreachable", {{"reason", notice.text}});
        handler_->AnnounceRoundEnd({rendezvous::RoundEnd::Kind::kStoreLost, notice.text});
      }
      world_.training.Stop(handle);
      Emit("restart", {{"cause", "membership"}});
      return RoundEnd::kRejoin;
    }
    case ChangeNotice::Kind::kMembershipChange:  // HandleMembershipChange
      Emit("membership_changed", {{"reason", notice.text}});
      world_.training.Stop(handle);
      Emit("restart", {{"cause", "membership"}});
      return RoundEnd::kRejoin;
  }
  return RoundEnd::kDone;
}

// --- the watch (launcher/backend/elastic_monitor.cc) ------------------------------------------

void Node::StartWatch(const rendezvous::RendezvousInfo& info) {
  std::shared_ptr<store::Store> old;
  {
    std::lock_guard lock(mutex_);
    watch_ = {watch_.generation + 1, info.round, info.group_rank, info.group_world_size};
    notices_.clear();
    old = std::move(watch_store_);
  }
  if (old) old->Interrupt();
  simulation_.Changed();
}

void Node::StopWatch() {
  std::shared_ptr<store::Store> old;
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
    old = std::move(watch_store_);
  }
  if (old) old->Interrupt();
  simulation_.Changed();
}

bool Node::WatchStopped(std::uint64_t generation) {
  std::lock_guard lock(mutex_);
  return finished_ || watch_.generation != generation;
}

void Node::RunWatch() {
  std::uint64_t seen = 0;
  try {
    for (;;) {
      simulation_.Block(
          kForever,
          [&] {
            if (!world_.network.AliveLocked(id_, incarnation_)) return true;
            std::lock_guard lock(mutex_);
            return finished_ || watch_.generation != seen;
          },
          nullptr);
      WatchRequest request;
      {
        std::lock_guard lock(mutex_);
        if (finished_) return;
        request = watch_;
      }
      world_.network.Enter(id_, incarnation_);
      seen = request.generation;
      WatchRound(request);
    }
  } catch (const NodeKilled&) {
  }
}

void Node::WatchRound(const WatchRequest& request) {
  const JobOptions& job = world_.job;
  const milliseconds timeout = rendezvous::StoreSilenceTimeout(job.keep_alive, job.max_attempts);
  try {
    auto store = watch_site_.Connect(handler_->StoreAddress(), timeout);
    {
      std::lock_guard lock(mutex_);
      if (finished_ || watch_.generation != request.generation) return;
      watch_store_ = store;
    }
    const int neighbour = rendezvous::RingNeighbour(request.me, request.world);
    rendezvous::LivenessScope scope{store,     {job.run_id}, request.round, request.me,
                                    neighbour, timeout,      &simulation_};
    rendezvous::HeartbeatCounterLiveness liveness(scope, simulation_.Now());
    rendezvous::DynamicRendezvousOptions on_this_clock = options_.rendezvous;
    on_this_clock.clock = &simulation_;
    rendezvous::DynamicRendezvous rendezvous(on_this_clock, store);
    Watch(request, *store, rendezvous, liveness);
  } catch (const NodeKilled&) {
    throw;
  } catch (const std::exception& error) {
    if (WatchStopped(request.generation)) return;
    Post(request.generation, {ChangeNotice::Kind::kNodeLost, -1,
                              std::string("lost the rendezvous store (") + error.what() + ")"});
  }
}

bool Node::Tick(std::uint64_t generation, milliseconds tick) {
  simulation_.Block(
      simulation_.Deadline(tick),
      [&] {
        if (!world_.network.AliveLocked(id_, incarnation_)) return true;
        std::lock_guard lock(mutex_);
        return finished_ || watch_.generation != generation;
      },
      nullptr);
  world_.network.Enter(id_, incarnation_);
  return !WatchStopped(generation);
}

void Node::Watch(const WatchRequest& request, store::Store& store,
                 rendezvous::DynamicRendezvous& rendezvous, rendezvous::MemberLiveness& liveness) {
  const JobOptions& job = world_.job;
  const int neighbour = rendezvous::RingNeighbour(request.me, request.world);
  const std::string change_key = rendezvous.RoundKey(request.round, "change");
  const auto tick = std::max(job.keep_alive / 4, milliseconds{1});
  bool delivered = false;
  bool declared = false;
  liveness.Beat();
  auto next_beat = simulation_.Now() + job.keep_alive;
  while (!WatchStopped(request.generation)) {
    if (!delivered) {
      try {
        store.Wait({change_key}, tick);
        Deliver(request.generation, RoundChange::Decode(store.GetString(change_key)), request.me);
        delivered = true;  // keep beating and watching while the agent rejoins
        continue;
      } catch (const store::StoreTimeout&) {
      }
    } else if (!Tick(request.generation, tick)) {
      return;
    }
    if (simulation_.Now() >= next_beat) {
      liveness.Beat();
      next_beat = simulation_.Now() + job.keep_alive;
    }
    if (neighbour < 0 || declared) continue;
    const auto now = simulation_.Now();
    if (liveness.NeighbourGone(now)) {  // ElasticMonitor::Watcher::DeclareLost
      const std::string host =
          rendezvous::MemberHost(store, {job.run_id}, request.round, neighbour);
      const RoundChange lost = rendezvous::NeighbourLost(neighbour, host, liveness.WhyGone(now));
      const RoundChange in_force = rendezvous.Announce(request.round, lost);
      if (!delivered) Deliver(request.generation, in_force, request.me);
      rendezvous.AccountGone(request.round, neighbour, lost);
      delivered = true;
      declared = true;
    }
  }
}

void Node::Deliver(std::uint64_t generation, const RoundChange& change, int me) {
  const ChangeNotice notice = rendezvous::NoticeOf(change, me);
  if (notice.kind == ChangeNotice::Kind::kNone) return;
  Post(generation, notice);
}

void Node::Post(std::uint64_t generation, ChangeNotice notice) {
  {
    std::lock_guard lock(mutex_);
    if (watch_.generation != generation) return;
    notices_.push_back({generation, std::move(notice)});
  }
  simulation_.Changed();
}

void Node::Leave() {
  {
    std::lock_guard lock(mutex_);
    leaving_ = true;
  }
  simulation_.Changed();
}

bool Node::Leaving() {
  std::lock_guard lock(mutex_);
  return leaving_;
}

bool Node::NoticePendingLocked() {
  std::lock_guard lock(mutex_);
  return !notices_.empty();
}

std::optional<ChangeNotice> Node::TakeNotice() {
  std::lock_guard lock(mutex_);
  if (notices_.empty()) return std::nullopt;
  ChangeNotice notice = std::move(notices_.front().notice);
  notices_.pop_front();
  return notice;
}

}  // namespace ddprun::sim
