"""ddprun's warm pool: one preloaded Python interpreter per node that forks the workers.

Run as `python -u -c <this text> <json>` (or `python -u warm_pool.py <json>`), stdlib only,
Python 3.8+, Linux. argv[1]: {"fd": N, "path0": DIR, "preload": [MODULE, ...], "cgroup": C}: N is
an inherited AF_UNIX SOCK_SEQPACKET socket to the launcher; DIR replaces sys.path[0] while the
modules are imported, in order; C (optional, "" for none) is the job cgroup's directory, where
the launcher put the pool and so its workers (ddprun's launcher/process/job_cgroup.h). The
preload runs at idle priority (a SCHED_IDLE thread, the session's autogroup at nice 19) unless
"idle": false (bench/warm_pool_start.py's measure of a pool that serves attempt 0 too).

Protocol: JSON in UTF-8, one message per datagram.
pool -> launcher
  {"ready": true, "preload_s": S, "preloaded": [...], "python": "3.11.2", "pid": PID}
  {"ready": false, "reason": "<problem and fix, one line>", "no_torch": B}, then the pool exits 0
      (B: the interpreter has no torch module at all). Not ready:
      a preload fails to import; torch.cuda.is_initialized() is true after a preload; more
      than one OS thread (/proc/self/task) or Python thread remains after a preload. Threads
      are counted after a probe fork (a child that exits at once), because fork-aware
      thread pools stop theirs in a pthread_atfork handler: OpenBLAS, as bundled with
      numpy 2.x, starts one at import, and every real fork stops it the same way.
  {"forked": PID, "id": ID} | {"fork_failed": "<reason>", "id": ID or null}
  {"exit": PID, "status": RAW_WAIT_STATUS}         once per forked worker, when reaped
launcher -> pool
  {"fork": {"id": ID, "argv": [...], "env": {...}, "cwd": DIR or "", "mode": "path"|"module",
            "target": "script.py"|"pkg.mod", "cpus": [0, 1]}}  with 3 or 4 fds (SCM_RIGHTS): the
      worker's stdin, stdout, stderr, and the session keeper's pipe (ddprun's
      launcher/process/session_keeper.h), where the worker writes "<pid>\n" right after its
      setsid(), before any code of the script runs, as an exec'd worker does ("<pid> cgroup\n"
      when it is listed in the job cgroup C). Up to 1 MiB (the sender needs SO_SNDBUF above that).
  end of file: the pool exits at once (os._exit; its workers die by PDEATHSIG).
The pool is single-threaded: a selectors loop over the socket and a pidfd per live worker
(os.pidfd_open), or, without pidfds, SIGCHLD through signal.set_wakeup_fd.

The worker, after fork: closes the pool's fds, setsid(), PDEATHSIG=SIGKILL (exits 137 if the
pool already died), CPU affinity, fds 0-2, os.environ replaced by env, chdir, signal
dispositions and mask as a fresh `python3` has them (faulthandler per PYTHONFAULTHANDLER),
random / numpy.random reseeded, sys.argv and sys.path[0] as `python script.py` or
`python -m pkg.mod` set them. The script then runs in a fresh __main__ module (path mode;
runpy.run_path for directories, zips and .pyc) or through runpy's `-m` entry point, from
this program's top level, so that the interpreter shuts down normally: exit status, atexit,
uncaught exceptions (the pool's frames trimmed from the traceback), sys.exit("msg") and
KeyboardInterrupt (death by SIGINT) behave as in a cold run. A failure before the script
starts (chdir, affinity) prints "warm pool: ..." on the worker's stderr and exits 127.

Known differences between a forked worker and an exec'd one:
- Set once at interpreter start, from the pool's environment and flags, not the attempt's:
  the string hash seed (PYTHONHASHSEED), sys.flags (PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE,
  PYTHONOPTIMIZE, ...), warning filters (-W, PYTHONWARNINGS), sys.path beyond [0]
  (PYTHONPATH, site, .pth files), sys.orig_argv, locale and stdio encodings; also the
  environment variables the preloaded libraries read at import or load (torch, libgomp's
  OMP_NUM_THREADS, OpenBLAS's OPENBLAS_NUM_THREADS, MKL): give the pool the attempt's values.
- Inherited from the pool: sys.modules (the preloads and this program's imports), anything
  the preload did (atexit handlers, which run in every worker; logging and warning filters;
  warnings already shown once; open fds), rlimits, umask, and the parent: os.getppid() is
  the pool's pid. torch's default generator seed is the same either way (fixed at import).
- sys.stdin/stdout/stderr are the pool's objects on the new fds 0-2: isatty() is live, but
  seekable() was cached at the pool's start (on /dev/null).
- /proc/PID/cmdline (ps, pgrep -f) shows the pool's command line, not the script's.
- The preloads are imported on a thread at the lowest priority (SCHED_IDLE), which has ended
  before the pool says ready: thread-local state a library filled at import is that thread's,
  and glibc's handler of its internal signal 33 (set once a thread started) is installed.
- faulthandler's stack dumps (the hang detector's SIGABRT) end with this program's frames
  ("<string>", _run_target) below the script's; tracebacks of uncaught exceptions do not.
- Refreshed here, as a fresh interpreter would have them: random and numpy.random's legacy
  global state, multiprocessing's authkey and ORIGINAL_DIR (spawn resolves a relative
  __main__ path against it), tempfile.tempdir (recomputed from the new TMPDIR).
"""
import array
import ctypes
import errno
import faulthandler
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
import warnings

