"""Shared helpers for ddprun's process-level and end-to-end tests (stdlib only).

- Paths: DDPRUN (the launcher) and FAKE_WORKER, under $DDPRUN_BUILD_DIR (default: <repo>/build);
  $DDPRUN_LAUNCHER names another launcher to test (the wheel's, installed: tests/wheel/), whose
  ddprun-launch is the one beside it.
- DdprunTestCase: a temp dir per test, a unique marker variable in every launched environment,
  and a tearDown that SIGKILLs every leftover process carrying that marker (workers run in
  their own process groups, so killing the launcher's group is not enough).
- No sleeps as synchronisation: wait_for() polls a condition until a deadline.
- SourceTreeCopy: a copy of some of the repository's folders to edit, for the tests of the
  source checks in scripts/ (layers, clock reads, format).
- Process state comes from /proc/PID/stat; a zombie (Z) or a missing entry counts as dead,
  because a PDEATHSIG-killed worker stays a zombie under PID 1 for about a second.
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.path.abspath(os.environ.get("DDPRUN_BUILD_DIR", os.path.join(REPO_ROOT, "build")))
DDPRUN = os.path.abspath(os.environ.get("DDPRUN_LAUNCHER")
                         or os.path.join(BUILD_DIR, "launcher", "ddprun"))
# A link to ddprun: started under this name it stands in for torch.distributed.launch.
DDPRUN_LAUNCH = os.path.join(os.path.dirname(DDPRUN), "ddprun-launch")
FAKE_WORKER = os.path.join(BUILD_DIR, "tests", "fake_worker")
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's interpreter, the one with torch (if installed)
MARKER_VAR = "DDPRUN_TEST_MARKER"

DEFAULT_TIMEOUT = 60.0


def wait_for(condition, timeout, what, interval=0.01):
    """Polls condition() until it returns a truthy value (returned) or raises AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def run_checked(argv, timeout, check=True, **kwargs):
    """Runs argv to its end, its output captured as text; with `check`, a non-zero exit raises
    AssertionError naming the command, its status and its output."""
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError("%s exited %d\nstdout:\n%s\nstderr:\n%s" % (
            " ".join(argv), result.returncode, result.stdout, result.stderr))
    return result


def proc_state(pid):
    """State letter from /proc/PID/stat (R, S, D, Z, ...), or None if there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may contain spaces: the state follows the last ')'.
    return data[data.rindex(")") + 2]


def is_alive(pid):
    return proc_state(pid) not in (None, "Z", "X")


def proc_pgid(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(data[data.rindex(")") + 2:].split()[2])


def read_file(path):
    with open(path, "r", errors="replace") as f:
        return f.read()


def read_int_file(path):
    return int(read_file(path).strip())


def read_json(path):
    with open(path) as f:
        return json.load(f)


def pids_with_marker(marker):
    """Every process whose environment holds MARKER_VAR=marker (the launcher and its tree)."""
    needle = ("%s=%s" % (MARKER_VAR, marker)).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == os.getpid():
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(pid)
    return found


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def killpg_quietly(pgid, sig=signal.SIGKILL):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def job_cgroup_parents():
    """Where ddprun makes its job cgroups (launcher/process/job_cgroup.h) when started from this
    process: its own cgroup v2 directory under each cgroup2 mount; [] without cgroup v2."""
    try:
        with open("/proc/self/cgroup") as f:
            own = next((ln[3:].strip() for ln in f if ln.startswith("0::")), None)
        with open("/proc/self/mountinfo") as f:
            mounts = [ln.split() for ln in f if " - cgroup2 " in ln]
    except OSError:
        return []
    if own is None:
        return []
    parents = []
    for fields in mounts:  # fields[3]: the mount's root, fields[4]: where it is mounted
        root, point = fields[3], fields[4]
        if own == root or own.startswith(root.rstrip("/") + "/"):
            parents.append(os.path.normpath(os.path.join(point, os.path.relpath(own, root))))
    return parents


def remove_job_cgroups(launcher_pids):
    """Removes the empty job cgroups of these launchers (ddprun-<pid>-*): a test that SIGKILLs a
    launcher and its session keeper together leaves one, as documented; tests clean up."""
    for parent in job_cgroup_parents():
        for pid in launcher_pids:
            for path in glob.glob(os.path.join(parent, "ddprun-%d-*" % pid)):
                try:
                    os.rmdir(path)
                except OSError:
                    pass


def clean_env(extra=None, drop=()):
    """The test runner's environment without launcher-influencing variables, plus `extra`."""
    env = {}
    for key, value in os.environ.items():
        if key.startswith("PET_") or key.startswith("TORCHELASTIC_") or key in (
                "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
                "LOGLEVEL", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "DDPRUN_PYTHON",
                "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK",
                "WORLD_SIZE", "DDPRUN_JOB_CGROUP"):
            continue
        env[key] = value
    for key in drop:
        env.pop(key, None)
    # DDPRUN_TEST_WARM_RESTART=on|off runs a suite with warm restart forced on or off (issue 40:
    # it is on by default since the whole suite passed forced on).
    if os.environ.get("DDPRUN_TEST_WARM_RESTART"):
        env["PET_WARM_RESTART"] = os.environ["DDPRUN_TEST_WARM_RESTART"]
    env.update(extra or {})
    return env


