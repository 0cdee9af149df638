// From raw option values to a resolved LaunchConfig, in the order of torchrun's run() and
// config_from_args(): validation, run mode and script checks, then the standalone switch.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "cli/cli_internal.h"
#include "cli/env_presets.h"
#include "common/errors.h"
#include "common/host_port.h"
#include "elastic/arg_template.h"

namespace ddprun::cli {
namespace {

using elastic::LaunchConfig;
using elastic::RunMode;

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

int NonNegative(const std::string& text, const std::string& name) {
  return ParseIntInRange(text, name, 0, INT_MAX, "an integer >= 0");
}

std::optional<std::string> NonEmptyEnv(const EnvLookup& env, const std::string& name) {
  auto value = env(name);
  return value && !value->empty() ? value : std::nullopt;
}

void FillNodes(const RawValues& raw, LaunchConfig& config) {
  IfGiven(raw, "nnodes", [&](const std::string& text, const std::string& name) {
    std::tie(config.min_nodes, config.max_nodes) = ParseNnodes(text, name);
  });
}

// Last, because "gpu" and "auto" initialise the CUDA driver.
void ResolveNproc(const RawValues& raw, const GpuCounter& gpus, LaunchConfig& config) {
  std::string nproc_name = "--nproc_per_node";
  IfGiven(raw, "nproc_per_node", [&](const std::string& text, const std::string& name) {
    config.nproc_per_node_text = text;
    nproc_name = name;
  });
  config.nproc_per_node = ResolveNprocPerNode(config.nproc_per_node_text, nproc_name, gpus);
}

void CheckStaticEndpoint(const RawValues& raw, const LaunchConfig& config) {
  IfGiven(raw, "rdzv_endpoint", [&](const std::string& text, const std::string& name) {
    const bool is_static = config.rdzv_backend == "static" && !config.standalone_flag;
    if (is_static && text.find(',') != std::string::npos) {
      throw UsageError(name + "=" + text +
                       ": a list of endpoints is for --rdzv_backend=c10d (the store moves along "
                       "it); the static rendezvous takes one HOST:PORT");
    }
    if (is_static && !text.empty() && !ParseHostPort(text, name).port) {
      throw UsageError(name + "=" + text + ": the static backend needs HOST:PORT");
    }
  });
}

void FillRendezvous(const RawValues& raw, LaunchConfig& config) {
  IfGiven(raw, "rdzv_backend",  // checked by CheckLaunchable: --standalone overrides it
          [&](const std::string& text, const std::string&) { config.rdzv_backend = text; });
  config.standalone_flag = raw.On("standalone");
  IfGiven(raw, "rdzv_endpoint", [&](const std::string& text, const std::string& name) {
    if (!text.empty()) ParseHostPortList(text, name);
    config.rdzv_endpoint = text;
  });
  CheckStaticEndpoint(raw, config);
  IfGiven(raw, "rdzv_id",
          [&](const std::string& text, const std::string&) { config.rdzv_id = text; });
  IfGiven(raw, "rdzv_conf", [&](const std::string& text, const std::string& name) {
    config.rdzv_conf = ParseRdzvConf(text, name);
  });
  IfGiven(raw, "node_rank", [&](const std::string& text, const std::string& name) {
    config.node_rank = NonNegative(text, name);
  });
  IfGiven(raw, "master_addr",
          [&](const std::string& text, const std::string&) { config.master_addr = text; });
  IfGiven(raw, "master_port", [&](const std::string& text, const std::string& name) {
    config.master_port = ParseIntInRange(text, name, 0, 65535, "an integer between 0 and 65535");
  });
  IfGiven(raw, "local_addr",
          [&](const std::string& text, const std::string&) { config.local_addr = text; });
}

std::string ResolvePython(const RawValues& raw, const EnvLookup& env) {
  if (const Given* given = raw.Find("python")) {
    if (given->text.empty()) throw UsageError("--python=: must name a Python interpreter");
    return given->text;
  }
  if (auto python = NonEmptyEnv(env, "DDPRUN_PYTHON")) return *python;
  if (auto python = NonEmptyEnv(env, "PYTHON_EXEC")) return *python;
  return "python3";
}

void FillShutdownTimeout(const RawValues& raw, const EnvLookup& env, LaunchConfig& config) {
  const std::string env_name = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT";
  const Given* given = raw.Find("shutdown_timeout");
  const auto from_env = given ? std::nullopt : env(env_name);
  if (!given && !from_env) return;
  const std::string& text = given ? given->text : *from_env;
  const std::string& name = given ? given->name : env_name;
  config.shutdown_timeout = std::chrono::seconds(
      ParseIntInRange(text, name, 0, INT_MAX, "a non-negative integer number of seconds"));
}

void FillLaunch(const RawValues& raw, const EnvLookup& env, LaunchConfig& config) {
  IfGiven(raw, "max_restarts", [&](const std::string& text, const std::string& name) {
    config.max_restarts = NonNegative(text, name);
  });
  IfGiven(raw, "monitor_interval", [&](const std::string& text, const std::string& name) {
    config.monitor_interval_s = ParsePositiveSeconds(text, name);
  });
  IfGiven(raw, "role", [&](const std::string& text, const std::string&) { config.role = text; });
  config.python = ResolvePython(raw, env);
  config.virtual_local_rank = raw.On("virtual_local_rank");
  IfGiven(raw, "signals_to_handle", [&](const std::string& text, const std::string& name) {
    config.signals_to_handle = ParseSignals(text, name);
  });
  FillShutdownTimeout(raw, env, config);
  FillHangDetection(raw, config);
}

void FillLogDir(const std::string& text, const std::string& name, LaunchConfig& config) {
  if (text.empty()) return;  // like unset: a temporary directory
  std::error_code error;
  if (std::filesystem::exists(text, error) && !std::filesystem::is_directory(text, error)) {
    throw UsageError(name + "=" + text + ": is a file; use a directory (created if missing)");
  }
  config.log_dir = text;
}

void FillLogging(const RawValues& raw, const EnvLookup& env, LaunchConfig& config) {
  IfGiven(raw, "log_dir", [&](const std::string& text, const std::string& name) {
    FillLogDir(text, name, config);
  });
  IfGiven(raw, "redirects", [&](const std::string& text, const std::string& name) {
    config.redirects = ParseStreamSelection(text, name);
  });
  IfGiven(raw, "tee", [&](const std::string& text, const std::string& name) {
    config.tee = ParseStreamSelection(text, name);
  });
  IfGiven(raw, "local_ranks_filter", [&](const std::string& text, const std::string& name) {
    config.local_ranks_filter = ParseLocalRanksFilter(text, name);
  });
  IfGiven(raw, "duplicate_stdout_filters", [&](const std::string& text, const std::string&) {
    config.duplicate_stdout_filters = ParseFilters(text);
  });
  IfGiven(raw, "duplicate_stderr_filters", [&](const std::string& text, const std::string&) {
    config.duplicate_stderr_filters = ParseFilters(text);
  });
  const Given* prefix = raw.Find("log_line_prefix_template");
  config.log_line_prefix_template =
      prefix ? std::optional(prefix->text) : env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
}

void FillCompatibility(const RawValues& raw, LaunchConfig& config) {
  IfGiven(raw, "start_method", [&](const std::string& text, const std::string& name) {
    RequireChoice(text, name, Choices("start_method"));
    config.start_method = text;
  });
  IfGiven(raw, "event_log_handler", [&](const std::string& text, const std::string& name) {
    RequireChoice(text, name, Choices("event_log_handler"));
    config.event_log_handler = text;
  });
  // torchrun loads the class from a Python entry point (group torchrun.logs_specs); a launcher
  // without Python has none to load, and ignoring the name would put logs where the plugin's
  // user does not look.
  IfGiven(raw, "logs_specs", [&](const std::string& text, const std::string& name) {
    throw UsageError(name + "=" + text +
                     ": ddprun loads no Python LogsSpecs plugins (torchrun's "
                     "entry point group torchrun.logs_specs); drop the flag: the logs follow "
                     "torchrun's default layout (--log-dir, --redirects, --tee, "
                     "--local-ranks-filter)");
  });
  IfGiven(raw, "numa_binding", [&](const std::string& text, const std::string& name) {
    RequireChoice(text, name, Choices("numa_binding"));
    config.numa_binding = text;
  });
  config.dry_run = raw.On("dry_run");
}

// torch.distributed.launch's --local_rank argument: --pass_local_rank, else ddprun-launch's
// default (local_rank, torch 1.x's spelling, unless --use_env); torchrun never passes it.
void FillLocalRankArg(const RawValues& raw, Personality personality, LaunchConfig& config) {
  const bool use_env = raw.On("use_env");
  if (const Given* given = raw.Find("pass_local_rank")) {
    RequireChoice(given->text, given->name, Choices("pass_local_rank"));
    if (use_env) {
      throw UsageError(given->name + "=" + given->text +
                       ": contradicts --use_env (the local rank in LOCAL_RANK only); give one");
    }
    config.local_rank_arg = given->text;
    return;
  }
  if (personality != Personality::kLegacyLaunch || use_env) return;
  if (raw.On("no_python")) {  // torch.distributed.launch's own rule, its message
    throw UsageError(
        "When using the '--no_python' flag, you must also set the '--use_env' flag "
        "(--pass_local_rank=local_rank gives the program --local_rank=N anyway).");
  }
  config.local_rank_arg = "local_rank";
}

void FillEventLog(const RawValues& raw, const EnvLookup& env, LaunchConfig& config) {
  const Given* given = raw.Find("event_log");
  const auto path = given ? std::optional(given->text) : NonEmptyEnv(env, "DDPRUN_EVENT_LOG");
  if (!path) return;
  if (path->empty()) throw UsageError("--event_log=: must name a file");
  config.event_log = path;
  config.given_as.try_emplace("event_log", given ? given->name : "DDPRUN_EVENT_LOG");
}

// torchrun reserves TORCHELASTIC_HEALTH_CHECK_PORT (its HealthCheckServer stub logs and serves
// nothing); ddprun serves on it. A value that is not a port is refused like a bad flag.
void FillHealth(const RawValues& raw, const EnvLookup& env, LaunchConfig& config) {
  const Given* given = raw.Find("health_port");
  const auto text =
      given ? std::optional(given->text) : NonEmptyEnv(env, "TORCHELASTIC_HEALTH_CHECK_PORT");
  const std::string name = given ? given->name : "TORCHELASTIC_HEALTH_CHECK_PORT";
  if (text) {
    config.health_port =
        ParseIntInRange(*text, name, 0, 65535, "a port between 0 and 65535 (0: ephemeral)");
    config.given_as.try_emplace("health_port", name);
  }
  if (const Given* addr = raw.Find("health_addr")) {
    if (addr->text.empty()) throw UsageError(addr->name + "=: must name an address");
    config.health_addr = addr->text;
  }
}

bool IsExecutableFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool Exists(const std::string& path) {
  std::error_code error;
  return !path.empty() && std::filesystem::exists(path, error);
}

bool FoundOnPath(const std::string& program, const EnvLookup& env) {
  const std::string path = env("PATH").value_or(kDefaultPath);
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = end == start ? "." : path.substr(start, end - start);
    if (IsExecutableFile(dir + "/" + program)) return true;
    start = end + 1;
  }
  return false;
}

// --no_python: exec'd like execvp, so a bare name is looked up on PATH only.
void CheckProgram(const std::string& program, const EnvLookup& env) {
  const std::string quoted = "training program '" + program + "'";
  if (program.find('/') == std::string::npos) {
    if (!program.empty() && FoundOnPath(program, env)) return;
    const std::string hint = Exists(program) ? "; use ./" + program + " for the file here" : "";
    throw UsageError(quoted + ": not found on PATH" + hint);
  }
  // A file that exists but cannot be executed is the spawner's to report, as a shell does
  // (exit 126 with the reason).
  if (!Exists(program)) throw UsageError(quoted + ": no such file");
}

// The script as local rank 0 will see it: torchrun substitutes ${local_rank} in every
// argument, the script path included.
std::string AsRankZero(const std::string& script) {
  return elastic::SafeSubstitute(script, {{"local_rank", "0"}});
}

RunMode DecideRunMode(const RawValues& raw, std::string& script) {
  if (raw.On("run_path")) return RunMode::kRunPath;
  if (raw.On("no_python")) {
    if (raw.On("module")) {
      throw UsageError(
          "Don't use both the '--no-python' flag and the '--module' flag at the same time.");
    }
    return RunMode::kNoPython;
  }
  if (raw.On("module")) return RunMode::kModule;
  if (!script.ends_with(".py") && IsExecutableFile(AsRankZero(script))) {
    if (script.find('/') == std::string::npos) script = "./" + script;  // exec'd, not looked up
    return RunMode::kNoPython;
  }
  return RunMode::kPython;
}

void FillScript(const RawValues& raw, const SplitArgs& split, const EnvLookup& env,
                LaunchConfig& config) {
  if (!split.script) {
    throw UsageError("the training script is missing: ddprun [options] training_script [args...]");
  }
  config.training_script = *split.script;
  config.training_script_args = split.script_args;
  config.run_mode = DecideRunMode(raw, config.training_script);
  if (config.run_mode == RunMode::kNoPython) {
    CheckProgram(AsRankZero(config.training_script), env);
  } else if (config.run_mode != RunMode::kModule && !Exists(AsRankZero(config.training_script))) {
    throw UsageError("training script '" + config.training_script +
                     "': no such file (a path is expected; use -m for a module)");
  }
}

// After the run mode: a pool needs a Python entry point; --warm-preload needs a pool. On by
// default for Python entry points (issue 40: the whole interop suite passes with it on).
void FillWarmRestart(const RawValues& raw, LaunchConfig& config) {
  config.warm_restart = config.run_mode != RunMode::kNoPython;
  config.warm_restart_by_default = config.warm_restart;
  IfGiven(raw, "warm_restart", [&](const std::string& text, const std::string& name) {
    RequireChoice(text, name, Choices("warm_restart"));
    config.warm_restart = text == "on";
    config.warm_restart_by_default = false;
    if (config.warm_restart && config.run_mode == RunMode::kNoPython && name.starts_with("PET_")) {
      // A default for every job (a cluster's environment): it applies to Python workers only.
      config.warm_restart = false;
      config.warm_restart_skipped =
          name +
          "=on does not apply: the workers are not Python (--no-python, or an "
          "executable script)";
      return;
    }
    if (config.warm_restart && config.run_mode == RunMode::kNoPython) {
      throw UsageError(name +
                       "=on: the workers are not Python (--no-python, or an executable "
                       "script), so there is no interpreter to preload; drop " +
                       name);
    }
  });
  IfGiven(raw, "warm_preload", [&](const std::string& text, const std::string& name) {
    config.warm_preload = ParseModuleList(text, name);
    if (!config.warm_preload.empty() && !config.warm_restart) {
      throw UsageError(name + "=" + text +
                       ": only a warm pool preloads modules; add "
                       "--warm-restart=on or drop " +
                       name);
    }
  });
}

// torchrun's run(): --standalone, or a single-node static job with no endpoint and no port,
// becomes c10d on localhost:0 with a random id.
void ResolveRendezvous(LaunchConfig& config) {
  const bool implicit = config.rdzv_backend == "static" && config.rdzv_endpoint.empty() &&
                        !config.given_as.contains("master_port") && config.max_nodes == 1;
  if (config.standalone_flag || implicit) {
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint = "localhost:0";
    config.rdzv_id = RandomUuid4();
    config.standalone = true;
  }
  UseStaticEndpointAsMaster(config);
  if (config.rdzv_backend == "static") {
    if (config.rdzv_endpoint.empty()) {
      config.rdzv_endpoint = HostPort{config.master_addr, config.master_port}.ToString();
    }
    config.rdzv_conf["rank"] = std::to_string(config.node_rank);
  }
  config.rdzv_settings = ReadRendezvousSettings(config);  // before "timeout" is injected
  config.rdzv_conf.try_emplace("timeout", "900");
}

void RecordNames(const RawValues& raw, LaunchConfig& config) {
  for (const auto& [dest, given] : raw.values) config.given_as[dest] = given.name;
}

}  // namespace

