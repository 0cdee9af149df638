// ddprun-sim: the elastic protocol at N simulated nodes under seeded churn (tests/sim/README.md).
//   ddprun-sim --nodes N --seed S [--first I] [--schedules K] [--history DIR] [--verbose]
// Each schedule runs the real rendezvous code of N nodes over a simulated network and store on
// the simulation's clock, and writes DIR/sim-S-I.json in the schema of tests/chaos/chaos.py's
// history.json, which tests/sim/sim.py checks with tests/chaos/checker.py.
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/sim/node.h"
#include "tests/sim/schedule.h"

namespace ddprun::sim {
namespace {

using std::chrono::milliseconds;

struct Args {
  int nodes = 64;
  std::uint64_t seed = 1;
  int first = 0;
  int schedules = 1;
  std::string history;
  bool verbose = false;
};

Args Parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--nodes") {
      args.nodes = std::stoi(value());
    } else if (flag == "--seed") {
      args.seed = std::stoull(value());
    } else if (flag == "--first") {
      args.first = std::stoi(value());
    } else if (flag == "--schedules") {
      args.schedules = std::stoi(value());
    } else if (flag == "--history") {
      args.history = value();
    } else if (flag == "--verbose") {
      args.verbose = true;
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
  if (args.nodes < 2) throw std::invalid_argument("--nodes must be at least 2");
  return args;
}

// --verbose: each log line starts with the simulated time and the node thread that wrote it.
thread_local std::string t_thread_name;
const Simulation* g_logging_simulation = nullptr;

class SimulatedTimeFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& out) override {
    const double seconds =
        g_logging_simulation == nullptr
            ? 0.0
            : std::chrono::duration<double>(g_logging_simulation->Elapsed()).count();
    const std::string text = fmt::format("{:8.3f} {}", seconds, t_thread_name);
    out.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SimulatedTimeFlag>();
  }
};

void LogSimulatedTime() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<SimulatedTimeFlag>('*').set_pattern("[%*] [%l] %v");
  spdlog::set_formatter(std::move(formatter));
}

nlohmann::json EpisodeJson(const Episode& episode) {
  nlohmann::json json{{"kind", episode.kind},
                      {"hosts", episode.hosts},
                      {"hold", episode.heal - episode.inject},
                      {"lead", 0.0},
                      {"returns", episode.returns}};
  if (episode.kind == "delay") {
    json["ms"] = episode.ms;
    json["jitter"] = 0;
  }
  return json;
}

class Run {
 public:
  Run(const Args& args, int index)
      : args_(args), index_(index), plan_(MakePlan(args.nodes, args.seed, index)) {}

  int Execute();

 private:
  void StartNode(int id);
  void Apply(const Action& action);
  bool AllDoneLocked();
  // Waits as the driver until simulated `at` seconds, or until every agent ended (false).
  bool WaitUntil(double at);
  nlohmann::json History(const std::string& error);
  double Now() { return world_->Now(); }

  const Args& args_;
  int index_;
  Plan plan_;
  std::unique_ptr<Simulation> simulation_;
  std::unique_ptr<Network> network_;
  std::unique_ptr<Training> training_;
  std::unique_ptr<World> world_;
  std::vector<std::unique_ptr<Node>> nodes_;  // every incarnation, until the threads ended
  std::vector<Node*> current_;
  std::vector<std::future<void>> threads_;
};

void Run::StartNode(int id) {
  int incarnation = 0;
  if (current_[id] != nullptr) {
    const bool alive = network_->Alive(id, current_[id]->incarnation());
    if (alive && !current_[id]->Finished()) return;  // still running
    incarnation = network_->Revive(id);
  }
  nodes_.push_back(std::make_unique<Node>(*world_, id, incarnation));
  Node* node = nodes_.back().get();
  current_[id] = node;
  const std::string name = NodeAddress(id) + "#" + std::to_string(incarnation);
  threads_.push_back(simulation_->Spawn(name, [node, name] {
    t_thread_name = name + " agent";
    node->RunAgent();
  }));
  threads_.push_back(simulation_->Spawn(name + " watch", [node, name] {
    t_thread_name = name + " watch";
    node->RunWatch();
  }));
}