class Result:
    """What a finished launcher run produced."""

    def __init__(self, args, returncode, stdout, stderr, elapsed):
        self.args = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed

    def describe(self):
        return "command: %s\nexit code: %s (%.2f s)\n--- stdout (tail) ---\n%s\n--- stderr ---\n%s" % (
            " ".join(self.args), self.returncode, self.elapsed, self.stdout[-3000:],
            self.stderr[-6000:])


class DdprunTestCase(unittest.TestCase):
    """Base class: temp dir, marker env, bounded runs, leftover-process cleanup."""

    require_binaries = (DDPRUN, FAKE_WORKER)

    @classmethod
    def setUpClass(cls):
        for path in cls.require_binaries:
            if not os.access(path, os.X_OK):
                raise AssertionError("%s is missing: build it first (DDPRUN_BUILD_DIR=%s)" %
                                     (path, BUILD_DIR))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ddprun_test_")
        self.marker = uuid.uuid4().hex
        self._procs = []
        self.addCleanup(self._cleanup_processes)

    def _cleanup_processes(self):
        for proc in self._procs:
            if proc.poll() is None:
                killpg_quietly(proc.pid)
                kill_quietly(proc.pid)
        # Workers are group leaders of their own groups: kill each group, then each straggler.
        for _ in range(3):
            pids = pids_with_marker(self.marker)
            if not pids:
                break
            for pid in pids:
                pgid = proc_pgid(pid)
                if pgid is not None and pgid > 1 and pgid != os.getpgid(0):
                    killpg_quietly(pgid)
                kill_quietly(pid)
            time.sleep(0.05)
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        remove_job_cgroups([proc.pid for proc in self._procs])
        self._rmtree(self.tmp)

    @staticmethod
    def _rmtree(path):
        import shutil
        shutil.rmtree(path, ignore_errors=True)

    # -- paths ---------------------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    # -- launching -----------------------------------------------------------------------------

    def env(self, extra=None, drop=()):
        env = clean_env(extra, drop)
        env[MARKER_VAR] = self.marker
        return env

    def start(self, args, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        """Starts the launcher in its own session (so a test signal reaches only it)."""
        proc = subprocess.Popen(args, env=env if env is not None else self.env(),
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                start_new_session=True, cwd=self.tmp)
        proc.start_time = time.monotonic()
        proc.argv = [str(a) for a in args]
        self._procs.append(proc)
        return proc

    def finish(self, proc, timeout=DEFAULT_TIMEOUT):
        """Waits for a started launcher, collecting its output; fails (after a kill) on timeout."""
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            killpg_quietly(proc.pid)
            stdout, stderr = proc.communicate()
            result = Result(proc.argv, None, _text(stdout), _text(stderr),
                            time.monotonic() - proc.start_time)
            self.fail("launcher did not exit within %.0f s\n%s" % (timeout, result.describe()))
        return Result(proc.argv, proc.returncode, _text(stdout), _text(stderr),
                      time.monotonic() - proc.start_time)

    def run_launcher(self, args, env=None, timeout=DEFAULT_TIMEOUT):
        return self.finish(self.start(args, env=env), timeout=timeout)

    def ddprun(self, *args, env=None, timeout=DEFAULT_TIMEOUT):
        return self.run_launcher([DDPRUN] + [str(a) for a in args], env=env, timeout=timeout)

    def start_ddprun(self, *args, env=None):
        return self.start([DDPRUN] + [str(a) for a in args], env=env)

    # -- waiting -------------------------------------------------------------------------------

    def wait_for_files(self, paths, timeout=30.0, proc=None):
        """Waits until every path exists; fails early if `proc` (the launcher) exits first."""
        def ready():
            if proc is not None and proc.poll() is not None:
                missing = [p for p in paths if not os.path.exists(p)]
                if missing:
                    out, err = proc.communicate()
                    raise AssertionError("launcher exited (%s) before %s appeared\nstdout:\n%s\n"
                                         "stderr:\n%s" % (proc.returncode, missing, _text(out)[-2000:],
                                                          _text(err)[-4000:]))
            return all(os.path.exists(p) for p in paths)
        wait_for(ready, timeout, "files %s" % ", ".join(os.path.basename(p) for p in paths))

    def wait_gone(self, pids, timeout, what="processes"):
        wait_for(lambda: not [p for p in pids if is_alive(p)], timeout,
                 "%s %s to be gone (alive: %s)" % (what, pids, [p for p in pids if is_alive(p)]))

    def assertExit(self, result, code):
        self.assertEqual(result.returncode, code, "unexpected exit code\n" + result.describe())

    def assertNoLauncherTraceback(self, result):
        for bad in ("terminate called", "what():", "Segmentation fault", "core dumped",
                    "AddressSanitizer", "std::exception"):
            self.assertNotIn(bad, result.stderr, result.describe())


class SourceTreeCopy:
    """Mixin for a unittest.TestCase: copy_tree() puts the named repository folders (and files)
    into a temp dir (self.tmp, removed after the test), edit() changes one file of the copy, and
    run_script()/assert_script_refuses() run a source check of scripts/ on a tree."""

    def copy_tree(self, prefix, folders, ignore=()):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        for name in folders:
            source, target = os.path.join(REPO_ROOT, name), os.path.join(self.tmp, name)
            if os.path.isdir(source):
                shutil.copytree(source, target, ignore=shutil.ignore_patterns(*ignore))
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy(source, target)

    def edit(self, rel, old, new):
        """Replaces the first `old` in the copy's `rel` (which must hold it) by `new`."""
        path = os.path.join(self.tmp, rel)
        with open(path) as f:
            text = f.read()
        self.assertIn(old, text, rel)
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))

    @staticmethod
    def run_script(script, root, timeout=60):
        return subprocess.run([sys.executable, os.path.join(REPO_ROOT, "scripts", script), root],
                              capture_output=True, text=True, timeout=timeout)

    def assert_script_refuses(self, result, summary, *expected):
        """The check exited 1, said each of `expected` on stdout and `summary` on stderr."""
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        for text in expected:
            self.assertIn(text, result.stdout)
        self.assertIn(summary, result.stderr)