// torch reads TORCH_DISABLE_SHARE_RDZV_TCP_STORE as `== "1"`; any other value shares the store.
void FillShareStore(const EnvLookup& env, LaunchConfig& config) {
  config.share_rdzv_store = env("TORCH_DISABLE_SHARE_RDZV_TCP_STORE").value_or("0") != "1";
}

LaunchConfig BuildConfig(const RawValues& given, const SplitArgs& split, const EnvLookup& env,
                         const GpuCounter& gpus, Personality personality) {
  LaunchConfig config;
  const RawValues raw = ApplyEnvPreset(given, env, config);  // flag > PET_* > preset > default
  RecordNames(raw, config);
  FillNodes(raw, config);
  FillRendezvous(raw, config);
  FillLaunch(raw, env, config);
  FillLogging(raw, env, config);
  FillCompatibility(raw, config);
  FillLocalRankArg(raw, personality, config);
  FillEventLog(raw, env, config);
  FillShareStore(env, config);
  FillHealth(raw, env, config);
  ResolveNproc(raw, gpus, config);  // flag errors first, then the script's
  FillScript(raw, split, env, config);
  FillWarmRestart(raw, config);
  ResolveRendezvous(config);
  ReadAuthentication(config, env);
  CheckLaunchable(config);
  return config;
}

}  // namespace ddprun::cli
