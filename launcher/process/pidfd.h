// pidfd_open(2) (Linux 5.3): a descriptor that names one process, whatever later reuses its pid,
// and turns readable once it has exited. -1 with errno set (ESRCH once it is gone, ENOSYS on
// older kernels).
#pragma once
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace ddprun::launcher::process {

inline int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace ddprun::launcher::process