void Run::Apply(const Action& action) {
  switch (action.kind) {
    case Action::Kind::kStart:
      for (int id : action.nodes) StartNode(id);
      return;
    case Action::Kind::kKill:
      for (int id : action.nodes) {
        network_->Kill(id);
        if (current_[id] != nullptr) current_[id]->Kill();
      }
      return;
    case Action::Kind::kPause:
    case Action::Kind::kResume:
      for (int id : action.nodes) network_->SetPaused(id, action.kind == Action::Kind::kPause);
      return;
    case Action::Kind::kCut:
      network_->Cut(action.nodes, action.in, action.out);
      training_->NetworkChanged();
      return;
    case Action::Kind::kHeal:
      network_->HealCuts();
      training_->NetworkChanged();
      return;
    case Action::Kind::kFailWorker:
      for (int id : action.nodes) training_->FailWorker(id);
      return;
    case Action::Kind::kLeave:
      for (int id : action.nodes) {
        if (current_[id] != nullptr) current_[id]->Leave();
      }
      return;
    case Action::Kind::kDelay:
      for (int id : action.nodes)
        network_->SetDelay(id, std::chrono::milliseconds(action.delay_ms));
      return;
  }
}

bool Run::AllDoneLocked() {
  for (Node* node : current_) {
    if (node != nullptr && !node->FinishedLocked()) return false;
  }
  return true;
}

bool Run::WaitUntil(double at) {
  const auto span = milliseconds(static_cast<std::int64_t>(std::ceil((at - Now()) * 1000)));
  if (span.count() > 0) {
    simulation_->Block(
        simulation_->Deadline(span), [this] { return AllDoneLocked(); }, nullptr);
  }
  return !AllDoneLocked();
}

int Run::Execute() {
  const auto real_start = std::chrono::steady_clock::now();
  // The interleaving is the seed's too: one participant runs at a time, chosen by this seed.
  const std::uint64_t interleaving = args_.seed * 1'000'003ULL +
                                     static_cast<std::uint64_t>(index_) * 7919ULL +
                                     static_cast<std::uint64_t>(args_.nodes) * 31ULL + 1;
  simulation_ = std::make_unique<Simulation>(interleaving, std::chrono::seconds(300));
  g_logging_simulation = simulation_.get();
  network_ = std::make_unique<Network>(*simulation_, plan_.nodes);
  TrainingOptions training;
  training.target_steps = plan_.target_steps;
  training_ = std::make_unique<Training>(*network_, training);
  JobOptions job;
  job.min_nodes = plan_.min_nodes;
  job.max_nodes = plan_.max_nodes;
  job.nproc = 2;
  job.max_restarts = 20;
  world_.reset(new World{*network_, *training_, job});
  current_.assign(plan_.nodes, nullptr);
  std::printf("sim: seed %llu schedule %d: %s\n", static_cast<unsigned long long>(args_.seed),
              index_, plan_.Describe().c_str());
  std::fflush(stdout);

  bool running = true;
  for (const Action& action : plan_.actions) {
    running = WaitUntil(action.at) || action.at == 0;
    if (!running) break;
    Apply(action);
    if (action.fault >= 0) {  // the times it happened at, not the planned ones (ms apart)
      Episode& episode = plan_.episodes[action.fault];
      const bool heals = action.kind != Action::Kind::kKill &&
                         action.kind != Action::Kind::kPause && action.kind != Action::Kind::kCut &&
                         action.kind != Action::Kind::kFailWorker;
      (heals ? episode.heal : episode.inject) = Now();
    }
  }
  const double bound = plan_.target_steps * 3.0 + 600;
  if (running) WaitUntil(bound);
  std::string error;
  if (!AllDoneLocked()) {
    error = "agents still running at " + std::to_string(static_cast<int>(Now())) +
            " s of simulated time";
    for (Node* node : current_) {
      if (node == nullptr || node->Finished()) continue;
      network_->Kill(node->id());
      node->Kill();
    }
  }
  const double simulated = Now();
  for (auto& thread : threads_) {
    if (!simulation_->Finishes(thread, std::chrono::hours(1))) error += "; a thread never ended";
  }
  training_->Finish();
  const nlohmann::json history = History(error);
  threads_.clear();
  nodes_.clear();
  const std::uint64_t trace = simulation_->Trace();
  g_logging_simulation = nullptr;
  simulation_.reset();
  const double real =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  std::printf(
      "sim: seed %llu schedule %d: %.1f s simulated in %.1f s real (%.1fx); %d steps, %zu "
      "agents; trace %016llx%s%s\n",
      static_cast<unsigned long long>(args_.seed), index_, simulated, real,
      real > 0 ? simulated / real : 0.0, training_->StepsDone(), history["agents"].size(),
      static_cast<unsigned long long>(trace), error.empty() ? "" : "; ", error.c_str());
  if (!args_.history.empty()) {
    std::filesystem::create_directories(args_.history);
    const std::string path = args_.history + "/sim-" + std::to_string(args_.seed) + "-" +
                             std::to_string(index_) + ".json";
    std::ofstream(path) << history.dump();
  }
  return error.empty() ? 0 : 1;
}

