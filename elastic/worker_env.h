// The environment of one worker: the launcher's whole environment overlaid with torchrun's
// variables (LocalElasticAgent._start_workers).
#pragma once
#include <map>
#include <string>

#include "elastic/rank_assignment.h"

namespace ddprun::elastic {

using Environment = std::map<std::string, std::string>;

// What is common to every worker of one attempt on this node.
struct WorkerGroupEnv {
  std::string role = "default";
  int local_world_size = 1;
  int group_rank = 0;
  int group_world_size = 1;
  RankAssignment ranks;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id = "none";
  bool use_agent_store = false;
  bool virtual_local_rank = false;
};

// `error_file` is this worker's TORCHELASTIC_ERROR_FILE (empty string when logs go nowhere).
// Throws UsageError when --virtual_local_rank needs a CUDA_VISIBLE_DEVICES entry that is missing.
Environment BuildWorkerEnv(const Environment& base, const WorkerGroupEnv& group, int local_rank,
                           const std::string& error_file);

// Where one worker's hang evidence goes; an empty string: nowhere.
struct WorkerDiagnostics {
  std::string rank_dir;    // "<attempt_dir>/<local_rank>": NCCL's flight recorder dumps there
  std::string pulse_file;  // the FIFO a line written to is progress (--hang_timeout)
  std::string timer_file;  // torchelastic's file timer FIFO (TORCHELASTIC_ENABLE_FILE_TIMER=1)
};

// Adds what makes a hang diagnosable, leaving every value the user set alone:
// PYTHONFAULTHANDLER=1 (unless set, even empty); NCCL's flight recorder
// (TORCH_NCCL_TRACE_BUFFER_SIZE/TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1,
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE/TORCH_FR_DUMP_TEMP_FILE=<rank_dir>/nccl_trace_rank_ with a
// rank_dir; a pair of which the user set either name is left out whole); DDPRUN_PULSE_FILE and
// TORCHELASTIC_TIMER_FILE when there is a pulse file, a timer file.
void AddDiagnosticsEnv(Environment& env, const WorkerDiagnostics& diagnostics);

// torchrun's rule: with more than one local worker and no OMP_NUM_THREADS, set it to 1 in the
// launcher's environment. Returns true when it did (the caller prints torchrun's warning).
bool ApplyOmpDefault(Environment& launcher_env, int nproc_per_node);

// torchrun's warning banner for ApplyOmpDefault, without a trailing newline.
const char* OmpWarningBanner();

}  // namespace ddprun::elastic