MAX_REQUEST = (1 << 20) + (64 << 10)
MAX_FDS = 16  # more than the 3 expected, so that extra ones are received and closed
PR_SET_PDEATHSIG = 1
SETUP_FAILED = 127
_POOL_GLOBALS = globals()
_LIBC = ctypes.CDLL(None, use_errno=True)


# ---- the pool ------------------------------------------------------------------------------

def _send(sock, message):
    try:
        sock.send(json.dumps(message).encode())
    except OSError:  # the launcher is gone
        _pool_exit()


def _pool_exit():
    sys.stderr.flush()
    os._exit(0)


def _one_line(text):
    return " ".join(str(text).split())


def _thread_names():
    names = []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                names.append(f.read().strip())
        except OSError:
            names.append("?")
    return names


def _probe_fork():
    """Forks a child that exits at once: pthread_atfork handlers stop fork-aware thread pools."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: "multi-threaded, fork()"
        pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _thread_problem(module):
    if len(os.listdir("/proc/self/task")) > 1:
        _probe_fork()
    names = _thread_names()
    threading = sys.modules.get("threading")
    python_threads = threading.enumerate()[1:] if threading else []
    if len(names) <= 1 and not python_threads:
        return None
    described = ", ".join(names[1:] + [t.name for t in python_threads])
    return ("the preload left %d other thread(s) running after importing %s (%s): fork copies "
            "only the forking thread, so a forked worker would miss them; remove %s from "
            "--warm-preload" % (max(len(names) - 1, len(python_threads)), module, described,
                                module))


def _cuda_problem(module):
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None
    return ("the preload initialised CUDA (module %s?): a forked worker could not use the GPU; "
            "remove it from --warm-preload" % module)


def _lower_this_thread():
    """Puts the calling thread (only it: Linux schedules threads) at the lowest CPU priority."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # pid 0: this thread
        return "idle"
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        return "nice 19"
    except (AttributeError, OSError):
        return "normal"


def _set_autogroup_nice(nice):
    """With autogroups (kernel.sched_autogroup_enabled, a session's tasks share one CPU slot), a
    thread's SCHED_IDLE yields only to the pool's own session: the pool's autogroup goes to nice
    19 while it preloads, so that it yields to the workers' sessions, and back to 0 once ready,
    so that its forks are not slowed (the launcher waits for each reply). The kernel lets anyone
    set 0..19 (only below 0 needs privilege), at most once per 100 ms without CAP_SYS_ADMIN
    (EAGAIN: tried again once, 100 ms later). Forked workers call setsid(), which starts a fresh
    autogroup at nice 0. Nowhere to write: nothing to do."""
    for attempt in range(2):
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
            return
        except OSError as exc:
            if exc.errno != errno.EAGAIN or attempt:
                return
            time.sleep(0.1)  # the kernel's own rate limit, not a wait for an event


