#include "launcher/run.h"

#include <boost/algorithm/string/join.hpp>
#include <csignal>
#include <iostream>

#include "common/asio.h"
#include "common/env_names.h"
#include "common/errors.h"
#include "common/logging.h"
#include "elastic/agent.h"
#include "launcher/agent_loop.h"
#include "launcher/cli.h"
#include "launcher/dry_run.h"
#include "launcher/elastic_launch.h"
#include "launcher/event_log_file.h"
#include "launcher/hosted_store.h"
#include "launcher/launch_setup.h"
#include "launcher/local_process_context.h"
#include "launcher/master_endpoint.h"
#include "launcher/multinode_launch.h"

namespace ddprun::launcher {
namespace {

using elastic::AgentResult;
using elastic::LaunchConfig;

std::unique_ptr<JsonLinesEventLog> OpenEventLog(const LaunchConfig& config) {
  if (!config.event_log) return nullptr;
  return std::make_unique<JsonLinesEventLog>(*config.event_log, config.GivenAs("event_log"));
}

elastic::Environment LauncherEnvironment(const LaunchConfig& config) {
  elastic::Environment env = CurrentEnvironment();
  if (elastic::ApplyOmpDefault(env, config.nproc_per_node)) {
    std::cerr << elastic::OmpWarningBanner() << std::endl;
  }
  env[env::kSignalsToHandle] = boost::algorithm::join(config.signals_to_handle, ",");
  return env;
}

int Launch(const LaunchConfig& config) {
  std::signal(SIGPIPE, SIG_IGN);
  const HeldSignals held(config);
  if (config.standalone_flag) {
    spdlog::info("Rendezvous info: --rdzv-backend={} --rdzv-endpoint={} --rdzv-id={}",
                 config.rdzv_backend, config.rdzv_endpoint, config.rdzv_id);
  }
  const elastic::Environment env = LauncherEnvironment(config);
  if (config.dry_run) return RunDryRun(std::cout, config, env);  // before any dir or port
  const auto events = OpenEventLog(config);
  RunLogDir logs(config, config.rdzv_id);
  const elastic::WorkerSpec spec = MakeWorkerSpec(config, env, logs.Path());
  if (IsElastic(config)) return LaunchElastic(config, spec, events.get());
  if (IsMultiNode(config)) return LaunchMultiNode(config, spec, events.get());
  asio::io_context io(kOneThread);
  HostedStoreRendezvous rendezvous(io, config);
  LocalProcessContext processes(io);
  elastic::Agent agent(spec, {config.shutdown_timeout}, rendezvous, processes,
                       {nullptr, nullptr, events.get()});
  const AgentResult result = RunAgentLoop(io, config, agent);
  rendezvous.Shutdown();
  ReportResult(result, config);
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
