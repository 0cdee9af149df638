// The Agent's hang half: a rank that made no progress or whose file timer expired, the stacks
// asked for before anything is killed, the root cause that says where every rank was, and
// workers that will not die.
#include <boost/algorithm/string/join.hpp>
#include <csignal>
#include <fstream>

#include "common/logging.h"
#include "elastic/agent.h"
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
  const ProcessFailure failure = HangFailure();
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& worker : attempt_.workers) ranks.push_back(worker.global_rank);
  Emit("hang", {{"kind", hang_->kind == HangReport::Kind::kTimerExpired ? "timer_expired"
                                                                        : "no_progress"},
                {"rank", failure.global_rank},
                {"local_rank", failure.local_rank},
                {"cause", hang_->cause},
                {"scope", hang_->scope},
                {"ranks", ranks},
                {"stacks", StackFiles()},
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
  failure.message = "hang: " +
                    RankText(GlobalRankOf(hang_->local_rank), hang_->local_rank, hang_->pid) +
                    ": " + hang_->cause;
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

void Agent::HandleUnkillable(const std::string& line) {
  Emit("worker_unkillable", {{"detail", line}});
  unkillable_.push_back(line);
}

}  // namespace ddprun::elastic
