// The one place that decides how a worker process is started (the spawning policy): its own
// session and process group, in the job cgroup (job_cgroup.h) when there is one, registered
// with the session keeper (session_keeper.h) before it runs any of its own code, stdin from
// /dev/null, PR_SET_PDEATHSIG(SIGKILL) so that it dies with the launcher, default signal
// dispositions and an empty signal mask, the launcher's descriptors closed on exec, pinned to its
// --numa-binding CPUs (sched_setaffinity, which exec keeps), and exec failures reported as a shell
// does (127/126).
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ddprun::launcher::process {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0]: a path, or a name searched in the env's PATH
  std::map<std::string, std::string> env;
  int stdout_fd = -1;  // -1: inherit the launcher's
  int stderr_fd = -1;
  int session_keeper_fd = -1;  // >= 0: the child writes "<pid>\n" there before exec
  // >= 0: the job cgroup's directory (O_PATH): the child starts in it (clone3 with
  // CLONE_INTO_CGROUP) and its keeper line reads "<pid> cgroup\n"; where the kernel refuses, it
  // starts outside (vfork) and the line is "<pid>\n".
  int job_cgroup_fd = -1;
  std::vector<int> cpus;  // non-empty: the child's CPU affinity, set before exec
  int inherited_fd = -1;  // >= 0: the child's descriptor 3 (the warm pool's control socket)
};

struct SpawnResult {
  pid_t pid = -1;     // > 0 on success
  int exit_code = 0;  // 127 (not found), 126 (not executable, or its CPUs refused) when pid < 0
  std::string error;  // one line naming the program and the reason, when pid < 0
};

SpawnResult SpawnWorker(const SpawnRequest& request);

}  // namespace ddprun::launcher::process