def _await_thread_exit(tid, bound_s=2.0):
    """join() returns once the thread's Python part is done; the OS thread ends a moment later.
    Waits (yielding, bounded) until the kernel no longer lists it, so that the thread check
    that follows counts only threads the preload left."""
    deadline = time.monotonic() + bound_s
    while os.path.exists("/proc/self/task/%d" % tid) and time.monotonic() < deadline:
        os.sched_yield()


def _import_at_low_priority(name):
    """Imports module `name` on a thread of its own at the lowest CPU priority, so that the
    pool's import yields the CPUs to attempt 0's workers, which import the same modules at the
    same time (issue 40: the pool must not delay attempt 0). The main thread, whose scheduling
    the forked workers inherit, keeps its own; the thread is joined before the checks, so the
    pool forks single-threaded. A module that will import only on the main thread (one that
    sets a signal handler at import) is imported again there, at the pool's priority."""
    outcome = {}

    def run():
        outcome["tid"] = threading.get_native_id()
        outcome["priority"] = _lower_this_thread()
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="ddprun-preload")
    thread.start()
    thread.join()
    _await_thread_exit(outcome["tid"])
    if "error" in outcome:
        importlib.import_module(name)  # raises again when it is not the thread's fault
    return outcome.get("priority", "normal")


class _NoTorch(str):
    """The reason the pool is not ready: this Python cannot import torch at all."""


def _preload(modules, idle=True):
    """Imports the modules in order (`idle`: at the lowest priority); returns None, or the
    reason the pool is not ready."""
    for name in modules:
        try:
            if idle:
                _import_at_low_priority(name)
            else:
                importlib.import_module(name)
        except (Exception, SystemExit) as exc:
            if name == "torch" and isinstance(exc, ModuleNotFoundError) and exc.name == "torch":
                return _NoTorch(_one_line("%s has no torch (import torch: %s): nothing to "
                                          "preload" % (sys.executable, exc)))
            return _one_line("cannot import %s (%s: %s): install it or remove it from "
                             "--warm-preload" % (name, type(exc).__name__, exc))
        problem = _cuda_problem(name) or _thread_problem(name)
        if problem:
            return problem
    return None


def _has_pidfd():
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except (AttributeError, OSError):
        return False


def _receive(sock):
    """One datagram and the fds that came with it (close-on-exec in the pool)."""
    data, ancdata, flags, _ = sock.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(MAX_FDS * 4),
                                           socket.MSG_CMSG_CLOEXEC)
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    truncated = flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
    return data, list(fds), truncated


def _close_all(fds):
    for fd in fds:
        os.close(fd)


def _check(condition, what):
    if not condition:
        raise ValueError("bad fork request: " + what)


def _parse_fork(data):
    """The fork request in data, checked; raises ValueError (with the id when known)."""
    try:
        request = json.loads(data.decode())["fork"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError("bad fork request: not {\"fork\": {...}} JSON") from None
    _check(isinstance(request, dict), "\"fork\" is not an object")
    _check(isinstance(request.get("argv"), list) and request["argv"]
           and all(isinstance(a, str) for a in request["argv"]), "argv")
    env = request.get("env")
    _check(isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str)
                                         for k, v in env.items()), "env")
    _check(request.get("mode") in ("path", "module"), "mode")
    _check(isinstance(request.get("target"), str) and request["target"], "target")
    _check(isinstance(request.get("cwd") or "", str), "cwd")
    cpus = request.get("cpus") or []
    _check(isinstance(cpus, list) and all(isinstance(c, int) for c in cpus), "cpus")
    return request