def _text(data):
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data


def glob_one(test, pattern):
    matches = sorted(glob.glob(pattern))
    test.assertEqual(len(matches), 1, "expected exactly one match for %s, got %s" % (pattern, matches))
    return matches[0]


# -- interop helpers (real PyTorch; Debian's torch 1.13 for /usr/bin/python3) ------------------

TORCHRUN = "/usr/bin/torchrun"
INTEROP_DIR = os.path.join(REPO_ROOT, "tests", "interop")
SKIP_EXIT_CODE = 77  # CTest SKIP_RETURN_CODE


def system_python_has_torch():
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    try:
        return subprocess.run([SYSTEM_PYTHON, "-c", "import torch, torch.distributed"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def exit_if_no_torch():
    """Interop modules call this at import: exit 77 (CTest 'skipped') without torch."""
    if not system_python_has_torch():
        print("skipped: %s cannot import torch" % SYSTEM_PYTHON)
        raise SystemExit(SKIP_EXIT_CODE)


def torchrun_available():
    return os.path.exists(TORCHRUN)


def torchrun_prefix():
    """How to run Debian's torchrun 1.13 as the reference launcher.

    - through /usr/bin/python3 explicitly (the first python3 on PATH may lack torch);
    - -r 1 -t 1: with Python 3.11, torchrun 1.13 crashes for redirect/tee values 0 and 3 (its
      Std IntFlag iteration yields only 1 and 2), so stdout is redirected and tee'd; the same
      flags are given to ddprun so that the command lines stay identical;
    - --monitor_interval=0.1: 1.13's default is 5 s (current torchrun: 0.1 s).
    """
    return [SYSTEM_PYTHON, TORCHRUN]


def torch_major(python):
    """The major version of the torch `python` imports; None without one."""
    if not python or not os.access(python, os.X_OK):
        return None
    try:
        out = subprocess.run([python, "-c", "import torch, torch.distributed as d; "
                              "print(torch.__version__)"], capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return int(out.stdout.split(".")[0]) if out.returncode == 0 else None


def torch2_python():
    """$DDPRUN_TORCH2_PYTHON, else the path in <build>/torch2-python, else the default venv."""
    if os.environ.get("DDPRUN_TORCH2_PYTHON"):
        return os.environ["DDPRUN_TORCH2_PYTHON"]
    try:
        with open(os.path.join(BUILD_DIR, "torch2-python")) as f:
            path = f.read().strip()
        if path:
            return path
    except OSError:
        pass
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "ddprun", "torch2-venv", "bin", "python")


TORCHRUN_COMPAT_FLAGS = ["--monitor_interval=0.1", "-r", "1", "-t", "1"]


class PortLock:
    """A machine-wide lock (flock) around uses of a fixed port, e.g. torchrun 1.13's
    --standalone, which always hosts its store on localhost:29400."""

    def __init__(self, port):
        self.path = os.path.join(tempfile.gettempdir(), "ddprun-tests-port-%d.lock" % port)
        self.port = port
        self.fd = None

    def __enter__(self):
        import fcntl
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + 300
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError("could not lock %s" % self.path)
                time.sleep(0.1)

    def __exit__(self, *exc):
        os.close(self.fd)
        self.fd = None


def port_is_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore does
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def can_create_netns():
    """True when this process may create network namespaces (root and a working `ip netns`)."""
    if os.geteuid() != 0:
        return False
    name = "ddpchk%s" % uuid.uuid4().hex[:6]
    ok = subprocess.run(["ip", "netns", "add", name], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return ok


class NetnsPair:
    """Two simulated hosts: network namespaces joined by a veth pair, host n at 10.213.7.(n+1).
    Register remove() as a test cleanup right after creating it (it also runs on failure)."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.names = ["ddpA%s" % tag, "ddpB%s" % tag]
        self.devices = ["vA%s" % tag, "vB%s" % tag]
        self.addresses = ["10.213.7.1", "10.213.7.2"]

    def create(self):
        for ns in self.names:
            self._ip("netns", "add", ns)
        self._ip("link", "add", self.devices[0], "type", "veth", "peer", "name", self.devices[1])
        for ns, dev, addr in zip(self.names, self.devices, self.addresses):
            self._ip("link", "set", dev, "netns", ns)
            self._ip("-n", ns, "addr", "add", addr + "/24", "dev", dev)
            self._ip("-n", ns, "link", "set", dev, "up")
            self._ip("-n", ns, "link", "set", "lo", "up")

    def remove(self):
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)

    @staticmethod
    def set_link(namespace, device, state):
        """Brings a host's veth end "up" or "down" (a cable pulled: no FIN, no RST)."""
        NetnsPair._ip("-n", namespace, "link", "set", device, state)

    def exec_prefix(self, host):
        return ["ip", "netns", "exec", self.names[host]]

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip"] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=30)


class NetnsHosts:
    """N simulated hosts: network namespaces, each with one veth end (address 10.213.8.(n+1)/24)
    whose peer is a port of a Linux bridge living in a namespace of its own (nothing is added to
    the root namespace). Register remove() as a test cleanup right after constructing it: it
    deletes every namespace this object created (their veths and the bridge go with them), also
    after a partial create()."""

    SUBNET = "10.213.8"

    def __init__(self, count):
        if not 1 <= count <= 250:
            raise ValueError("1..250 hosts")
        tag = uuid.uuid4().hex[:6]
        self.bridge_namespace = "ddpBr%s" % tag
        self.bridge = "br%s" % tag
        self.names = ["ddpH%d%s" % (n, tag) for n in range(count)]
        self.devices = ["vh%d%s" % (n, tag) for n in range(count)]       # in each host
        self.bridge_ports = ["vp%d%s" % (n, tag) for n in range(count)]  # their bridge ends
        self.addresses = ["%s.%d" % (self.SUBNET, n + 1) for n in range(count)]
        self._created = []

    def create(self):
        br_ns = self.bridge_namespace
        self._add_namespace(br_ns)
        self._ip("-n", br_ns, "link", "add", self.bridge, "type", "bridge", "forward_delay", "0",
                 "stp_state", "0")
        self._ip("-n", br_ns, "link", "set", self.bridge, "up")
        self._ip("-n", br_ns, "link", "set", "lo", "up")
        for ns, dev, port, addr in zip(self.names, self.devices, self.bridge_ports,
                                       self.addresses):
            self._add_namespace(ns)
            # Both ends are created inside the bridge's namespace, then one moves to the host.
            self._ip("-n", br_ns, "link", "add", port, "type", "veth", "peer", "name", dev)
            self._ip("-n", br_ns, "link", "set", dev, "netns", ns)
            self._ip("-n", br_ns, "link", "set", port, "master", self.bridge)
            self._ip("-n", br_ns, "link", "set", port, "up")
            self._ip("-n", ns, "addr", "add", addr + "/24", "dev", dev)
            self._ip("-n", ns, "link", "set", dev, "up")
            self._ip("-n", ns, "link", "set", "lo", "up")

    def remove(self):
        for ns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
        self._created = []

    def set_link(self, host, state):
        """Brings host n's veth end "up" or "down" (a cable pulled: no FIN, no RST)."""
        self._ip("-n", self.names[host], "link", "set", self.devices[host], state)

    def exec_prefix(self, host):
        return ["ip", "netns", "exec", self.names[host]]

    def _add_namespace(self, ns):
        self._ip("netns", "add", ns)
        self._created.append(ns)

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip"] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=30)
