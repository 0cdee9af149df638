// The simulated workers of ddprun-sim: one collective per group (the round's worker store,
// "master"), as tests/chaos/chaos_train.py behaves under gloo, on the simulation's clock.
//   - A group starts once all its nodes started their workers (init_process_group), within
//     init_timeout; it resumes from the job's checkpoint (the step after the latest multiple of
//     ckpt_every that any group completed).
//   - It completes one step every step_time while every member's workers run and reach group
//     rank 0 both ways; rank 0 logs each step (the history's step lines) and checkpoints every
//     ckpt_every steps. A cut between members stalls it; stalled for gloo_timeout, every member's
//     workers fail. It ends with success at the job's target step.
//   - A member whose workers stop (SIGTERM: their exit takes term_time), die (killed node) or
//     fail breaks the group when they are gone: the other members' workers fail then ("Connection
//     closed by peer"), unless they were stopped first.
// The step lines are computed lazily (a group advances when someone looks at it), which keeps a
// 1,000-node job to a few events per group instead of a barrier per step.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/network.h"

namespace ddprun::sim {

struct TrainingOptions {
  std::chrono::milliseconds step_time{1000};
  int ckpt_every = 5;
  int target_steps = 100;
  std::chrono::milliseconds startup{1000};         // spawn -> first step (torch's import)
  std::chrono::milliseconds init_timeout{30'000};  // gloo's init and collective timeout
  std::chrono::milliseconds term_time{200};        // SIGTERM -> the workers gone
};

// One node's workers in one group.
struct WorkersStart {
  std::string master;  // the group ("addr:port" of its worker store)
  int group_world_size = 1;
  int group_rank = 0;
  int node = 0;
  int incarnation = 0;
  int base_rank = 0;
  int nproc = 1;
  int world_size = 1;
  int restart_count = 0;
};

enum class WorkersState { kRunning, kSucceeded, kFailed, kStopped };

class Training {
 public:
  Training(Network& network, TrainingOptions options);

  // Starts a node's workers (one simulated pid for the node's local ranks); returns a handle.
  int Start(const WorkersStart& start);
  // Blocks the calling (the node's agent) thread until its workers ended or `interrupt()`
  // (evaluated under the simulation's lock); returns their state then.
  WorkersState Await(int handle, const std::function<bool()>& interrupt);
  WorkersState StateOf(int handle);
  int Pid(int handle);
  // The agent stops its workers (SIGTERM); they are gone term_time later (returns then, on
  // the node's time).
  void Stop(int handle);
  // A worker of `node`'s current workers dies (the kill-worker fault); false when none runs.
  bool FailWorker(int node);
  // The node's machine is gone: its workers die now.
  void KillNode(int node);
  // The network changed: groups whose members no longer reach each other stall, others resume.
  void NetworkChanged();
  // Advances every group to now (the end of the run).
  void Finish();

  // --- the history ---
  nlohmann::json Steps();
  nlohmann::json Samples();
  int StepsDone();  // the steps any group completed, the highest + 1
  // The first step after `since_s` at `world_size` or more (spares that started after the heal
  // count too); -1: never.
  double FirstFullSize(double since_s, int world_size);

 private:
  struct Group;
  struct Member {
    Group* group = nullptr;
    WorkersStart start;
    int pid = 0;
    WorkersState state = WorkersState::kRunning;
    std::int64_t gone_at = -1;  // ns: when its workers are gone (stop, kill, failure)
  };
  struct Group {
    std::string master;
    int nodes = 0;
    std::vector<int> members;  // handles, by group rank (-1: not started yet)
    int joined = 0;
    enum class Phase { kInit, kRunning, kStalled, kDone } phase = Phase::kInit;
    std::int64_t init_deadline = 0;
    std::int64_t next_step_at = 0;  // running: when the current step completes
    std::int64_t stalled_at = 0;
    std::int64_t left_for_step = 0;  // stalled: what the current step still needs
    std::int64_t break_at = -1;      // a member's workers are gone then
    int step = 0;
  };

  std::int64_t NowNs();
  // Brings `group` to time `now` (steps, stalls, breaks); under mutex_.
  void Advance(Group& group, std::int64_t now);
  void AdvanceAll(std::int64_t now);
  void LogSteps(Group& group, std::int64_t until);
  void EndGroup(Group& group, std::int64_t at, WorkersState members_state);
  bool Connected(const Group& group);
  std::int64_t NextEvent(const Group& group) const;
  void SetGone(Member& member, WorkersState state, std::int64_t at);
  // The node's running workers end now as `state` (their group breaks): whether they were
  // running, and whether they were still running once the group caught up to now.
  enum class Ended { kNotRunning, kEndedMeanwhile, kNow };
  Ended EndWorkersLocked(int node, WorkersState state);
  double Seconds(std::int64_t ns) const { return static_cast<double>(ns) / 1e9; }

  Network& network_;
  Simulation& simulation_;
  TrainingOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  std::vector<Member> members_;
  std::map<int, int> current_;  // node -> its latest handle
  int next_pid_ = 1000;
  int checkpoint_ = 0;  // the step the next group resumes at
  int steps_done_ = 0;
  std::int64_t version_ = 0;  // moves on at every change of a group (wakes its members)
  nlohmann::json steps_ = nlohmann::json::array();
  nlohmann::json samples_ = nlohmann::json::array();
};

}  // namespace ddprun::sim
