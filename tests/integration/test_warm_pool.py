"""The warm pool (launcher/process/warm_pool.py) driven as the launcher drives it: a SEQPACKET
socketpair, fork requests with three fds, replies and exit reports; forked workers compared
with the same script run cold (`python -u script.py`).

The pool runs under $WARM_POOL_PYTHON (default: this interpreter). The torch and numpy cases
use the first interpreter that has them among $DDPRUN_TORCH_PYTHON, /usr/bin/python3 and
~/.cache/ddprun/torch2-venv/bin/python, and are skipped, saying so, when none has.
"""
import array
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from ddprun_testlib import REPO_ROOT, is_alive, wait_for

POOL_PATH = os.path.join(REPO_ROOT, "launcher", "process", "warm_pool.py")
PYTHON = os.environ.get("WARM_POOL_PYTHON") or sys.executable
DEADLINE = 60.0
TORCH_DEADLINE = 240.0  # spawn re-imports torch per loader worker, on two shared cores


def _candidates():
    named = [os.environ.get("DDPRUN_TORCH_PYTHON"), "/usr/bin/python3",
             os.path.expanduser("~/.cache/ddprun/torch2-venv/bin/python")]
    return [p for p in named if p and os.access(p, os.X_OK)]


_HAS = {}


def python_with(module):
    """The first candidate interpreter that imports module, or None."""
    if module not in _HAS:
        _HAS[module] = next((p for p in _candidates() if subprocess.run(
            [p, "-c", "import " + module], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL).returncode == 0), None)
    return _HAS[module]


