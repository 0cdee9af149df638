#include "launcher/run.h"

#include <unistd.h>

#include <algorithm>
#include <boost/algorithm/string/join.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/cli.h"
#include "common/asio.h"
#include "common/env_names.h"
#include "common/errors.h"
#include "common/exit_status.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/open_files.h"
#include "elastic/agent.h"
#include "elastic/torchelastic_events.h"
#include "launcher/agent_loop.h"
#include "launcher/backend/launch_backend.h"
#include "launcher/dry_run.h"
#include "launcher/event_log_file.h"
#include "launcher/launch_setup.h"
#include "launcher/machine_facts_reader.h"
#include "launcher/process/local_process_context.h"
#include "launcher/process/output_sink.h"
#include "launcher/process/session_keeper.h"
#include "launcher/telemetry/agent_telemetry.h"
#include "launcher/telemetry/health_server.h"
#include "launcher/thread_runner.h"

namespace ddprun::launcher {
namespace {

using elastic::AgentResult;
using elastic::LaunchConfig;

// As torchrun's launcher: a job that finished (succeeded, or failed for good) closes its
// rendezvous, so that late or waiting nodes stop; an agent stopped by a signal leaves it open
// for the others to go on without it.
void CloseRendezvous(rendezvous::RendezvousHandler& rendezvous, const AgentResult& result) {
  if (result.state == AgentResult::State::kStopped) return;
  try {
    rendezvous.SetClosed();
  } catch (const std::exception& error) {
    spdlog::warn("could not close the rendezvous: {}", error.what());
  }
}

std::unique_ptr<JsonLinesEventLog> OpenEventLog(const LaunchConfig& config) {
  if (!config.event_log) return nullptr;
  return std::make_unique<JsonLinesEventLog>(*config.event_log, config.GivenAs("event_log"));
}

// --event-log-handler=console: torchelastic's events on stderr, one write(2) per line so that
// they do not interleave with the workers' output. null and dynamic_rendezvous (a null handler
// in open-source torch) tell nothing, as under torchrun.
std::unique_ptr<elastic::TorchelasticEvents> OpenConsoleEvents(const LaunchConfig& config,
                                                               const elastic::WorkerSpec& spec) {
  if (config.event_log_handler != "console") return nullptr;
  elastic::TorchelasticRun run;
  run.run_id = config.rdzv_id;
  run.rdzv_backend = config.standalone ? "c10d" : config.rdzv_backend;
  // torch's get_entrypoint_name(): the program's base name ("python3", "train.sh").
  run.entry_point =
      spec.command.empty() ? "" : std::filesystem::path(spec.command.front()).filename();
  return std::make_unique<elastic::TorchelasticEvents>(run, [](const std::string& line) {
    const std::string text = line + "\n";
    process::WriteAll(STDERR_FILENO, text);
  });
}

elastic::Environment LauncherEnvironment(const LaunchConfig& config) {
  elastic::Environment env = CurrentEnvironment();
  if (elastic::ApplyOmpDefault(env, config.nproc_per_node)) {
    std::cerr << elastic::OmpWarningBanner() << std::endl;
  }
  env[env::kSignalsToHandle] = boost::algorithm::join(config.signals_to_handle, ",");
  return env;
}

// A 16k-rank job opens a store connection per worker on the node hosting the store.
void RaiseFileLimit(const LaunchConfig& config) {
  const OpenFileLimit files = RaiseOpenFileLimit();
  const auto ranks = static_cast<std::uint64_t>(config.max_nodes) *
                     static_cast<std::uint64_t>(std::max(config.nproc_per_node, 1));
  const std::string asked = "a job of up to " + std::to_string(ranks) + " ranks on " +
                            std::to_string(config.max_nodes) + " node(s), a store connection each,";
  if (const auto shortfall = ConnectionShortfall(asked, ranks + config.max_nodes, files,
                                                 "start fewer workers per store")) {
    spdlog::warn("{}", *shortfall);
  }
}

telemetry::StoreLoadReader HostedStoreLoad(const backend::LaunchBackend& backend) {
  if (!backend.hosted_store_load) return nullptr;
  return [load = backend.hosted_store_load]() -> std::optional<telemetry::StoreLoad> {
    const auto served = load();
    if (!served) return std::nullopt;
    return telemetry::StoreLoad{served->connections, served->requests};
  };
}

// --health_port: served on the agent's loop; its address logged and in the event log.
std::unique_ptr<telemetry::HealthServer> ServeHealth(asio::io_context& io,
                                                     const LaunchConfig& config,
                                                     telemetry::AgentTelemetry& telemetry) {
  if (!config.health_port) return nullptr;
  auto server = std::make_unique<telemetry::HealthServer>(
      io, config.health_addr, *config.health_port, telemetry, config.GivenAs("health_port"));
  const std::string where = HostPort{server->Host(), server->Port()}.ToString();
  // At the default level (WARNING), as elastic rounds are: port 0 is found here or in the log.
  spdlog::warn("health endpoint: http://{}/healthz and /metrics", where);
  telemetry.Record("health_endpoint", {{"address", where}, {"port", server->Port()}});
  return server;
}

// A handled signal that arrived while no agent listened (before the loop, or after the agent was
// done): the launcher exits 128+N for it, as it does for one the agent handled.
int ExitForHeldSignal(HeldSignals& held, int code, const char* when) {
  const auto signal = held.TakePending();
  if (!signal) return code;
  std::cerr << "ddprun: received " << SignalName(*signal).value_or(std::to_string(*signal)) << " "
            << when << "; exit code " << 128 + *signal << std::endl;
  return 128 + *signal;
}

int Launch(const LaunchConfig& config, HeldSignals& held) {
  std::signal(SIGPIPE, SIG_IGN);
  RaiseFileLimit(config);
  held.Hold(config);
  if (config.standalone_flag) {
    spdlog::info("Rendezvous info: --rdzv-backend={} --rdzv-endpoint={} --rdzv-id={}",
                 config.rdzv_backend, config.rdzv_endpoint, config.rdzv_id);
  }
  // One plan: what the dry run prints is what the backend below executes. Decided before the
  // OMP banner, so that a binding that cannot be satisfied is one line.
  const backend::LaunchPlan plan = backend::PlanLaunch(config, ReadMachineFacts(config));
  const elastic::Environment env = LauncherEnvironment(config);
  if (config.dry_run) {  // before any dir or port
    return ExitForHeldSignal(held, RunDryRun(std::cout, config, plan, env), "while planning");
  }
  if (plan.etcd_v2_note) spdlog::warn("{}", *plan.etcd_v2_note);
  if (!config.warm_restart_skipped.empty()) spdlog::info("{}", config.warm_restart_skipped);
  const auto events = OpenEventLog(config);
  RunLogDir logs(config, config.rdzv_id);
  // Before any thread or worker; destroyed after the workers (its sweep ends the launch).
  const process::SessionKeeper keeper;
  const elastic::WorkerSpec spec = MakeWorkerSpec(config, plan, env, logs.Path());
  const auto console_events = OpenConsoleEvents(config, spec);
  elastic::EventSinks sinks({events.get(), console_events.get()});
  asio::io_context io(kOneThread);
  const auto backend = backend::MakeBackend(io, plan, spec);
  process::LocalProcessContext processes(
      io, {.session_keeper_fd = keeper.WriteFd(),
           .job_cgroup_fd = keeper.JobCgroupFd(),
           .warm_pool = WarmPoolOptionsOf(config, plan, spec, keeper)});
  std::optional<ThreadRunner> runner;
  if (backend->blocking) runner.emplace(io);
  // Between the agent and --event_log's sink: what --health_port shows.
  telemetry::AgentTelemetry agent_telemetry(spec.max_restarts, &sinks);
  agent_telemetry.SetStoreLoad(HostedStoreLoad(*backend));
  agent_telemetry.SetActivity([&processes] { return processes.LastActivity(); });
  const auto health = ServeHealth(io, config, agent_telemetry);
  elastic::Agent agent(spec, backend->agent_options, *backend->rendezvous, processes,
                       {runner ? &*runner : nullptr, backend->monitor.get(), &agent_telemetry});
  const AgentResult result = RunAgentLoop(io, config, agent);
  if (backend->monitor) backend->monitor->Unwatch();
  CloseRendezvous(*backend->rendezvous, result);
  backend->rendezvous->Shutdown();
  ReportResult(result, config);
  if (result.state == AgentResult::State::kStopped) return result.ExitCode();
  return ExitForHeldSignal(held, result.ExitCode(), "as the run ended");
}

}  // namespace

int Main(int argc, char** argv) {
  if (process::IsSessionKeeper(argc, argv))
    return process::RunSessionKeeper(argc, argv);  // before any flag is looked at
  HeldSignals held;  // before anything else: no handled signal kills the launcher
  InitLogging();
  try {
    const cli::CliResult cli =
        cli::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), cli::ProcessEnv(),
                              cli::PersonalityOf(argv[0]));
    if (cli.action == cli::CliResult::Action::kPrintAndExit) {
      std::cout << cli.text << std::flush;
      return ExitForHeldSignal(held, 0, "while printing");
    }
    return Launch(cli.config, held);
  } catch (const UsageError& error) {
    std::cerr << "ddprun: error: " << error.what() << std::endl;
    return ExitForHeldSignal(held, 2, "while starting");
  } catch (const std::exception& error) {
    std::cerr << "ddprun: " << error.what() << std::endl;
    return ExitForHeldSignal(held, 1, "while starting");
  }
}

}  // namespace ddprun::launcher