nlohmann::json Run::History(const std::string& error) {
  nlohmann::json agents = nlohmann::json::array();
  std::optional<double> last_exit;
  bool all_exited = true;
  for (const AgentRecord& record : world_->records) {
    agents.push_back(record.ToJson());
    if (!record.exit) all_exited = false;
    if (record.exit) last_exit = std::max(last_exit.value_or(0), *record.exit);
  }
  const nlohmann::json steps = training_->Steps();
  std::optional<double> released;
  for (const auto& line : steps) {
    if (line["step"].get<int>() == plan_.target_steps - 1) {
      const double t = line["t"].get<double>();
      released = std::min(released.value_or(t), t);
    }
  }
  nlohmann::json faults = nlohmann::json::array();
  for (const Episode& episode : plan_.episodes) {
    if (released && episode.inject >= *released) continue;  // the job was over already
    nlohmann::json fault = EpisodeJson(episode);
    fault["inject"] = episode.inject;
    fault["heal"] = episode.heal;
    // Full size after the heal: MAX, or every node whose agent ran then.
    std::set<int> live;
    for (const AgentRecord& record : world_->records) {
      if (record.start <= episode.heal + 1e-3 && (!record.exit || *record.exit > episode.heal)) {
        live.insert(record.host);
      }
    }
    if (episode.kind == "leave") {  // gone for good, though it exits a moment after
      for (int host : episode.hosts) live.erase(host);
    }
    const int full = std::min<int>(plan_.max_nodes, static_cast<int>(live.size())) * 2;
    double recovered = training_->FirstFullSize(episode.heal, full);
    if (recovered < 0 && released && *released >= episode.heal) recovered = *released;
    fault["recovered"] = recovered < 0 ? nlohmann::json() : nlohmann::json(recovered);
    faults.push_back(fault);
  }
  nlohmann::json schedule = nlohmann::json::array();
  for (const Episode& episode : plan_.episodes) schedule.push_back(EpisodeJson(episode));
  const bool ended = !released && all_exited && error.empty();
  return {{"seed", std::to_string(args_.seed)},
          {"index", index_},
          {"without", nlohmann::json::array()},
          {"backend", "c10d"},
          {"simulated", true},
          {"nodes", plan_.nodes},
          {"faults", faults},
          {"schedule", schedule},
          {"started_at", 0.0},
          {"first_full_size", training_->FirstFullSize(0, plan_.max_nodes * 2)},
          {"released_at", released ? nlohmann::json(*released) : nlohmann::json()},
          {"ended_at", Now()},
          {"harness_error", error.empty() ? nlohmann::json() : nlohmann::json(error)},
          {"job_ended", ended && last_exit ? nlohmann::json(*last_exit) : nlohmann::json()},
          {"agents", agents},
          {"samples", training_->Samples()},
          {"steps", steps},
          {"started", nlohmann::json::array()},
          {"leftovers", nlohmann::json::array()},
          {"config",
           {{"hosts", plan_.nodes},
            {"nproc", 2},
            {"heartbeat_timeout", world_->job.Heartbeat().count() / 1000.0},
            {"read_timeout", world_->job.read_timeout.count() / 1000.0},
            {"ckpt_every", 5},
            {"max_restarts", world_->job.max_restarts},
            {"min_nodes", plan_.min_nodes},
            {"max_nodes", plan_.max_nodes}}}};
}

}  // namespace
}  // namespace ddprun::sim

int main(int argc, char** argv) {
  using namespace ddprun::sim;
  Args args;
  try {
    args = Parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr,
                 "ddprun-sim: %s\nusage: ddprun-sim --nodes N --seed S [--first I] "
                 "[--schedules K] [--history DIR] [--verbose]\n",
                 error.what());
    return 2;
  }
  spdlog::set_level(args.verbose ? spdlog::level::info : spdlog::level::off);
  if (args.verbose) LogSimulatedTime();
  int failed = 0;
  for (int index = args.first; index < args.first + args.schedules; ++index) {
    Run run(args, index);
    failed += run.Execute();
  }
  return failed == 0 ? 0 : 1;
}
