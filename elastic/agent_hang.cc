// The Agent's hang half: a rank that made no progress or whose file timer expired, the stacks
// asked for before anything is killed, the root cause that says where every rank was, and
// workers that will not die.
#include <boost/algorithm/string/join.hpp>
#include <csignal>
#include <fstream>

#include "common/duration.h"
#include "common/logging.h"
#include "elastic/agent.h"
#include "elastic/learned_hang_timeout.h"
#include "elastic/stack_report.h"

namespace ddprun::elastic {
namespace {

// Line `line` of a source file, trimmed (the summary quotes the stuck line).
std::optional<std::string> ReadSourceLine(const std::string& file, int line) {
  std::ifstream in(file);
  std::string text;
  for (int number = 1; in && std::getline(in, text); ++number) {
    if (number < line) continue;
    const auto begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos) return std::nullopt;
    const auto end = text.find_last_not_of(" \t\r");
    return text.substr(begin, end - begin + 1);
  }
  return std::nullopt;
}

std::string RankText(int global_rank, int local_rank, pid_t pid) {
  return "rank " + std::to_string(global_rank) + " (local rank " + std::to_string(local_rank) +
         ", pid " + std::to_string(pid) + ")";
}

}  // namespace

void Agent::HandleHang(const HangReport& report) {
  if (state_ != State::kHealthy) return;
  hang_ = report;
  spdlog::error("[{}] {}: {}; asking every live worker for its Python stacks", spec_.role,
                RankText(GlobalRankOf(report.local_rank), report.local_rank, report.pid),
                report.cause);
  DumpStacksThenStop();
}

// Evidence before anything is killed: every live worker writes its stacks (SIGABRT with
// PYTHONFAULTHANDLER), then the group fails (a local hang) or stops (a peer's).
void Agent::DumpStacksThenStop() {
  state_ = State::kStoppingAfterFailure;
  CancelBarrier();
  dumping_ = true;
  processes_.DumpStacks(options_.stack_dump_window, [this] { OnStacksDumped(); });
}

void Agent::OnStacksDumped() {
  if (!dumping_) return;
  dumping_ = false;
  if (state_ != State::kStoppingAfterFailure) return;  // a signal took over meanwhile
  if (!hang_) {  // a peer's hang: this node's stacks are in its logs; stop as for any failure
    StopAfterFailure();
    return;
  }
  ProcessFailure failure = HangFailure();
  failure.hang_before_progress = !hang_->progressed;
  CountHangsBeforeProgress(failure);
  failure.hangs_before_progress = hangs_before_progress_;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& worker : attempt_.workers) ranks.push_back(worker.global_rank);
  Emit("hang",
       {{"kind", hang_->kind == HangReport::Kind::kTimerExpired ? "timer_expired" : "no_progress"},
        {"rank", failure.global_rank},
        {"local_rank", failure.local_rank},
        {"cause", hang_->cause},
        {"scope", hang_->scope},
        {"ranks", ranks},
        {"stacks", StackFiles()},
        {"startup", hang_->startup},
        {"before_progress", failure.hang_before_progress},
        {"hangs_before_progress", hangs_before_progress_},
        {"summary", failure.message}});
  if (hang_->kind == HangReport::Kind::kTimerExpired && hang_->signal > 0) {
    processes_.Signal(hang_->local_rank, hang_->signal);  // what the timer asked for
  }
  failures_.push_back(failure);
  failure_origins_.push_back({info_.group_rank, spec_.hostname, true});
  spdlog::error("[{}] {}", spec_.role, failure.message);
  OnLocalFailure(failures_.back());
}

// The root cause of a hang: the odd rank the stacks show (else the silent one), with one line
// saying where every rank was and where the stacks are.
ProcessFailure Agent::HangFailure() const {
  std::vector<RankPlace> places;
  for (const auto& worker : attempt_.workers) {
    const std::string& dump = stack_dumps_.at(worker.local_rank);
    places.push_back(PlaceOf(worker.global_rank, ParseFaulthandlerDump(dump)));
  }
  ProcessFailure failure;
  failure.local_rank = hang_->local_rank;
  failure.pid = hang_->pid;
  const auto odd = OddRank(places);
  for (const auto& worker : attempt_.workers) {
    if (odd ? worker.global_rank == *odd : worker.local_rank == hang_->local_rank) {
      failure.local_rank = worker.local_rank;
      failure.global_rank = worker.global_rank;
    }
  }
  failure.status = ExitStatus::Signaled(SIGABRT);
  for (std::size_t i = 0; i < failures_.size(); ++i) {  // the exit its stack dump ended in
    if (failure_origins_[i].local && failures_[i].local_rank == failure.local_rank) {
      failure.status = failures_[i].status;
      failure.pid = failures_[i].pid;
    }
  }
  failure.time = hang_->time;
  failure.hang = true;
  failure.message =
      "hang: " + RankText(GlobalRankOf(hang_->local_rank), hang_->local_rank, hang_->pid) + ": " +
      hang_->cause;
  const std::string places_text = DescribePlaces(places, ReadSourceLine);
  if (!places_text.empty()) failure.message += "\n" + places_text;
  const std::vector<std::string> stack_files = StackFiles();
  if (!stack_files.empty()) {
    failure.message += "\nstacks: " + boost::algorithm::join(stack_files, ", ");
  }
  return failure;
}

