// Everything the command line decides, resolved and validated: the CLI fills it, the agent and
// the launcher read it. Defaults are torchrun's.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "elastic/hang_timeouts.h"

namespace ddprun::store {
class AuthKey;
}  // namespace ddprun::store

namespace ddprun::elastic {

// Per-local-rank stream routing of --redirects / --tee (torchrun's Std): bit 1 stdout, bit 2
// stderr. A single value applies to every rank; a map gives per-rank values (others 0).
struct StreamSelection {
  int all = 0;                  // used for ranks not in `per_rank`
  std::map<int, int> per_rank;  // only when given as "0:1,1:2"
  int For(int local_rank) const {
    const auto it = per_rank.find(local_rank);
    return it != per_rank.end() ? it->second : (per_rank.empty() ? all : 0);
  }
  static constexpr int kStdout = 1;
  static constexpr int kStderr = 2;
};

// How the training script is turned into a command line.
enum class RunMode {
  kPython,    // <python> -u script args
  kModule,    // <python> -u -m module args
  kNoPython,  // script args (exec directly)
  kRunPath,   // <python> -u -c runpy.run_path(script) args (emulates torchrun's --run_path)
};

// One option value that --env_preset supplied, and whether an explicit setting overrode it.
struct EnvPresetSetting {
  std::string option;         // the option's dest: "nnodes"
  std::string value;          // "2"
  std::string variable;       // the platform variable it came from: "SLURM_NNODES"
  std::string overridden_by;  // "--nnodes" or "PET_NNODES" when that won; empty: applied
};

// The --rdzv_conf keys ddprun reads, validated by the CLI, with torchrun's defaults (c10d's
// DynamicRendezvousHandler; static reads join_timeout from `timeout`, default 900 s).
struct RendezvousSettings {
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{30'000};
  std::chrono::milliseconds close_timeout{30'000};
  std::chrono::milliseconds read_timeout{60'000};
  std::chrono::milliseconds keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
  std::optional<bool> is_host;  // none: decided by the endpoint's host
  // The address the stores this node serves bind (store_bind); none: as without it (every
  // interface; loopback for --standalone).
  std::optional<std::string> store_bind;
  // The job's token (token_file, $DDPRUN_RDZV_TOKEN_FILE, $DDPRUN_RDZV_TOKEN): set, agents
  // authenticate every rendezvous connection and workers serve their own store.
  std::shared_ptr<const store::AuthKey> auth;
  std::string auth_source;  // where the token came from ("file /etc/job.token")
  // The etcd backend: protocol=https (TLS) with cacert/cert/key (torchrun's etcd keys; etcd-v2's
  // ca_cert/ssl_cert/ssl_cert_key too), and etcd_prefix, under which the job's keys live.
  bool etcd_tls = false;
  std::string etcd_cacert, etcd_cert, etcd_key;  // file paths; empty: not given
  std::string etcd_prefix = "/ddprun/";

  // How long a peer may stay silent before it counts as lost.
  std::chrono::milliseconds HeartbeatTimeout() const {
    return keep_alive_interval * keep_alive_max_attempt;
  }
};

struct LaunchConfig {
  // Worker/node size.
  int min_nodes = 1;
  int max_nodes = 1;
  std::string nproc_per_node_text = "1";  // as given: int, auto, cpu, gpu
  int nproc_per_node = 1;                 // resolved

  // Rendezvous.
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;  // empty: master_addr:master_port for static
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;
  RendezvousSettings rdzv_settings;  // rdzv_conf's values, parsed
  bool standalone = false;           // also set when torchrun would silently go standalone
  bool standalone_flag = false;      // --standalone given (prints the banner)
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // --master_port, MASTER_PORT or the static endpoint's
  std::optional<std::string> local_addr;
  // TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (exactly "1", as torch): with a c10d or etcd
  // rendezvous (and --standalone) the workers do not share the agent's store: worker rank 0
  // serves theirs on a free MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=False), as under torchrun.
  bool share_rdzv_store = true;

  // Agent behaviour.
  int max_restarts = 0;
  double monitor_interval_s = 0.1;
  std::string start_method = "spawn";
  std::string event_log_handler = "null";
  std::string role = "default";
  std::vector<std::string> signals_to_handle = {"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"};
  std::chrono::seconds shutdown_timeout{30};
  bool virtual_local_rank = false;
  // --hang_timeout (SECONDS or auto), --hang_startup_timeout and the learning flags
  // (PET_HANG_*): when a silent rank is hung (elastic/hang_timeouts.h); off by default.
  HangTimeouts hang;
  // --max_no_progress_hangs: attempts in a row that hang before any progress past start-up
  // after which the job stops instead of restarting; 0: never.
  int max_no_progress_hangs = 3;

  // What is run.
  RunMode run_mode = RunMode::kPython;
  std::string python;  // --python, DDPRUN_PYTHON, else "python3"
  std::string training_script;
  std::vector<std::string> training_script_args;
  // torch.distributed.launch's argument: "local_rank" or "local-rank" puts
  // --<it>=<local rank> right after the script, before its arguments (--pass_local_rank, or
  // ddprun-launch without --use_env); none: torchrun's command (LOCAL_RANK only).
  std::optional<std::string> local_rank_arg;

  // Logs.
  std::optional<std::string> log_dir;  // none: a temporary directory removed at exit
  StreamSelection redirects;
  StreamSelection tee;
  std::vector<int> local_ranks_filter;  // empty: every rank
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  std::optional<std::string> log_line_prefix_template;

  // Accepted for compatibility, no effect in ddprun (documented in the man page).
  std::optional<std::string> logs_specs;

  // --numa-binding: node, socket, exclusive or core-complex (elastic/cpu_binding.h); none: off.
  std::optional<std::string> numa_binding;

  // --warm-restart=on: a restart's workers are forked from an interpreter that imported torch
  // and --warm-preload's modules (docs/warm-restart.md); on by default for Python entry points.
  bool warm_restart = false;
  bool warm_restart_by_default = false;  // on because nobody said: a job without torch is quiet
  std::vector<std::string> warm_preload;
  // Why PET_WARM_RESTART=on does not apply to this job (its workers are not Python), for the
  // dry run and one log line; empty when it applies or was not set. The flag itself is refused.
  std::string warm_restart_skipped;

  bool dry_run = false;
  std::optional<std::string> event_log;  // --event_log, else $DDPRUN_EVENT_LOG
  // --health_port, else $TORCHELASTIC_HEALTH_CHECK_PORT (0: ephemeral); none: no endpoint.
  std::optional<int> health_port;
  std::string health_addr = "127.0.0.1";  // --health_addr

  // Platform preset (--env_preset): its name ("" when none) and what it supplied.
  std::string env_preset;
  std::vector<EnvPresetSetting> env_preset_settings;

  // How each option was given, by dest: "--nnodes", "PET_NNODES" or
  // "--env_preset=slurm: SLURM_NNODES", so that a message names what the user wrote.
  std::map<std::string, std::string> given_as;
  std::string GivenAs(const std::string& dest) const {
    const auto it = given_as.find(dest);
    return it != given_as.end() ? it->second : "--" + dest;
  }
  // etcd (etcd-v2 is the same v3 backend) is always the dynamic rendezvous, as in torchrun.
  bool Etcd() const { return !standalone && (rdzv_backend == "etcd" || rdzv_backend == "etcd-v2"); }
  // c10d across nodes or with MIN:MAX, or etcd: the dynamic rendezvous (--standalone is one
  // node).
  bool Elastic() const {
    return Etcd() ||
           (rdzv_backend == "c10d" && !standalone && (max_nodes > 1 || min_nodes != max_nodes));
  }
  // "<name>=<value>" of an option as given ("PET_NNODES=1:3").
  std::string Given(const std::string& dest, const std::string& value) const {
    return GivenAs(dest) + "=" + value;
  }
};

}  // namespace ddprun::elastic
