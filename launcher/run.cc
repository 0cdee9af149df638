#include "launcher/run.h"

#include <csignal>
#include <iostream>

#include "common/asio.h"
#include "common/env_names.h"
#include "common/errors.h"
#include "common/hostname.h"
#include "common/logging.h"
#include "elastic/agent.h"
#include "launcher/cli.h"
#include "launcher/dry_run.h"
#include "launcher/launch_setup.h"
#include "launcher/local_process_context.h"
#include "launcher/master_endpoint.h"

namespace ddprun::launcher {
namespace {

using elastic::AgentResult;
using elastic::LaunchConfig;

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

elastic::Environment LauncherEnvironment(const LaunchConfig& config) {
  elastic::Environment env = CurrentEnvironment();
  if (elastic::ApplyOmpDefault(env, config.nproc_per_node)) {
    std::cerr << elastic::OmpWarningBanner() << std::endl;
  }
  env[env::kSignalsToHandle] = Join(config.signals_to_handle, ",");
  return env;
}

void Report(const AgentResult& result, const LaunchConfig& config) {
  switch (result.state) {
    case AgentResult::State::kSucceeded:
      return;
    case AgentResult::State::kFailed:
      std::cerr << "\n"
                << elastic::FormatFailureSummary(EntrypointName(config), Fqdn(), result.failures)
                << std::endl;
      return;
    case AgentResult::State::kStopped:
      std::cerr << "ddprun: received " << SignalName(result.signal).value_or("a signal")
                << "; workers stopped" << std::endl;
      return;
    case AgentResult::State::kError:
      std::cerr << "ddprun: error: " << result.error << std::endl;
      return;
  }
}

// Forwards every handled signal to the agent until the agent is done.
void WatchSignals(asio::signal_set& signals, elastic::Agent& agent) {
  signals.async_wait([&signals, &agent](const boost::system::error_code& error, int signal) {
    if (error) return;
    agent.HandleSignal(signal);
    WatchSignals(signals, agent);
  });
}

int Launch(const LaunchConfig& config) {
  std::signal(SIGPIPE, SIG_IGN);
  if (config.standalone_flag) {
    spdlog::info("Rendezvous info: --rdzv-backend={} --rdzv-endpoint={} --rdzv-id={}",
                 config.rdzv_backend, config.rdzv_endpoint, config.rdzv_id);
  }
  const elastic::Environment env = LauncherEnvironment(config);
  RunLogDir logs(config, config.rdzv_id);
  const elastic::WorkerSpec spec = MakeWorkerSpec(config, env, logs.Path());
  const rendezvous::RendezvousInfo master = ChooseMasterEndpoint(config);
  if (config.dry_run) {
    PrintDryRun(std::cout, config, spec, master);
    return 0;
  }
  rendezvous::SingleNodeRendezvous rendezvous(config.rdzv_id, master);
  asio::io_context io;
  LocalProcessContext processes(io);
  elastic::Agent agent(spec, {config.shutdown_timeout}, rendezvous, processes);
  asio::signal_set signals(io);
  for (const auto& name : config.signals_to_handle) {
    if (const auto number = SignalNumber(name)) signals.add(*number);
  }
  AgentResult result;
  agent.Run([&](const AgentResult& done) {
    result = done;
    signals.cancel();
    io.stop();
  });
  WatchSignals(signals, agent);
  io.run();
  Report(result, config);
  return result.ExitCode();
}

}  // namespace

int Main(int argc, char** argv) {
  InitLogging();
  try {
    const CliResult cli =
        ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), ProcessEnv());
    if (cli.action == CliResult::Action::kPrintAndExit) {
      std::cout << cli.text << std::flush;
      return 0;
    }
    return Launch(cli.config);
  } catch (const UsageError& error) {
    std::cerr << "ddprun: error: " << error.what() << std::endl;
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "ddprun: " << error.what() << std::endl;
    return 1;
  }
}

}  // namespace ddprun::launcher
