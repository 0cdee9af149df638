#include "launcher/process/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "common/errors.h"
#include "common/open_files.h"
#include "elastic/cpu_binding.h"
#include "elastic/session_sweep.h"

namespace ddprun::launcher::process {
namespace {

#ifndef CLOSE_RANGE_CLOEXEC
constexpr unsigned kCloseRangeCloexec = 1U << 2;
#else
constexpr unsigned kCloseRangeCloexec = CLOSE_RANGE_CLOEXEC;
#endif

// SpawnRequest::inherited_fd's number in the child.
constexpr int kInheritedFd = 3;

// Strings as execve wants them (argv, envp), built in the parent: a null-terminated array.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (auto& text : strings_) pointers_.push_back(text.data());
    pointers_.push_back(nullptr);
  }
  CStringArray(const CStringArray&) = delete;  // the pointers are into this one's strings
  CStringArray& operator=(const CStringArray&) = delete;
  char** Get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The worker's environment as NAME=VALUE entries.
CStringArray EnvBlock(const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return CStringArray(std::move(entries));
}

// argv with the resolved program first, as the shell's exec does not, but as Boost.Process did
// before (the workers' argv[0] is a path they can run again).
CStringArray ArgvBlock(const std::string& program, std::vector<std::string> argv) {
  argv.front() = program;
  return CStringArray(std::move(argv));
}

// "<pid>\n", or "<pid> cgroup\n" when the worker is in the job cgroup (elastic::kInCgroupFlag),
// to the session keeper's pipe, with async-signal-safe calls only. One write of less than
// PIPE_BUF bytes: atomic, whatever other workers write at the same time.
void WritePidLine(int fd, pid_t pid, bool in_cgroup) {
  char text[32];
  char* end = text + sizeof text;
  char* at = end;
  *--at = '\n';
  if (in_cgroup) {
    at -= elastic::kInCgroupFlag.size();
    std::memcpy(at, elastic::kInCgroupFlag.data(), elastic::kInCgroupFlag.size());
  }
  do {
    *--at = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  while (::write(fd, at, static_cast<std::size_t>(end - at)) < 0 && errno == EINTR) {
  }
}

// clone3(2)'s arguments (Linux 5.7's layout, with `cgroup`), spelled out here: <linux/sched.h>
// clashes with glibc's <sched.h>.
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;
#ifdef SYS_clone3
constexpr long kClone3 = SYS_clone3;
#else
constexpr long kClone3 = 435;  // the same number on every architecture
#endif

// A raw clone3 skips the sanitizers' fork handling (TSan's runtime locks), so their builds join
// the cgroup from the child instead (JoinCgroup): slower, the same in effect.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kRawCloneSafe = false;
#else
constexpr bool kRawCloneSafe = true;
#endif

// Moves the calling process into the cgroup directory `cgroup_fd` by writing "0" (the writer)
// to its cgroup.procs, with async-signal-safe calls only.
bool JoinCgroup(int cgroup_fd) {
  const int procs = ::openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (procs < 0) return false;
  ssize_t written;
  while ((written = ::write(procs, "0", 1)) < 0 && errno == EINTR) {
  }
  ::close(procs);
  return written == 1;
}

// What the child runs between its start and exec (RunChild).
struct ChildStart;
[[noreturn]] void RunChild(const ChildStart* start);

constexpr std::size_t kChildStackSize = 64 * 1024;  // ChildSetup::Run and execve need little

// A vfork whose child starts in the cgroup directory `cgroup_fd` (CLONE_INTO_CGROUP): it shares
// this process's memory and runs RunChild(start) on `stack` (kChildStackSize bytes) until it
// execs or exits, while this thread waits (CLONE_VFORK). clone3 gives the child a fresh stack,
// so it cannot return through C++ frames: the few instructions after the system call are
// assembly, per architecture. -1 where there is none, or when the kernel refuses.
pid_t VforkIntoCgroup(int cgroup_fd, char* stack, const ChildStart& start) {
  CloneArgs args;
  args.flags = CLONE_VM | CLONE_VFORK | kCloneIntoCgroup;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(stack);
  args.stack_size = kChildStackSize;  // the top, stack + size, is 16-byte aligned (new[])
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  void (*const entry)(const ChildStart*) = RunChild;
  const ChildStart* const argument = &start;
#if defined(__x86_64__)
  long result = kClone3;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"  // the child: no frame above RunChild
      "movq %[argument], %%rdi\n\t"
      "callq *%[entry]\n\t"
      "ud2\n"
      "1:"
      : "+a"(result)
      : "D"(&args), "S"(sizeof args), [entry] "r"(entry), [argument] "r"(argument)
      : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long number asm("x8") = kClone3;
  register long result asm("x0") = reinterpret_cast<long>(&args);
  register long size asm("x1") = sizeof args;
  asm volatile(
      "svc #0\n\t"
      "cbnz x0, 1f\n\t"
      "mov x29, xzr\n\t"  // the child: no frame above RunChild
      "mov x0, %[argument]\n\t"
      "blr %[entry]\n\t"
      "brk #0\n"
      "1:"
      : "+r"(result)
      : "r"(number), "r"(size), [entry] "r"(entry), [argument] "r"(argument)
      : "x30", "memory");
#else
  const long result = -ENOSYS;
  (void)args;
  (void)entry;
  (void)argument;
#endif
  return result < 0 ? -1 : static_cast<pid_t>(result);
}

// A fork whose child starts in the cgroup directory `cgroup_fd` (CLONE_INTO_CGROUP): the
// fallback where VforkIntoCgroup has no assembly. Joining after the start instead, a write to
// cgroup.procs, takes the cgroup threadgroup lock for writing, which after a quiet spell waits
// for an RCU grace period: 5-15 ms for a launch's first worker. -1 with errno set when the
// kernel refuses (older than 5.7, not a cgroup, ...).
pid_t ForkIntoCgroup(int cgroup_fd) {
  CloneArgs args;
  args.flags = kCloneIntoCgroup;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  return static_cast<pid_t>(::syscall(kClone3, &args, sizeof args));
}

// A failed sched_setaffinity travels through the error pipe as this plus errno, so that the
// parent tells it from an exec failure.
constexpr int kAffinityError = 1 << 20;

// The CPU set is built in the parent: the child only calls sched_setaffinity.
struct CpuMask {
  explicit CpuMask(const std::vector<int>& cpus) : bound(!cpus.empty()) {
    CPU_ZERO(&set);
    for (const int cpu : cpus) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
  }
  bool bound;
  cpu_set_t set;
};

// The worker's side between fork and exec, with async-signal-safe calls only: the CPUs, its own
// session, the session keeper told, death with the launcher, the limits and signals it would
// have had, its streams, the launcher's descriptors closed on exec. Returns an errno (plus
// kAffinityError for the CPUs) when it cannot go on; it does not return on success.
struct ChildSetup {
  pid_t launcher_pid;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int session_keeper_fd;
  bool in_cgroup;   // started in the job cgroup (VforkIntoCgroup, ForkIntoCgroup)
  int join_cgroup;  // >= 0: a cgroup directory to join (JoinCgroup) when not started in it
  const CpuMask* cpus;
  int inherited_fd;

  int Run() const {
    if (cpus->bound && sched_setaffinity(0, sizeof cpus->set, &cpus->set) != 0) {
      return kAffinityError + errno;
    }
    setsid();
    // In the job cgroup before the keeper hears of it (it trusts the cgroup for this session
    // only then), and before it can start anything (its children inherit the cgroup).
    const bool joined = in_cgroup || (join_cgroup >= 0 && JoinCgroup(join_cgroup));
    // Registered before exec, so no window exists in which the worker runs unguarded.
    if (session_keeper_fd >= 0) WritePidLine(session_keeper_fd, getpid(), joined);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher_pid) _exit(128 + SIGKILL);  // the launcher died before prctl
    // The launcher raised its own open-file limit; the worker gets the one it would have had.
    if (const rlimit* files = OriginalOpenFileLimit()) setrlimit(RLIMIT_NOFILE, files);
    // Dispositions first, then the mask: no handler of the launcher's can run in the child,
    // which may share the launcher's memory until it execs (vfork).
    for (int signal = 1; signal < NSIG; ++signal) {
      if (signal != SIGKILL && signal != SIGSTOP) ::signal(signal, SIG_DFL);
    }
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    if (dup2(stdin_fd, STDIN_FILENO) < 0) return errno;
    if (stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0) return errno;
    if (stderr_fd >= 0 && dup2(stderr_fd, STDERR_FILENO) < 0) return errno;
    syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec);
    if (inherited_fd == kInheritedFd && fcntl(kInheritedFd, F_SETFD, 0) < 0) return errno;
    if (inherited_fd >= 0 && inherited_fd != kInheritedFd && dup2(inherited_fd, kInheritedFd) < 0) {
      return errno;
    }
    return 0;
  }
};