def exit_code(status):
    """A raw wait status as Popen.returncode reads: the code, or -signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def base_env(**extra):
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent"}
    env.update(extra)
    return env


class Pool:
    """The launcher's side of one pool."""

    def __init__(self, python=PYTHON, preload=(), path0=None, env=None, via_c=True, cwd=None):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 << 20)
        config = json.dumps({"fd": theirs.fileno(), "path0": path0 or os.getcwd(),
                             "preload": list(preload)})
        if via_c:
            with open(POOL_PATH) as f:
                argv = [python, "-u", "-c", f.read(), config]
        else:
            argv = [python, "-u", POOL_PATH, config]
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr, pass_fds=[theirs.fileno()],
                                     start_new_session=True, env=env or base_env(), cwd=cwd)
        theirs.close()
        self.pending = []
        self.workers = []
        self.next_id = 0

    def receive(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
            raise AssertionError("no message from the pool in time; its stderr:\n" +
                                 self.pool_stderr())
        data = self.sock.recv(1 << 16)
        return json.loads(data) if data else None

    def expect(self, predicate, timeout=DEADLINE):
        """The first message (stashed ones first) that satisfies predicate."""
        for message in self.pending:
            if predicate(message):
                self.pending.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(deadline)
            if message is None:
                raise AssertionError("the pool closed the socket; stderr:\n" + self.pool_stderr())
            if predicate(message):
                return message
            self.pending.append(message)

    def ready(self, timeout=DEADLINE):
        return self.expect(lambda m: "ready" in m, timeout)

    def send_fork(self, fds, **request):
        self.next_id += 1
        request.setdefault("id", self.next_id)
        data = json.dumps({"fork": request}).encode()
        self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        return request["id"]

    def fork(self, fds, target, argv=None, env=None, cwd="", mode="path", cpus=None):
        ident = self.send_fork(fds, argv=argv or [target], env=env or base_env(), cwd=cwd,
                               mode=mode, target=target, cpus=cpus or [])
        reply = self.expect(lambda m: m.get("id") == ident)
        if "forked" not in reply:
            raise AssertionError("fork failed: %r" % reply)
        self.workers.append(reply["forked"])
        return reply["forked"]

    def wait_exit(self, pid, timeout=DEADLINE):
        return self.expect(lambda m: m.get("exit") == pid, timeout)["status"]

    def pool_stderr(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self):
        for pid in self.workers + [self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(DEADLINE)
        self.sock.close()
        self.stderr.close()


class WarmPoolTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="warm_pool.")
        self.dir = os.path.realpath(self.tmp.name)
        self.pools = []
        self.fds = []

    def tearDown(self):
        for pool in self.pools:
            pool.close()
        for fd in self.fds:
            os.close(fd)
        self.tmp.cleanup()

    def start_pool(self, **kwargs):
        pool = Pool(**kwargs)
        self.pools.append(pool)
        return pool

    def ready_pool(self, **kwargs):
        pool = self.start_pool(**kwargs)
        message = pool.ready(TORCH_DEADLINE)
        self.assertTrue(message["ready"], message)
        return pool

    def write(self, relative, text):
        path = os.path.join(self.dir, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def new_file(self):
        fd, path = tempfile.mkstemp(dir=self.dir)
        os.close(fd)
        return path

    def output_files(self):
        """stdin (/dev/null), stdout and stderr files for one worker: (fds, paths)."""
        paths = [self.new_file() for _ in range(2)]
        fds = [os.open(os.devnull, os.O_RDONLY)] + [os.open(p, os.O_WRONLY) for p in paths]
        return fds, paths

    def run_warm(self, pool, target, timeout=DEADLINE, **kwargs):
        """Runs target in a forked worker to its end: (returncode as Popen's, stdout, stderr)."""
        fds, paths = self.output_files()
        try:
            pid = pool.fork(fds, target, **kwargs)
        finally:
            for fd in fds:
                os.close(fd)
        status = pool.wait_exit(pid, timeout)
        return (exit_code(status),) + tuple(read_text(p) for p in paths)

    def run_cold(self, target, python=PYTHON, argv=None, env=None, cwd=None, mode="path",
                 timeout=DEADLINE):
        argv = argv or [target]
        head = ["-m", target] if mode == "module" else [target]
        result = subprocess.run([python, "-u"] + head + argv[1:], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env or base_env(), cwd=cwd or None, timeout=timeout)
        return result.returncode, result.stdout, result.stderr

    def pipe(self):
        read_end, write_end = os.pipe()
        self.fds.append(read_end)
        return read_end, write_end

    def read_until(self, fd, needle, timeout=DEADLINE):
        """Reads fd until needle shows up (or EOF); returns what was read."""
        deadline = time.monotonic() + timeout
        data = b""
        while needle not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise AssertionError("timed out waiting for %r; got %r" % (needle, data))
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: a pty's other side closed
                break
            if not chunk:
                break
            data += chunk
        return data

    def start_blocked_worker(self, pool, env=None):
        """A worker that says 'up' on its stdout pipe, then waits for signals: (pid, pipe)."""
        script = self.write("block.py", """\
            import signal
            print("up")
            while True:
                signal.pause()
            """)
        read_end, write_end = self.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        err_path = self.new_file()
        stderr = os.open(err_path, os.O_WRONLY)
        try:
            pid = pool.fork([stdin, write_end, stderr], script, env=env)
        finally:
            for fd in (stdin, write_end, stderr):
                os.close(fd)
        self.read_until(read_end, b"up\n")
        return pid, err_path


REPORT = """\
    import json, os, signal, sys
    main = sys.modules["__main__"]
    print(json.dumps({
        "argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0],
        "cwd": os.getcwd(), "main_keys": sorted(vars(main)),
        "loader": type(getattr(main, "__loader__", None)).__name__,
        "spec": getattr(getattr(main, "__spec__", None), "name", None),
        "package": getattr(main, "__package__", None),
        "env": dict(os.environ), "sid": os.getsid(0) == os.getpid(),
    }))
    """


class TestReady(WarmPoolTestCase):
    def test_ready_message(self):
        pool = self.start_pool(preload=["json", "decimal"])
        message = pool.ready()
        version = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
        self.assertEqual(message["ready"], True)
        self.assertEqual(message["preloaded"], ["json", "decimal"])
        self.assertEqual(message["python"], version)
        self.assertEqual(message["pid"], pool.proc.pid)
        self.assertIsInstance(message["preload_s"], float)
        self.assertGreaterEqual(message["preload_s"], 0.0)

    def test_runs_as_a_file_too(self):
        pool = self.ready_pool(via_c=False)
        script = self.write("hello.py", 'print("hello", __name__)\n')
        self.assertEqual(self.run_warm(pool, script), (0, "hello __main__\n", ""))

    def test_missing_preload_is_not_ready(self):
        pool = self.start_pool(preload=["json", "no_such_module_xyz"])
        message = pool.ready()
        self.assertFalse(message["ready"])
        self.assertIn("no_such_module_xyz", message["reason"])
        self.assertNotIn("\n", message["reason"])
        self.assertEqual(pool.proc.wait(DEADLINE), 0)

    def test_a_python_without_torch_says_so(self):
        # On by default for every Python job: a Python without torch is told apart ("no_torch",
        # logged on the info level by ddprun), any other failed preload is not.
        nosite = self.write("python_nosite", "#!/bin/sh\nexec %s -S \"$@\"\n" % PYTHON)
        os.chmod(nosite, 0o755)  # without site, no dist-packages: no torch
        message = self.start_pool(python=nosite, preload=["torch"]).ready()
        self.assertEqual((message["ready"], message["no_torch"]), (False, True), message)
        self.assertIn("has no torch", message["reason"])
        other = self.start_pool(preload=["no_such_module_xyz"]).ready()
        self.assertFalse(other["no_torch"])

    def test_preload_that_starts_a_thread_is_not_ready(self):
        self.write("mods/starts_thread.py", """\
            import threading
            stop = threading.Event()
            threading.Thread(target=stop.wait, name="blocker").start()
            """)
        pool = self.start_pool(preload=["starts_thread"], path0=os.path.join(self.dir, "mods"))
        message = pool.ready()
        self.assertFalse(message["ready"])
        self.assertIn("thread", message["reason"])
        self.assertIn("blocker", message["reason"])
        self.assertIn("starts_thread", message["reason"])
        self.assertEqual(pool.proc.wait(DEADLINE), 0)  # despite the non-daemon thread

    def test_exits_at_end_of_file(self):
        pool = self.ready_pool()
        pid, _ = self.start_blocked_worker(pool)
        pool.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(pool.proc.wait(DEADLINE), 0)
        wait_for(lambda: not is_alive(pid), DEADLINE, "the worker to die with the pool")


class TestWorkerSetup(WarmPoolTestCase):
    def test_env_argv_file_path_cwd_match_a_cold_run(self):
        work = os.path.join(self.dir, "work")
        self.write("work/scripts/report.py", REPORT)
        env = base_env(ONLY_FOR_WORKER="1")
        pool = self.ready_pool(env=base_env(ONLY_FOR_POOL="1"), cwd=self.dir)
        argv = ["scripts/report.py", "a", "b c"]
        code, out, err = self.run_warm(pool, "scripts/report.py", argv=argv, env=env, cwd=work)
        self.assertEqual((code, err), (0, ""))
        warm = json.loads(out)
        cold = json.loads(self.run_cold("scripts/report.py", argv=argv, env=env, cwd=work)[1])
        self.assertEqual(warm["env"], env)
        self.assertTrue(warm.pop("sid"))  # a worker leads its own session; the cold run not
        cold.pop("sid")
        self.assertEqual(warm, cold)
        self.assertEqual(warm["path0"], os.path.join(work, "scripts"))

    def test_module_mode_matches_a_cold_run(self):
        self.write("pkg/__init__.py", "")
        self.write("pkg/report.py", REPORT)
        pool = self.ready_pool()
        argv = ["pkg.report", "x"]
        code, out, err = self.run_warm(pool, "pkg.report", argv=argv, cwd=self.dir, mode="module")
        self.assertEqual((code, err), (0, ""))
        cold = self.run_cold("pkg.report", argv=argv, cwd=self.dir, mode="module")
        warm, cold = json.loads(out), json.loads(cold[1])
        self.assertTrue(warm.pop("sid"))
        cold.pop("sid")
        self.assertEqual(warm, cold)
        self.assertEqual(warm["path0"], self.dir)

    def test_preload_yields_the_cpus_and_workers_keep_the_pools_priority(self):
        # Issue 40: the pool imports beside attempt 0's workers, so its import runs on a thread
        # at the lowest priority (SCHED_IDLE); the forked workers inherit the main thread's.
        self.write("mods/where_imported.py", """\
            import os, threading
            try:
                with open("/proc/self/autogroup") as f:
                    GROUP = f.read().split()[-1]
            except OSError:
                GROUP = "19"
            POLICY = os.sched_getscheduler(0)
            MAIN = threading.current_thread() is threading.main_thread()
            """)
        script = self.write("prio.py", """\
            import os, sys, threading
            mod = sys.modules["where_imported"]
            try:
                with open("/proc/self/autogroup") as f:  # setsid: its own, at nice 0
                    group = f.read().split()[-1]
            except OSError:
                group = "0"
            print(mod.POLICY == os.SCHED_IDLE, mod.MAIN, os.sched_getscheduler(0) == os.SCHED_OTHER,
                  os.getpriority(os.PRIO_PROCESS, 0), threading.active_count(), group, mod.GROUP)
            """)
        pool = self.ready_pool(preload=["where_imported"], path0=os.path.join(self.dir, "mods"))
        base_nice = os.getpriority(os.PRIO_PROCESS, 0)
        # While it imported: its session's autogroup at nice 19; once ready: back to 0, so that
        # its forks are not slowed.
        self.assertEqual(self.run_warm(pool, script),
                         (0, "True False True %d 1 0 19\n" % base_nice, ""))
        if os.path.exists("/proc/%d/autogroup" % pool.proc.pid):
            with open("/proc/%d/autogroup" % pool.proc.pid) as f:
                self.assertEqual(f.read().split()[-1], "0")

    def test_cpu_affinity(self):
        script = self.write("cpus.py", "import os; print(sorted(os.sched_getaffinity(0)))\n")
        pool = self.ready_pool()
        self.assertEqual(self.run_warm(pool, script, cpus=[0]), (0, "[0]\n", ""))

    def test_signal_dispositions_and_mask_match_a_cold_run(self):
        script = self.write("signals.py", """\
            import signal
            fields = ("SigBlk", "SigIgn", "SigCgt")
            LIBC_RESERVED = ~((1 << 31) | (1 << 32))  # signals 32 and 33: glibc's own
            with open("/proc/self/status") as f:
                print(["%s %016x" % (l.split(":")[0], int(l.split()[1], 16) & LIBC_RESERVED)
                       for l in f if l.startswith(fields)])
            print([str(signal.getsignal(s)) for s in sorted(signal.valid_signals())
                   if s not in (32, 33)])
            """)
        self.write("mods/messes_signals.py", """\
            import faulthandler, signal
            signal.signal(signal.SIGUSR1, lambda *_: None)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2, signal.SIGHUP])
            faulthandler.enable()
            """)
        pool = self.ready_pool(preload=["messes_signals"], path0=os.path.join(self.dir, "mods"))
        warm = self.run_warm(pool, script)
        self.assertEqual(warm, self.run_cold(script))
        self.assertIn("SigCgt 0000000000000002", warm[1])  # SIGINT only

    def test_pipe_and_terminal_outputs(self):
        script = self.write("tty.py", 'import os, sys; print("tty", os.isatty(1), sys.stdout.isatty())\n')
        pool = self.ready_pool()
        for kind in ("pipe", "pty"):
            read_end, write_end = self.pipe() if kind == "pipe" else os.openpty()
            if kind == "pty":
                self.fds.append(read_end)
            stdin = os.open(os.devnull, os.O_RDONLY)
            pid = pool.fork([stdin, write_end, write_end], script)
            os.close(stdin)
            os.close(write_end)
            self.assertEqual(exit_code(pool.wait_exit(pid)), 0)
            expected = b"tty True True" if kind == "pty" else b"tty False False"
            self.assertIn(expected, self.read_until(read_end, expected))

    def test_random_is_reseeded_per_worker(self):
        script = self.write("rand.py", "import random; print(random.random())\n")
        pool = self.ready_pool(preload=["random"])
        draws = {self.run_warm(pool, script)[1] for _ in range(2)}
        self.assertEqual(len(draws), 2, draws)

    def test_numpy_global_state_is_reseeded_per_worker(self):
        python = python_with("numpy")
        if python is None:
            self.skipTest("no interpreter with numpy among %s" % _candidates())
        script = self.write("nrand.py", "import numpy; print(numpy.random.random())\n")
        pool = self.ready_pool(python=python, preload=["numpy", "numpy.random"])
        draws = {self.run_warm(pool, script)[1] for _ in range(2)}
        self.assertEqual(len(draws), 2, draws)

    def test_large_environment(self):
        script = self.write("envsize.py", "import os; print(len(os.environ['BIG']))\n")
        pool = self.ready_pool()
        size = 600 << 10
        self.assertEqual(self.run_warm(pool, script, env=base_env(BIG="x" * size)),
                         (0, "%d\n" % size, ""))

    def test_bad_request_fails_and_the_pool_goes_on(self):
        pool = self.ready_pool()
        fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
        self.fds.extend(fds)
        ident = pool.send_fork(fds, argv=["x.py"], env={}, mode="path", target="x.py")
        reply = pool.expect(lambda m: m.get("id") == ident)
        self.assertIn("2 fds", reply["fork_failed"])
        script = self.write("ok.py", "print('ok')\n")
        self.assertEqual(self.run_warm(pool, script), (0, "ok\n", ""))


class TestExits(WarmPoolTestCase):
    def compare(self, name, text, **expected):
        """Runs the script warm and cold: same status, stdout and stderr."""
        script = self.write(name, text)
        pool = self.ready_pool()
        warm = self.run_warm(pool, script)
        self.assertEqual(warm, self.run_cold(script))
        for key, value in expected.items():
            self.assertEqual(warm[("code", "out", "err").index(key)], value)
        return warm

    def test_normal_end_runs_atexit_and_flushes(self):
        self.compare("end.py", """\
            import atexit, sys
            atexit.register(lambda: print("at exit"))
            sys.stdout = open(1, "w", closefd=False, buffering=1 << 16)
            print("buffered", end="")
            atexit.register(sys.stdout.flush)
            """, code=0)

    def test_exit_code(self):
        self.compare("three.py", "import sys; sys.exit(3)\n", code=3)

    def test_exit_with_message(self):
        self.compare("msg.py", "import sys; sys.exit('goodbye')\n", code=1, err="goodbye\n")

    def test_uncaught_exception_traceback_is_the_scripts(self):
        code, _, err = self.compare("boom.py", """\
            def inner():
                raise ValueError("boom")
            inner()
            """, code=1)
        self.assertIn("line 2, in inner", err)
        self.assertNotIn("<string>", err)

    def test_keyboard_interrupt_dies_by_sigint(self):
        self.compare("ctrlc.py", "raise KeyboardInterrupt\n", code=-signal.SIGINT)

    def test_killed_by_signals(self):
        pool = self.ready_pool()
        for signum in (signal.SIGTERM, signal.SIGKILL):
            pid, _ = self.start_blocked_worker(pool)
            os.kill(pid, signum)
            self.assertEqual(exit_code(pool.wait_exit(pid)), -signum)

    def test_many_exits_each_reported_once(self):
        script = self.write("quick.py", "")
        pool = self.ready_pool()
        fds = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
        self.fds.extend(fds)
        pids = [pool.fork(fds, script) for _ in range(8)]
        for pid in pids:
            self.assertEqual(exit_code(pool.wait_exit(pid)), 0)
        last = pool.fork(fds, script)
        self.assertEqual(exit_code(pool.wait_exit(last)), 0)
        self.assertEqual(pool.pending, [])  # nothing else came, no exit twice

    def test_pool_death_kills_the_worker(self):
        pool = self.ready_pool()
        pid, _ = self.start_blocked_worker(pool)
        os.kill(pool.proc.pid, signal.SIGKILL)
        wait_for(lambda: not is_alive(pid), DEADLINE, "PDEATHSIG to kill the worker")

    def test_faulthandler_follows_the_workers_environment(self):
        pool = self.ready_pool(env=base_env(PYTHONFAULTHANDLER="1"))
        for value, shown in (("1", True), ("", False)):
            pid, err_path = self.start_blocked_worker(pool, env=base_env(PYTHONFAULTHANDLER=value))
            os.kill(pid, signal.SIGABRT)
            self.assertEqual(exit_code(pool.wait_exit(pid)), -signal.SIGABRT)
            err = read_text(err_path)
            self.assertEqual("Fatal Python error: Aborted" in err, shown, err)
            if shown:
                self.assertIn('block.py", line', err)


class TestMultiprocessing(WarmPoolTestCase):
    def test_spawn_reimports_main_by_path(self):
        # A relative target run elsewhere than the pool's cwd: on 3.8, where __file__ stays
        # relative, spawn finds __main__ only through the refreshed ORIGINAL_DIR.
        work = os.path.join(self.dir, "work")
        self.write("work/mp_spawn.py", """\
            import multiprocessing
            def square(x):
                return x * x
            if __name__ == "__main__":
                with multiprocessing.get_context("spawn").Pool(2) as p:
                    print(p.map(square, [1, 2, 3]))
            """)
        pool = self.ready_pool(preload=["multiprocessing"], cwd=self.dir)
        self.assertEqual(self.run_warm(pool, "mp_spawn.py", cwd=work), (0, "[1, 4, 9]\n", ""))


DATALOADER = """\
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Squares(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            return torch.tensor(float(i * i))

    if __name__ == "__main__":
        loader = DataLoader(Squares(), batch_size=2, num_workers=2,
                            multiprocessing_context=sys.argv[1])
        print(sys.argv[1], float(sum(batch.sum() for batch in loader)))
    """


class TestTorch(WarmPoolTestCase):
    def setUp(self):
        super().setUp()
        self.python = python_with("torch")
        if self.python is None:
            self.skipTest("no interpreter with torch among %s" % _candidates())

    def test_preload_that_initialises_cuda_is_not_ready(self):
        self.write("mods/fake_cuda.py", """\
            import torch
            torch.cuda.is_initialized = lambda: True
            """)
        pool = self.start_pool(python=self.python, preload=["torch", "fake_cuda"],
                               path0=os.path.join(self.dir, "mods"))
        message = pool.ready(TORCH_DEADLINE)
        self.assertFalse(message["ready"])
        self.assertIn("initialised CUDA (module fake_cuda?)", message["reason"])

    def test_dataloader_fork_and_spawn(self):
        work = os.path.join(self.dir, "work")
        self.write("work/loader.py", DATALOADER)
        pool = self.ready_pool(python=self.python, preload=["torch"], cwd=self.dir)
        for context in ("fork", "spawn"):
            result = self.run_warm(pool, "loader.py", argv=["loader.py", context], cwd=work,
                                   timeout=TORCH_DEADLINE)
            self.assertEqual(result, (0, "%s 140.0\n" % context, ""))

    def test_signals_match_a_cold_run_with_torch_preloaded(self):
        script = self.write("signals.py", """\
            import signal, torch
            LIBC_RESERVED = ~((1 << 31) | (1 << 32))  # signals 32 and 33: glibc's own
            with open("/proc/self/status") as f:
                print(["%s %016x" % (l.split(":")[0], int(l.split()[1], 16) & LIBC_RESERVED)
                       for l in f if l.startswith(("SigBlk", "SigIgn", "SigCgt"))])
            """)
        pool = self.ready_pool(python=self.python, preload=["torch"])
        self.assertEqual(self.run_warm(pool, script, timeout=TORCH_DEADLINE),
                         self.run_cold(script, python=self.python, timeout=TORCH_DEADLINE))


if __name__ == "__main__":
    unittest.main()