def _request_id(data):
    try:
        return json.loads(data.decode())["fork"]["id"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class _Pool:
    """The serve loop. serve() returns only in a freshly forked worker, with its request."""

    def __init__(self, sock, cgroup):
        self.sock = sock
        self.cgroup = cgroup  # the job cgroup's directory, or ""
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.children = {}  # pid -> pidfd, or None without pidfds
        self.wakeup = None  # (read fd, write fd) of the SIGCHLD wakeup pipe
        self.selector.register(sock, selectors.EVENT_READ, self._on_request)
        if not _has_pidfd():
            self._watch_sigchld()

    def serve(self):
        while True:
            for key, _ in self.selector.select():
                job = key.data(key)
                if job is not None:
                    return job

    def _watch_sigchld(self):
        self.wakeup = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wakeup[1])
        self.selector.register(self.wakeup[0], selectors.EVENT_READ, self._on_sigchld)

    def _on_request(self, _key):
        try:
            data, fds, truncated = _receive(self.sock)
        except OSError:
            _pool_exit()
        if not data:  # end of file: the launcher is gone or done
            _close_all(fds)
            _pool_exit()
        try:
            _check(not truncated, "truncated (over %d bytes or %d fds)" % (MAX_REQUEST, MAX_FDS))
            _check(len(fds) in (3, 4), "%d fds attached, not 3 or 4" % len(fds))
            request = _parse_fork(data)
        except ValueError as exc:
            _close_all(fds)
            _send(self.sock, {"fork_failed": str(exc), "id": _request_id(data)})
            return None
        return self._fork(request, fds)

    def _fork(self, request, fds):
        try:
            pid = os.fork()
        except OSError as exc:
            _close_all(fds)
            _send(self.sock, {"fork_failed": "fork: %s" % exc, "id": request.get("id")})
            return None
        if pid == 0:
            self._leave(fds[3] if len(fds) == 4 else None)
            return (request, fds[:3])
        _close_all(fds)
        self._watch(pid)
        _send(self.sock, {"forked": pid, "id": request.get("id")})
        return None

    def _watch(self, pid):
        if self.wakeup is not None:
            self.children[pid] = None
            return
        pidfd = os.pidfd_open(pid)
        self.children[pid] = pidfd
        self.selector.register(pidfd, selectors.EVENT_READ, lambda _key: self._on_exit(pid))

    def _on_exit(self, pid):
        _, status = os.waitpid(pid, 0)  # the pidfd is readable: the worker has exited
        pidfd = self.children.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _send(self.sock, {"exit": pid, "status": status})

    def _on_sigchld(self, _key):
        try:
            while os.read(self.wakeup[0], 512):
                pass
        except BlockingIOError:
            pass
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.children.pop(pid, 0) is None:
                _send(self.sock, {"exit": pid, "status": status})

    def _cgroup_mark(self):
        """b" cgroup" when this process is listed in the job cgroup (the keeper then trusts
        the cgroup's list for its session), else b"" (the keeper scans /proc)."""
        if not self.cgroup:
            return b""
        try:
            with open(os.path.join(self.cgroup, "cgroup.procs"), "rb") as procs:
                return b" cgroup" if b"%d" % os.getpid() in procs.read().split() else b""
        except OSError:
            return b""

    def _leave(self, keeper_fd):
        """In the worker: drops the pool's fds (never unregistering: the epoll set is shared),
        registers its session with the session keeper and ties the worker to the pool's life."""
        self.sock.close()
        self.selector.close()
        _close_all(fd for fd in self.children.values() if fd is not None)
        if self.wakeup is not None:
            _close_all(self.wakeup)
        os.setsid()
        if keeper_fd is not None:
            try:  # one write below PIPE_BUF: atomic
                os.write(keeper_fd, b"%d%s\n" % (os.getpid(), self._cgroup_mark()))
            except OSError:
                pass  # no keeper left: the launcher is gone, and PDEATHSIG follows
            os.close(keeper_fd)
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:  # the pool died before prctl
            os._exit(128 + signal.SIGKILL)


def _pool_main(argv):
    """Preloads, reports readiness, serves; returns (request, fds) in a forked worker only."""
    config = json.loads(argv[1])
    sock = socket.socket(fileno=config["fd"])
    sock.set_inheritable(False)
    if config.get("path0"):
        sys.path[0] = config["path0"]
    preload = list(config.get("preload") or [])
    start = time.monotonic()
    idle = config.get("idle", True)
    if idle:
        _set_autogroup_nice(19)
    problem = _preload(preload, idle)
    if idle:
        _set_autogroup_nice(0)
    if problem:
        _send(sock, {"ready": False, "reason": problem, "no_torch": isinstance(problem, _NoTorch)})
        _pool_exit()
    _send(sock, {"ready": True, "preload_s": time.monotonic() - start, "preloaded": preload,
                 "python": sys.version.split()[0], "pid": os.getpid()})
    return _Pool(sock, config.get("cgroup") or "").serve()


