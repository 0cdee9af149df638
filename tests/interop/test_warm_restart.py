"""--warm-restart with real PyTorch (torch 1.13 from Debian; torch 2.x from the venv when there):
a restart's workers are forked from the preloaded pool, and to the script they look as exec'd
ones do; exits, signals and a SIGKILL of ddprun behave as for exec'd workers; a pool that cannot
serve (killed, a preload that starts a thread or touches CUDA) gives one line and exec.
The pool program itself is tested alone in tests/integration/test_warm_pool.py.
Exit 77 (skipped) without torch."""
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

WORKER = os.path.join(lib.INTEROP_DIR, "warm_worker.py")
TIMEOUT = 180
FALLBACK = "warm restart off for the rest of this job: "
# What differs between two runs (or attempts) of one job whatever starts the workers.
PER_RUN = {"MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID"}


class WarmRestartBase(lib.DdprunTestCase):
    """Jobs of warm_worker.py on 2 workers whose rank 1 fails attempt 0 only when released
    (FIFO go_0_1), once both ranks wrote their attempt-0 reports and, in a warm job, once its
    pool said it is ready (or why it is not), so that attempt 1 has a pool to fork from."""
    require_binaries = (lib.DDPRUN,)
    python = lib.SYSTEM_PYTHON

    def start_job(self, name, *actions, warm=True, restarts=1, extra=(), env=None, fifos=(),
                  stdout=subprocess.PIPE):
        reports = self.path(name)
        os.makedirs(reports)
        self.make_fifos(reports, "go_0_1", *fifos)
        args = ["--standalone", "--nproc_per_node=2", "--rdzv-id=warmtest",
                "--max_restarts=%d" % restarts, "--python", self.python,
                "--warm-restart=%s" % ("on" if warm else "off"),
                "--log-dir", self.path("logs_" + name),
                "--event-log", os.path.join(reports, "events.jsonl"), *extra,
                WORKER, reports, "1:wait", *actions]
        env = dict(env or self.env(), LOGLEVEL="INFO")
        stderr = open(os.path.join(reports, "ddprun.stderr"), "w")
        self.addCleanup(stderr.close)
        proc = self.start([lib.DDPRUN] + args, env=env, stdout=stdout, stderr=stderr)
        if warm:
            self.wait_for_log(reports, proc, ("warm pool ready", FALLBACK))
        # Both ranks reported before rank 1 fails: the stop that follows would kill a rank 0
        # still busy before its report (a DataLoader's spawn workers importing torch 2).
        self.wait_for_files([os.path.join(reports, "report_0_%d.json" % r) for r in (0, 1)],
                            timeout=TIMEOUT, proc=proc)
        self.release(reports, "go_0_1")
        return reports, proc

    def finish_job(self, reports, proc):
        try:
            stdout, _ = proc.communicate(timeout=TIMEOUT)
        except Exception:
            lib.killpg_quietly(proc.pid)
            raise
        return lib.Result(proc.argv, proc.returncode, (stdout or b"").decode(errors="replace"),
                          self.log(reports), time.monotonic() - proc.start_time)

    def run_job(self, name, *actions, **options):
        return self.finish_job(*self.start_job(name, *actions, **options))

    def log(self, reports):
        return lib.read_file(os.path.join(reports, "ddprun.stderr"))

    def wait_for_log(self, reports, proc, texts, timeout=TIMEOUT):
        def seen():
            if proc.poll() is not None:
                raise AssertionError("ddprun exited before it logged %s:\n%s" % (
                    texts, self.log(reports)[-3000:]))
            return any(text in self.log(reports) for text in texts)
        lib.wait_for(seen, timeout, "ddprun to log one of %s" % (texts,))

    def report(self, reports, attempt, rank):
        return lib.read_json(os.path.join(reports, "report_%d_%d.json" % (attempt, rank)))

    def starts(self, reports):
        return [r.get("start") for r in self.events(reports) if r["event"] == "workers_started"]

    def events(self, reports):
        with open(os.path.join(reports, "events.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def make_fifos(self, reports, *names):
        for name in names:
            os.mkfifo(os.path.join(reports, name))

    def release(self, reports, name, timeout=60):
        """Writes to a FIFO once its worker reads it (open fails with ENXIO until then)."""
        path = os.path.join(reports, name)

        def opened():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    return False
                raise
            os.write(fd, b"go")
            os.close(fd)
            return True
        lib.wait_for(opened, timeout, "a worker reading %s" % name)

    def pool_pids(self):
        pids = []
        for pid in lib.pids_with_marker(self.marker):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if b"ddprun's warm pool" in f.read():
                        pids.append(pid)
            except OSError:
                pass
        return pids

    @staticmethod
    def cgroup_of(pid):
        """The process's cgroup v2 path ("0::" line), "" when gone or none."""
        try:
            with open("/proc/%d/cgroup" % pid) as f:
                return next((ln[3:].strip() for ln in f if ln.startswith("0::")), "")
        except OSError:
            return ""

    def wait_for_pool(self, proc, timeout=60):
        def ready():
            if proc.poll() is not None:
                raise AssertionError("ddprun exited before its pool started")
            return self.pool_pids()
        lib.wait_for(ready, timeout, "the warm pool to start")
        return self.pool_pids()[0]


class WarmRestartTorch1(WarmRestartBase):
    """The cases, with the workers' torch 1.13 (Debian)."""

    def normalized(self, record, name):
        """`record` with the run's own paths (reports, logs) renamed to X."""
        def rename(text):  # --standalone draws the run id: the run's log dir has it
            text = re.sub(re.escape(self.path("logs_" + name)) + r"/[^/]*", "LOGS/RUN", text)
            return text.replace(self.path(name), self.path("X"))
        env = {k: rename(v) for k, v in record["env"].items() if k not in PER_RUN}
        return dict(record, env=env, argv=[rename(a) for a in record["argv"]])

    def exits(self, reports, attempt):
        return {e["local_rank"]: e["exitcode"] for e in self.events(reports)
                if e["event"] == "worker_exited" and e["restart_count"] == attempt}

    def test_warm_worker_sees_what_a_cold_one_sees(self):
        env = self.env({"WARM_WORKER_FLAGS": "--dataloader"})
        result = self.run_job("cold", warm=False, env=env)
        self.assertExit(result, 0)
        result = self.run_job("warm", env=env)
        self.assertExit(result, 0)
        cold, warm = self.path("cold"), self.path("warm")
        self.assertEqual(self.starts(cold), [["cold", "cold"], ["cold", "cold"]])
        self.assertEqual(self.starts(warm), [["cold", "cold"], ["warm", "warm"]])
        pids = [e for e in self.events(warm) if e["event"] == "workers_started"][1]["pids"]
        for rank in (0, 1):
            before = self.normalized(self.report(cold, 1, rank), "cold")
            after = self.normalized(self.report(warm, 1, rank), "warm")
            self.assertEqual(after["pid"], pids[rank])
            for key in ("env", "argv", "name", "file", "path0", "cwd", "tty", "signals",
                        "nofile", "start_method", "dataloader"):
                self.assertEqual(after[key], before[key], "%s differs (rank %d)" % (key, rank))
            self.assertEqual(after["name"], "__main__")
            self.assertEqual(self.report(warm, 1, rank)["argv"], [WORKER, warm, "1:wait"])
            self.assertEqual((after["sid"], after["pgid"]), (after["pid"], after["pid"]))
            self.assertEqual(after["dataloader"], {"fork": 28.0, "spawn": 28.0})
            # The documented difference: a warm worker's parent is the pool, not ddprun.
            self.assertNotEqual(after["ppid"], self.report(warm, 0, rank)["ppid"])
        self.assertNotEqual(self.report(warm, 1, 0)["random"], self.report(warm, 1, 1)["random"])

    def test_exit_codes_and_signals_as_cold(self):
        for attempt1 in ("1:exit3", "1:sigterm"):
            outcome = {}
            for warm in (False, True):
                name = "%s_%s" % (attempt1.replace(":", "_"), "warm" if warm else "cold")
                result = self.run_job(name, attempt1 + ",0:wait", warm=warm, fifos=("go_1_0",))
                outcome[warm] = (result.returncode, self.exits(self.path(name), 1),
                                 "Signal 15 (SIGTERM)" in result.stderr,
                                 "exitcode  : 3" in result.stderr)
                self.assertEqual(self.starts(self.path(name))[1], ["warm" if warm else "cold"] * 2)
            self.assertEqual(outcome[True], outcome[False], attempt1)
            expected = 3 if attempt1 == "1:exit3" else -signal.SIGTERM
            self.assertEqual(outcome[True][1][1], expected, outcome)

    def test_on_a_terminal_as_cold(self):
        """ddprun's stdout a pseudo-terminal: workers' stdout is one too (the launcher passes a
        pty through), warm as cold."""
        ttys = {}
        for warm in (False, True):
            name = "tty_warm" if warm else "tty_cold"
            master, slave = os.openpty()
            try:
                result = self.finish_job(*self.start_job(name, warm=warm, stdout=slave))
            finally:
                os.close(slave)
                os.close(master)
            self.assertExit(result, 0)
            ttys[warm] = [self.report(self.path(name), 1, rank)["tty"] for rank in (0, 1)]
            self.assertEqual(self.starts(self.path(name))[1], ["warm" if warm else "cold"] * 2)
        self.assertEqual(ttys[True], ttys[False])
        self.assertEqual([tty[1] for tty in ttys[True]], [True, True])

    def test_a_hung_warm_worker_is_found_and_its_stack_shown(self):
        result = self.run_job("hang", "1:hang", extra=("--hang-timeout=3",))
        self.assertExit(result, 128 + signal.SIGABRT)  # the root cause: rank 1's stack dump
        self.assertEqual(self.starts(self.path("hang"))[1], ["warm", "warm"])
        self.assertIn("no progress", result.stderr, result.describe())
        self.assertRegex(result.stderr, r"rank 1 (stuck )?at \S*warm_worker\.py:\d+",
                         result.describe())
        self.assertIn("hang_here", self.log(self.path("hang")) + result.stdout)

    def test_a_warm_workers_error_file_reaches_the_summary(self):
        result = self.run_job("record", "1:raise,0:wait", fifos=("go_1_0",))
        self.assertExit(result, 1)
        self.assertEqual(self.starts(self.path("record"))[1], ["warm", "warm"])
        summary = result.stderr[result.stderr.index("Root Cause"):]
        self.assertIn("warm worker failed on purpose", summary, result.describe())
        self.assertRegex(summary, r"error_file: \S+/attempt_1/1/error.json", result.describe())

    def test_numa_binding_pins_warm_workers_as_cold_ones(self):
        # --numa-binding=exclusive on a CPU-only job: each local rank gets CPUs of its own (with
        # fewer CPUs than ranks, the binding is refused: skipped).
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("fewer than 2 CPUs")
        result = self.run_job("numa", extra=("--numa-binding=exclusive",))
        self.assertExit(result, 0)
        self.assertEqual(self.starts(self.path("numa"))[1], ["warm", "warm"])
        for rank in (0, 1):
            cold = self.report(self.path("numa"), 0, rank)["affinity"]
            self.assertEqual(self.report(self.path("numa"), 1, rank)["affinity"], cold)
        self.assertNotEqual(self.report(self.path("numa"), 1, 0)["affinity"],
                            self.report(self.path("numa"), 1, 1)["affinity"])

    def test_a_warm_workers_file_timer_expires_as_a_cold_ones(self):
        env = self.env({"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})
        result = self.run_job("timer", "1:timer,0:wait", fifos=("go_1_0",), env=env)
        self.assertNotEqual(result.returncode, 0, result.describe())
        self.assertEqual(self.starts(self.path("timer"))[1], ["warm", "warm"])
        self.assertIn("file timer expired", result.stderr, result.describe())
        self.assertIn("warm_step", result.stderr, result.describe())

    def test_the_health_endpoint_counts_warm_workers(self):
        reports, proc = self.start_job("health", "all:wait", fifos=("go_1_0", "go_1_1"),
                                       extra=("--health-port=0",))
        self.wait_for_files([os.path.join(reports, "report_1_%d.json" % r) for r in (0, 1)],
                            timeout=TIMEOUT, proc=proc)
        port = [e for e in self.events(reports) if e["event"] == "health_endpoint"][0]["port"]
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as reply:
            metrics = reply.read().decode()
        self.assertRegex(metrics, r"(?m)^ddprun_workers_running 2(\.0+)?$", metrics[-2000:])
        for rank in (0, 1):
            self.release(reports, "go_1_%d" % rank)
        result = self.finish_job(reports, proc)
        self.assertEqual(self.starts(reports)[1], ["warm", "warm"])
        self.assertNotEqual(result.returncode, 0)  # attempt 1's workers exit 3, no restart left

    def test_sigkill_of_ddprun_leaves_no_pool_worker_or_child(self):
        reports, proc = self.start_job("kill", "all:child", fifos=("go_1_0", "go_1_1"))
        self.wait_for_files([os.path.join(reports, "child_%d" % r) for r in (0, 1)],
                            timeout=TIMEOUT, proc=proc)
        self.assertEqual(self.starts(reports)[1], ["warm", "warm"])
        self.assertTrue(self.pool_pids(), "no pool running")
        job = lib.pids_with_marker(self.marker)
        self.assertGreaterEqual(len(job), 6, job)  # ddprun, keeper, pool, 2 workers, 2 sleeps
        # Where a job cgroup was made (root, cgroup v2 writable): the pool is in it, and so
        # everything it forked (launcher/process/job_cgroup.h).
        pool = self.pool_pids()[0]
        pool_cgroup = self.cgroup_of(pool)
        if "/ddprun-" in pool_cgroup:
            keeper = [p for p in job if lib.read_file("/proc/%d/comm" % p).strip() ==
                      "ddprun-keeper"]
            forked = [p for p in job if p not in [proc.pid, pool] + keeper]
            self.assertEqual({self.cgroup_of(p) for p in forked} - {""}, {pool_cgroup})
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.wait_gone(job, timeout=20, what="the job's processes")

    def test_a_killed_pool_means_exec_from_then_on(self):
        reports = self.path("killed")
        os.makedirs(reports)
        self.make_fifos(reports, "go_0_1")
        # Started by hand: the pool is killed before attempt 0 is released.
        env = dict(self.env(), LOGLEVEL="INFO")
        proc = self.start([lib.DDPRUN, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
                           "--python", self.python, "--warm-restart=on", "--event-log",
                           os.path.join(reports, "events.jsonl"), WORKER, reports, "1:wait"],
                          env=env)
        pool = self.wait_for_pool(proc)
        os.kill(pool, signal.SIGKILL)
        self.release(reports, "go_0_1")
        result = self.finish(proc, timeout=TIMEOUT)
        self.assertExit(result, 0)
        self.assertIn(FALLBACK + "the warm pool was killed by SIGKILL", result.stderr)
        self.assertEqual(self.starts(reports), [["cold", "cold"], ["cold", "cold"]])

    def test_a_pool_dying_under_warm_workers_kills_them_and_the_job_goes_on(self):
        reports, proc = self.start_job("dies", "all:wait", restarts=2,
                                       fifos=("go_1_0", "go_1_1"))
        self.wait_for_files([os.path.join(reports, "report_1_%d.json" % r) for r in (0, 1)],
                            timeout=TIMEOUT, proc=proc)
        os.kill(self.pool_pids()[0], signal.SIGKILL)
        result = self.finish_job(reports, proc)
        self.assertExit(result, 0)
        self.assertEqual(self.starts(reports),
                         [["cold", "cold"], ["warm", "warm"], ["cold", "cold"]])
        self.assertEqual(list(self.exits(reports, 1).values()), [-signal.SIGKILL] * 2,
                         result.describe())
        self.assertIn(FALLBACK, result.stderr)

    def preload_falls_back(self, module_text, expected):
        with open(self.path("warm_preload_probe.py"), "w") as f:
            f.write(module_text)
        env = self.env({"PYTHONPATH": self.tmp})
        result = self.run_job("preload", env=env, extra=("--warm-preload=warm_preload_probe",))
        self.assertExit(result, 0)
        self.assertIn(FALLBACK, result.stderr)
        line = [ln for ln in result.stderr.splitlines() if FALLBACK in ln][0]
        self.assertIn(expected, line)
        self.assertEqual(self.starts(self.path("preload"))[1], ["cold", "cold"])

    def test_a_preload_that_starts_a_thread_falls_back(self):
        self.preload_falls_back(
            "import threading\n_stop = threading.Event()\n"
            "threading.Thread(target=_stop.wait, name='probe-thread', daemon=True).start()\n",
            "thread")

    def test_a_preload_that_touches_cuda_falls_back(self):
        # No GPU here: the preload makes torch say CUDA is initialised, which is what the pool
        # checks after each import.
        self.preload_falls_back("import torch\ntorch.cuda.is_initialized = lambda: True\n",
                                "CUDA")


@unittest.skipUnless(os.access(lib.torch2_python(), os.X_OK), "no torch 2.x venv")
class WarmRestartTorch2(WarmRestartTorch1):
    """The same cases with the workers' torch 2.x (scripts/setup-torch2-venv.sh)."""
    python = lib.torch2_python()


if __name__ == "__main__":
    unittest.main()
