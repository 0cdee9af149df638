// The option table: one row per launcher option, in --help order.
#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "cli/cli_internal.h"

namespace ddprun::cli {
namespace {

constexpr const char* kSize = "Worker/node size";
constexpr const char* kRdzv = "Rendezvous";
constexpr const char* kStatic = "Static rendezvous (torch.distributed.launch compatible)";
constexpr const char* kLaunch = "User-code launch";
constexpr const char* kLogging = "Logging";
constexpr const char* kCompat = "torchrun compatibility";
constexpr const char* kLegacy = "torch.distributed.launch compatibility";
constexpr const char* kDdprun = "ddprun";

constexpr std::array<OptionSpec, 50> kOptions{{
    {"nnodes", 0, "N|MIN:MAX", true, kSize, "number of nodes, or the range of nodes (default 1:1)"},
    {"nproc_per_node", 0, "N|auto|cpu|gpu", true, kSize,
     "workers per node: an integer, cpu, gpu, or auto (GPUs, else CPUs) (default 1)",
     "auto cpu gpu"},
    {"rdzv_backend", 0, "NAME", true, kRdzv,
     "static, c10d or etcd (default static; etcd-v2 is etcd: the v3 API)",
     "static c10d etcd etcd-v2"},
    {"rdzv_endpoint", 0, "HOST[:PORT]", true, kRdzv,
     "rendezvous endpoint, IPv6 as [addr]:port (static default: master_addr:master_port); "
     "a list for c10d (failover) and etcd (every member)"},
    {"rdzv_id", 0, "ID", true, kRdzv, "user-defined job id (default none)"},
    {"rdzv_conf", 0, "K=V,...", true, kRdzv, "extra rendezvous settings, e.g. join_timeout=600"},
    {"standalone", 0, nullptr, true, kRdzv,
     "single-node job: c10d rendezvous on localhost with a free port and a random id"},
    {"node_rank", 0, "N", true, kStatic, "rank of this node for the static backend (default 0)"},
    {"master_addr", 0, "HOST", true, kStatic, "address of the rank 0 node (default 127.0.0.1)"},
    {"master_port", 0, "PORT", true, kStatic,
     "port on the rank 0 node (default 29500; single node without it: a free port)"},
    {"local_addr", 0, "HOST", true, kStatic, "address this node advertises (default: its FQDN)"},
    {"max_restarts", 0, "N", true, kLaunch,
     "restarts of the worker group before failing (default 0)"},
    {"monitor_interval", 0, "SECONDS", true, kLaunch, "worker monitoring interval (default 0.1)"},
    {"role", 0, "NAME", true, kLaunch, "user-defined role of the workers (default default)"},
    {"module", 'm', nullptr, true, kLaunch, "run the script as a Python module (python -m)"},
    {"no_python", 0, nullptr, true, kLaunch,
     "execute the training script directly, not with Python"},
    {"run_path", 0, nullptr, true, kLaunch, "run the script with runpy.run_path in the workers"},
    {"python", 0, "PATH", false, kLaunch,
     "Python interpreter (default $DDPRUN_PYTHON, $PYTHON_EXEC, else python3)"},
    {"virtual_local_rank", 0, nullptr, true, kLaunch,
     "LOCAL_RANK=0 in every worker, CUDA_VISIBLE_DEVICES narrowed to its GPU"},
    {"signals_to_handle", 0, "SIG,...", true, kLaunch,
     "signals forwarded to the workers (default SIGTERM,SIGINT,SIGHUP,SIGQUIT)"},
    {"shutdown_timeout", 0, "SECONDS", true, kLaunch,
     "grace period before SIGKILL (default $TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)"},
    {"numa_binding", 0, "MODE", false, kLaunch,
     "pin each worker to CPUs near its GPU (CPU-only jobs: spread over NUMA nodes): node, "
     "socket, exclusive or core-complex",
     "node socket exclusive core-complex"},
    {"log_dir", 0, "DIR", true, kLogging,
     "directory of the worker logs (default: a temporary one)"},
    {"redirects", 'r', "0-3|RANK:V,...", true, kLogging,
     "redirect worker streams to log files: 1 stdout, 2 stderr, 3 both, or per rank 0:1,1:2",
     "0 1 2 3"},
    {"tee", 't', "0-3|RANK:V,...", true, kLogging,
     "redirect to log files and copy to the console, same values as --redirects", "0 1 2 3"},
    {"local_ranks_filter", 0, "RANK,...", true, kLogging,
     "show only these local ranks' output on the console, e.g. 0,1"},
    {"duplicate_stdout_filters", 0, "TEXT,...", true, kLogging,
     "copy tee'd stdout lines containing any of these to filtered_stdout.log (,, is a comma)"},
    {"duplicate_stderr_filters", 0, "TEXT,...", true, kLogging,
     "copy tee'd stderr lines containing any of these to filtered_stderr.log (,, is a comma)"},
    {"log_line_prefix_template", 0, "TEMPLATE", true, kLogging,
     "prefix of tee'd lines, e.g. '${rank}: ' (default $TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)"},
    {"start_method", 0, "METHOD", true, kCompat,
     "spawn, fork or forkserver: how torchrun starts Python function entry points; scripts "
     "are exec'd whatever it says, as under torchrun (default spawn)",
     "spawn fork forkserver"},
    {"event_log_handler", 0, "NAME", true, kCompat,
     "console: torchelastic.worker.status.* events as JSON lines on stderr; null and "
     "dynamic_rendezvous (a null handler in open-source torch): none (default null)",
     "null console dynamic_rendezvous"},
    {"logs_specs", 0, "NAME", false, kCompat,
     "refused: ddprun loads no Python LogsSpecs plugins (exit 2)"},
    {"use_env", 0, nullptr, false, kLegacy,
     "workers read their local rank from LOCAL_RANK (always set): no --local_rank argument "
     "(ddprun's default; turns ddprun-launch's off)"},
    {"pass_local_rank", 0, "local_rank|local-rank", false, kLegacy,
     "also pass each worker --local_rank=N (torch 1.x) or --local-rank=N (torch 2) right after "
     "the script, as torch.distributed.launch (default: no; local_rank as ddprun-launch)",
     "local_rank local-rank"},
    {"env_preset", 0, "NAME", true, kDdprun,
     "take nnodes, node_rank, master address (...) from a platform's variables: aiplatform, "
     "azureml, skypilot or slurm; flags and PET_* still win (docs/env_presets.md)",
     "aiplatform azureml skypilot slurm"},
    {"event_log", 0, "FILE", false, kDdprun,
     "append one JSON line per agent event (round formed, workers started, node lost, restart, "
     "...) to FILE (default $DDPRUN_EVENT_LOG)"},
    {"hang_timeout", 0, "SECONDS|auto", true, kDdprun,
     "report a rank as hung after SECONDS without progress (output on stdout/stderr, a line "
     "to $DDPRUN_PULSE_FILE, torchelastic file-timer traffic) once it showed its first; auto: "
     "learned from the job; fractions allowed, 0: off (default 0; docs/hangs.md)",
     "auto"},
    {"hang_startup_timeout", 0, "SECONDS", true, kDdprun,
     "with hang detection: the timeout before a rank's first sign of progress (importing torch, "
     "loading data, the first NCCL connection) (default: the larger of 600 and --hang-timeout)"},
    {"hang_timeout_factor", 0, "X", true, kDdprun,
     "--hang-timeout=auto: the timeout is X times the longest interval between signs of "
     "progress seen on any rank (default 5)"},
    {"hang_timeout_warmup", 0, "N", true, kDdprun,
     "--hang-timeout=auto: intervals a rank shows before the timeout is learned; until then "
     "the start-up timeout applies (default 20)"},
    {"hang_timeout_floor", 0, "SECONDS", true, kDdprun,
     "--hang-timeout=auto: the learned timeout is never below SECONDS (default 30)"},
    {"max_no_progress_hangs", 0, "N", true, kDdprun,
     "stop the job, restarts left unspent, after N attempts in a row hang before any rank made "
     "progress past start-up; 0: never (default 3)"},
    {"warm_restart", 0, "on|off", true, kDdprun,
     "a restart's workers are forked from an interpreter that already imported torch, not "
     "started anew (Python entry points; docs/warm-restart.md) (default on; off with "
     "--no-python)",
     "on off"},
    {"warm_preload", 0, "MODULE,...", true, kDdprun,
     "--warm-restart: modules the interpreter imports after torch, e.g. numpy,transformers "
     "(default none)"},
    {"health_port", 0, "PORT", true, kDdprun,
     "serve GET /healthz and /metrics (Prometheus) on PORT, 0: an ephemeral port, logged and "
     "in the event log (default $TORCHELASTIC_HEALTH_CHECK_PORT, else off; docs/operations.md)"},
    {"health_addr", 0, "HOST", true, kDdprun,
     "the address --health_port listens on (default 127.0.0.1: loopback only)"},
    {"dry_run", 0, nullptr, false, kDdprun, "print the resolved configuration and exit"},
    {"print_completion", 0, "SHELL", false, kDdprun,
     "print the shell completion script for ddprun and exit (bash, zsh or fish)", "bash zsh fish"},
    {"version", 0, nullptr, false, kDdprun, "print the version and the git revision and exit"},
    {"help", 'h', nullptr, false, kDdprun, "print this help and exit"},
}};

}  // namespace

std::span<const OptionSpec> Options() { return kOptions; }

const OptionSpec* FindOption(const std::string& dest) {
  const auto it = std::find_if(kOptions.begin(), kOptions.end(),
                               [&](const OptionSpec& spec) { return dest == spec.dest; });
  return it == kOptions.end() ? nullptr : &*it;
}

std::vector<std::string> Choices(const OptionSpec& spec) {
  std::vector<std::string> choices;
  std::istringstream words(spec.choices == nullptr ? "" : spec.choices);
  for (std::string word; words >> word;) choices.push_back(word);
  return choices;
}

std::vector<std::string> Choices(const std::string& dest) {
  const OptionSpec* spec = FindOption(dest);
  return spec == nullptr ? std::vector<std::string>{} : Choices(*spec);
}

std::string PetName(const OptionSpec& spec) {
  std::string name = std::string("PET_") + spec.dest;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  return name;
}

std::vector<std::string> LongNames(const OptionSpec& spec) {
  std::string dashed = spec.dest;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::vector<std::string> names{std::string("--") + spec.dest};
  if (dashed != spec.dest) names.push_back("--" + dashed);
  return names;
}

}  // namespace ddprun::cli