# ---- the worker ----------------------------------------------------------------------------

def _reset_signals():
    faulthandler.disable()  # first: enable() would not reinstall handlers reset below
    signal.set_wakeup_fd(-1)
    startup = {signal.SIGINT: signal.default_int_handler, signal.SIGPIPE: signal.SIG_IGN,
               signal.SIGXFSZ: signal.SIG_IGN}
    for signum in signal.valid_signals():
        if signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(signum, startup.get(signum, signal.SIG_DFL))
        except (OSError, ValueError):  # reserved by libc (32, 33)
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    if os.environ.get("PYTHONFAULTHANDLER"):
        faulthandler.enable(file=sys.stderr, all_threads=True)


def _refresh_process_state():
    """What a fresh interpreter would have drawn or read anew."""
    for name in ("random", "numpy.random"):
        module = sys.modules.get(name)
        if module is not None:
            module.seed()
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.current_process().authkey = os.urandom(32)
        process.ORIGINAL_DIR = os.getcwd()
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile.tempdir = None


def _prepare_worker(request, fds):
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    for target_fd, fd in enumerate(fds):
        os.dup2(fd, target_fd)
    _close_all(fd for fd in fds if fd > 2)
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("cwd"):
        os.chdir(request["cwd"])
    _reset_signals()
    _refresh_process_state()
    sys.argv = list(request["argv"])
    if request["mode"] == "module":
        sys.path[0] = os.getcwd()
    else:
        sys.path[0] = os.path.dirname(os.path.realpath(request["target"]))


def _start_worker(job):
    request, fds = job
    try:
        _prepare_worker(request, fds)
    except OSError as exc:
        os.write(2, ("warm pool: cannot start worker %s: %s\n" % (request.get("id"), exc)).encode())
        os._exit(SETUP_FAILED)
    return request


def _fresh_main():
    """An empty __main__ module, as the interpreter makes it, in place of the pool's."""
    import builtins
    import types
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __annotations__={})
    sys.modules["__main__"] = main
    return main


def _run_script(path):
    """What `python path` does for a source file: a fresh __main__ module, kept to the end."""
    import importlib.machinery
    filename = os.path.abspath(path) if sys.version_info >= (3, 9) else path
    with open(filename, "rb") as f:
        code = compile(f.read(), filename, "exec", dont_inherit=True)
    main = _fresh_main()
    main.__dict__.update(__file__=filename, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", filename))
    exec(code, main.__dict__)


def _run_target(request):
    import pkgutil
    import runpy
    target = request["target"]
    if request["mode"] == "module":
        _fresh_main()
        runpy._run_module_as_main(target)  # what `python -m` calls: runs in that __main__
    elif pkgutil.get_importer(target) is not None or target.endswith(".pyc"):
        runpy.run_path(target, run_name="__main__")  # a directory, a zip, or bytecode
    else:
        _run_script(target)


def _trim_pool_frames():
    """Reports the uncaught exception from the script's frames on (unless it set its hook)."""
    if sys.excepthook is not sys.__excepthook__:
        return

    def hook(kind, value, tb):
        while tb is not None and tb.tb_frame.f_globals is _POOL_GLOBALS:
            tb = tb.tb_next
        if isinstance(value, BaseException):
            value.__traceback__ = tb  # 3.11's hook prints the exception's own traceback
        sys.__excepthook__(kind, value, tb)
    sys.excepthook = hook


if __name__ == "__main__":
    # Only a forked worker gets past _pool_main. It runs the script here, at the top level,
    # so that an exception or SystemExit leaves through CPython's own handling.
    _REQUEST = _start_worker(_pool_main(sys.argv))
    try:
        _run_target(_REQUEST)
    except BaseException:
        _trim_pool_frames()
        raise
