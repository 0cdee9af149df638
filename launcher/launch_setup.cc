#include "launcher/launch_setup.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/env_names.h"
#include "common/errors.h"
#include "common/logging.h"

extern char** environ;

namespace ddprun::launcher {
namespace fs = std::filesystem;
using elastic::LaunchConfig;
using elastic::RunMode;

namespace {

constexpr const char* kRunPathBootstrap =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

std::string MakeTempDir(const std::string& pattern) {
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr) {
    throw SystemError(ErrnoMessage("mkdtemp " + pattern, errno) + " — pass a writable --log_dir");
  }
  return name.data();
}

bool AnyStreamRedirected(const LaunchConfig& config) {
  auto any = [](const elastic::StreamSelection& selection) {
    if (selection.all != 0) return true;
    for (const auto& [rank, value] : selection.per_rank) {
      if (value != 0) return true;
    }
    return false;
  };
  return any(config.redirects) || any(config.tee);
}

// True when some worker wrote a log file under `dir` (an attempt's empty folders do not count).
bool HoldsAnyFile(const std::string& dir) {
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (fs::is_regular_file(it->path(), error)) return true;
  }
  return false;
}

std::string TempDir(const elastic::Environment& env) {
  for (const char* name : {"TMPDIR", "TEMP", "TMP"}) {
    const auto found = env.find(name);
    if (found != env.end() && !found->second.empty()) return found->second;
  }
  return "/tmp";
}

std::string RandomHex(int bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::uniform_int_distribution<int> byte_distribution(0, 255);
  std::string hex;
  for (int i = 0; i < bytes; ++i) {
    const int byte = byte_distribution(device);
    hex += kHex[byte >> 4];
    hex += kHex[byte & 0x0f];
  }
  return hex;
}

}  // namespace

std::string FileTimerPath(const elastic::Environment& env) {
  const auto enabled = env.find(env::kEnableFileTimer);
  if (enabled == env.end() || enabled->second != "1") return "";
  const auto given = env.find(env::kTimerFile);
  if (given != env.end() && !given->second.empty()) return given->second;
  return TempDir(env) + "/ddprun-timer-" + RandomHex(16);
}

elastic::Environment CurrentEnvironment() {
  elastic::Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text(*entry);
    const auto equals = text.find('=');
    if (equals != std::string::npos) env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

std::vector<std::string> BuildCommand(const LaunchConfig& config) {
  std::vector<std::string> command;
  switch (config.run_mode) {
    case RunMode::kPython:
      command = {config.python, "-u", config.training_script};
      break;
    case RunMode::kModule:
      command = {config.python, "-u", "-m", config.training_script};
      break;
    case RunMode::kNoPython:
      command = {config.training_script};
      break;
    case RunMode::kRunPath:
      command = {config.python, "-u", "-c", kRunPathBootstrap, config.training_script};
      break;
  }
  // As torch.distributed.launch: after the script (module, program), before its arguments;
  // ${local_rank} becomes each worker's local rank (elastic/attempt_plan.cc).
  if (config.local_rank_arg) command.push_back("--" + *config.local_rank_arg + "=${local_rank}");
  command.insert(command.end(), config.training_script_args.begin(),
                 config.training_script_args.end());
  return command;
}

std::optional<elastic::WorkerSpec::WarmStart> WarmStartOf(const LaunchConfig& config,
                                                          const backend::LaunchPlan& plan) {
  if (!plan.warm_pool) return std::nullopt;
  switch (config.run_mode) {  // where BuildCommand puts the script or module
    case RunMode::kPython:
      return elastic::WorkerSpec::WarmStart{2, false};
    case RunMode::kModule:
      return elastic::WorkerSpec::WarmStart{3, true};
    case RunMode::kRunPath:
      return elastic::WorkerSpec::WarmStart{4, false};
    case RunMode::kNoPython:
      break;
  }
  return std::nullopt;
}

std::optional<process::WarmPoolOptions> WarmPoolOptionsOf(const LaunchConfig& config,
                                                          const backend::LaunchPlan& plan,
                                                          const elastic::WorkerSpec& spec,
                                                          const process::SessionKeeper& keeper) {
  if (!plan.warm_pool || !spec.warm) return std::nullopt;
  std::error_code error;
  const fs::path path0 = spec.warm->module
                             ? fs::current_path(error)
                             : fs::absolute(config.training_script, error).parent_path();
  process::WarmPoolOptions options;
  options.python = plan.warm_pool->python;
  options.preload = plan.warm_pool->preload;
  options.path0 = path0.string();
  options.env = spec.base_env;
  options.session_keeper_fd = keeper.WriteFd();
  options.job_cgroup_fd = keeper.JobCgroupFd();
  options.job_cgroup_dir = keeper.JobCgroupPath();
  options.quiet_without_torch = config.warm_restart_by_default;
  return options;
}

std::string EntrypointName(const LaunchConfig& config) { return config.training_script; }

RunLogDir::RunLogDir(const LaunchConfig& config, const std::string& run_id) {
  std::string root;
  if (config.log_dir) {
    root = *config.log_dir;
    std::error_code error;
    if (fs::exists(root, error) && !fs::is_directory(root, error)) {
      throw UsageError("--log_dir=" + root + ": is a file; pass a directory");
    }
    fs::create_directories(root, error);
    if (error) throw UsageError("--log_dir=" + root + ": " + error.message());
  } else {
    const char* tmp = std::getenv("TMPDIR");
    temp_root_ = MakeTempDir(std::string(tmp && *tmp ? tmp : "/tmp") + "/torchelastic_XXXXXX");
    root = temp_root_;
    keep_ = AnyStreamRedirected(config);
  }
  run_dir_ = MakeTempDir(root + "/" + run_id + "_XXXXXX");
}

RunLogDir::~RunLogDir() {
  if (temp_root_.empty()) return;
  if (keep_ && HoldsAnyFile(run_dir_)) {
    spdlog::warn("worker logs kept in {}", run_dir_);
    return;
  }
  std::error_code ignored;
  fs::remove_all(temp_root_, ignored);
}

elastic::WorkerSpec MakeWorkerSpec(const LaunchConfig& config, const backend::LaunchPlan& plan,
                                   const elastic::Environment& env,
                                   const std::string& run_log_dir) {
  elastic::WorkerSpec spec;
  spec.role = config.role;
  spec.local_world_size = config.nproc_per_node;
  spec.max_restarts = config.max_restarts;
  spec.command = BuildCommand(config);
  spec.base_env = env;
  spec.run_log_dir = run_log_dir;
  spec.redirects = config.redirects;
  spec.tee = config.tee;
  spec.local_ranks_filter = config.local_ranks_filter;
  if (config.log_line_prefix_template) spec.prefix_template = *config.log_line_prefix_template;
  spec.hostname = plan.node.hostname;
  spec.virtual_local_rank = config.virtual_local_rank;
  spec.duplicate_stdout_filters = config.duplicate_stdout_filters;
  spec.duplicate_stderr_filters = config.duplicate_stderr_filters;
  spec.hang = config.hang;
  spec.max_no_progress_hangs = config.max_no_progress_hangs;
  spec.timer_file = FileTimerPath(env);
  spec.cpu_binding = plan.cpu_bindings;
  spec.warm = WarmStartOf(config, plan);
  return spec;
}

}  // namespace ddprun::launcher