int Agent::GlobalRankOf(int local_rank) const {
  const bool known = local_rank >= 0 && local_rank < static_cast<int>(attempt_.workers.size());
  return known ? attempt_.workers[local_rank].global_rank : -1;
}

std::vector<std::string> Agent::StackFiles() const {
  std::vector<std::string> files;
  for (const auto& worker : attempt_.workers) {
    if (!worker.stacks_file.empty() && !stack_dumps_.at(worker.local_rank).empty()) {
      files.push_back(worker.stacks_file);
    }
  }
  return files;
}

// A hang before any progress past start-up (the job never got going) counts; any other failure
// starts the count again. A peer's record carries the job's count: a node that joined since
// takes it from there.
void Agent::CountHangsBeforeProgress(const ProcessFailure& failure) {
  if (!failure.hang || !failure.hang_before_progress) {
    hangs_before_progress_ = 0;
    return;
  }
  hangs_before_progress_ = std::max(hangs_before_progress_ + 1, failure.hangs_before_progress);
}

bool Agent::StopForHangsBeforeProgress() {
  const int limit = spec_.max_no_progress_hangs;
  const int restarts_left = spec_.max_restarts - restart_count_;
  if (limit <= 0 || hangs_before_progress_ < limit || restarts_left <= 0) return false;
  const std::string line =
      "the job hung " + std::to_string(hangs_before_progress_) + " attempts in a row before " +
      "any rank made progress past start-up (--max-no-progress-hangs=" + std::to_string(limit) +
      "): not restarting again, " + std::to_string(restarts_left) + " of " +
      std::to_string(spec_.max_restarts) + " restarts left unspent; look at the stacks of the " +
      "hangs above, or raise --hang-startup-timeout if start-up is slower than " +
      DurationText(spec_.hang.startup);
  Emit("no_progress_stop",
       {{"hangs_before_progress", hangs_before_progress_}, {"restarts_left", restarts_left}});
  FinishFailed(line);
  return true;
}

void Agent::HandleHangTimeoutLearned(const LearnedHangTimeout& learned) {
  if (learned_hang_timeout_ && learned.timeout <= *learned_hang_timeout_) return;
  const bool first = !learned_hang_timeout_;
  learned_hang_timeout_ = learned.timeout;
  const std::string line = "hang timeout learned: " + DurationText(learned.timeout) + " (" +
                           DescribeHangTimeout(spec_.hang) + "; the longest interval seen: " +
                           DurationText(learned.longest_interval) + ")";
  if (first) {
    spdlog::warn("[{}] {}", spec_.role, line);
  } else {
    spdlog::info("[{}] {}", spec_.role, line);
  }
  Emit("hang_timeout_learned", {{"timeout_s", learned.timeout.count() / 1000.0},
                                {"longest_interval_s", learned.longest_interval.count() / 1000.0},
                                {"factor", spec_.hang.learning.factor},
                                {"floor_s", spec_.hang.learning.floor.count() / 1000.0}});
  PublishLearnedHangTimeout();
}

// The job's other nodes (and this node's next round, should the store move) read it at their
// next round.
void Agent::PublishLearnedHangTimeout() {
  store::Store* job_store = info_.job_store;
  if (job_store == nullptr || !learned_hang_timeout_) return;
  runner_.Run(
      [job_store, mine = learned_hang_timeout_] {
        elastic::ShareLearnedHangTimeout(*job_store, mine);
      },
      [](std::exception_ptr error) {
        if (!error) return;
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& failure) {
          spdlog::warn(
              "could not keep the learned hang timeout in the job's store: {} (the next "
              "round tries again)",
              failure.what());
        }
      });
}

void Agent::HandleUnkillable(const std::string& line) {
  Emit("worker_unkillable", {{"detail", line}});
  unkillable_.push_back(line);
}

}  // namespace ddprun::elastic