struct ChildStart {
  const ChildSetup* setup;
  const char* program;  // resolved
  char** argv;
  char** env;
  int error_fd;  // the child's errno goes there when it cannot exec
};

// The child's whole life: set up, exec; on failure, the errno to the parent and _exit.
[[noreturn]] void RunChild(const ChildStart* start) {
  int error = start->setup->Run();
  if (error == 0) {
    ::execve(start->program, start->argv, start->env);
    error = errno;
  }
  while (::write(start->error_fd, &error, sizeof error) < 0 && errno == EINTR) {
  }
  _exit(error >= kAffinityError ? 126 : 127);
}

// A descriptor closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// The child's errno (or kAffinityError + errno) through a close-on-exec pipe: nothing when exec
// succeeded (the pipe closed), else the int the child wrote before _exit.
int ReadChildError(int fd) {
  int error = 0;
  std::size_t got = 0;
  while (got < sizeof error) {
    const ssize_t n = ::read(fd, reinterpret_cast<char*>(&error) + got, sizeof error - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    got += static_cast<std::size_t>(n);
  }
  return error;
}

std::string PathOf(const std::map<std::string, std::string>& env) {
  const auto found = env.find("PATH");
  return found != env.end() ? found->second : "/usr/local/bin:/usr/bin:/bin";
}

// Resolves argv[0] as execvp would, against the worker's PATH: the first directory that has an
// executable regular file of that name; "" when none has.
std::string ResolveProgram(const std::string& name, const std::map<std::string, std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  const std::string path = PathOf(env);
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = end == start ? "." : path.substr(start, end - start);
    start = end + 1;
    const std::string candidate = dir + "/" + name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

SpawnResult Failure(const std::string& program, int error, const std::vector<int>& cpus) {
  if (error >= kAffinityError) {
    return {-1, 126,
            ErrnoMessage("cannot start '" + program + "': sched_setaffinity to CPUs " +
                             elastic::CpuListText(cpus),
                         error - kAffinityError)};
  }
  const int code = (error == ENOENT || error == ENOTDIR) ? 127 : 126;
  return {-1, code, "cannot execute '" + program + "': " + std::strerror(error)};
}

}  // namespace

SpawnResult SpawnWorker(const SpawnRequest& request) {
  const std::string& program = request.argv.front();
  const std::string resolved = ResolveProgram(program, request.env);
  if (resolved.empty()) return {-1, 127, "cannot execute '" + program + "': command not found"};
  CStringArray env = EnvBlock(request.env);
  CStringArray argv = ArgvBlock(resolved, request.argv);
  const CpuMask cpus(request.cpus);
  OwnedFd devnull{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  int pipe_fds[2];
  if (devnull.fd < 0 || ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return {-1, 126, ErrnoMessage("cannot start '" + program + "'", errno)};
  }
  OwnedFd error_read{pipe_fds[0]};
  OwnedFd error_write{pipe_fds[1]};
  if (request.inherited_fd >= 0 && error_write.fd == kInheritedFd) {  // would be replaced
    error_write.fd = ::fcntl(kInheritedFd, F_DUPFD_CLOEXEC, kInheritedFd + 1);
    ::close(kInheritedFd);
    if (error_write.fd < 0) return {-1, 126, ErrnoMessage("cannot start '" + program + "'", errno)};
  }
  // In the job cgroup from its start, so that the keeper may trust the cgroup for its session
  // and all it starts is in it too; else (no cgroup, or the kernel refuses) a vfork: the child
  // borrows the launcher's memory until it execs (no page tables copied, no copy-on-write
  // faults after), and the launcher waits meanwhile, as it would for the error pipe anyway.
  // Everything the child needs is built above; it only makes system calls.
  ChildSetup setup{::getpid(),
                   devnull.fd,
                   request.stdout_fd,
                   request.stderr_fd,
                   request.session_keeper_fd,
                   false,
                   kRawCloneSafe ? -1 : request.job_cgroup_fd,
                   &cpus,
                   request.inherited_fd};
  const ChildStart start{&setup, resolved.c_str(), argv.Get(), env.Get(), error_write.fd};
  pid_t pid = -1;
  if (kRawCloneSafe && request.job_cgroup_fd >= 0) {
    setup.in_cgroup = true;
    const std::unique_ptr<char[]> stack(new char[kChildStackSize]);
    pid = VforkIntoCgroup(request.job_cgroup_fd, stack.get(), start);
    if (pid < 0) pid = ForkIntoCgroup(request.job_cgroup_fd);
    if (pid < 0) setup.in_cgroup = false;
  }
  if (pid < 0) pid = ::vfork();
  if (pid < 0) return {-1, 126, ErrnoMessage("cannot start '" + program + "': vfork", errno)};
  if (pid == 0) RunChild(&start);
  ::close(std::exchange(error_write.fd, -1));
  if (const int error = ReadChildError(error_read.fd); error != 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return Failure(program, error, request.cpus);
  }
  return {pid, 0, ""};  // the process context reaps it through its pidfd
}

}  // namespace ddprun::launcher::process
