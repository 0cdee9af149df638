"""GitHub issue 10's acceptance test: elastic training with real PyTorch (gloo, env://, CPU) on
simulated hosts. Each host is a network namespace with one veth into a Linux bridge
(lib.NetnsHosts, 10.213.8.0/24); each runs one ddprun agent (--rdzv_backend=c10d, 2 workers)
with --local_addr set to its own address and GLOO_SOCKET_IFNAME to its veth (gloo would
otherwise bind the address of the host name, loopback here). Host 0's agent serves the
rendezvous store. The workers run train_elastic.py: a fixed number of global steps, checkpoints
every CKPT_EVERY steps to a shared directory, resume from the latest one, and rank 0 logs one
JSON line per step to steps.log (world size, restart count, group).

Scenarios (hosts 0..2 start in each):
- a node lost: host 2's agent and workers are SIGKILLed mid-run; the two others go on at world
  size 4 from the last checkpoint, within the keep-alive timeout + last call + the script's own
  start-up (+ margin), without spending a restart;
- a node arriving: host 3's agent starts mid-run; the group grows to world size 8 (--nnodes=2:4
  there: with 2:3 a fourth 2-worker node could never join), without spending a restart;
- a worker failing on every attempt: the job ends after exactly --max_restarts restarts, every
  agent exits with the worker's code (3) and prints the root-cause summary.

Skipped (exit 77) without torch; its tests skip without root/`ip netns`. Timings are printed.
"""
import glob
import json
import os
import subprocess
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

TRAIN = os.path.join(lib.INTEROP_DIR, "train_elastic.py")
HOSTS = 4
NPROC = 2
RDZV_PORT = 29500  # in host 0's namespace: no clash with anything outside it
MAX_RESTARTS = 3
KEEP_ALIVE_INTERVAL = 1
KEEP_ALIVE_MAX_ATTEMPT = 3
LAST_CALL = 2
RDZV_CONF = ("keep_alive_interval=%d,keep_alive_max_attempt=%d,last_call_timeout=%d,"
             "join_timeout=60" % (KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, LAST_CALL))
HEARTBEAT_TIMEOUT = KEEP_ALIVE_INTERVAL * KEEP_ALIVE_MAX_ATTEMPT
STEPS = 40
CKPT_EVERY = 5
STEP_SLEEP = 0.2
# What kill -> first step of the new group may take beyond heartbeat timeout + last call + the
# script's own start-up on this 2-core machine: stopping the survivors' old workers (SIGTERM),
# the rendezvous round trips, spawning 4 interpreters while the CPU is shared with the agents and
# the test itself, and the jitter of a start-up measured on another group (6 workers then).
MARGIN = 5.0
HOST_VAR = "DDPRUN_TEST_HOST"
JOB_TIMEOUT = 180  # one scenario's agents, start to exit
PROGRESS_TIMEOUT = 120  # a wait for training progress (torch imports on 2 cores)


@unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
class ElasticNetnsTest(lib.DdprunTestCase):

    require_binaries = (lib.DDPRUN,)

    def setUp(self):
        super().setUp()
        self.hosts = lib.NetnsHosts(HOSTS)
        self.addCleanup(self._remove_hosts)  # runs before the base class's process cleanup
        self.hosts.create()
        self.rdzv_id = "elastic-netns-%s" % uuid.uuid4().hex[:8]
        self.job_dir = self.path("job")
        os.mkdir(self.job_dir)
        self.steps_log = os.path.join(self.job_dir, "steps.log")
        self.agents = {}

    def _remove_hosts(self):
        self._cleanup_processes()  # every process first (idempotent), then the namespaces
        self.hosts.remove()

    # -- agents --------------------------------------------------------------------------------

    def start_agent(self, host, nnodes="2:3", script_args=()):
        out_path, err_path = self.path("agent%d.out" % host), self.path("agent%d.err" % host)
        env = self.env({"GLOO_SOCKET_IFNAME": self.hosts.devices[host], HOST_VAR: str(host)})
        args = self.hosts.exec_prefix(host) + [
            lib.DDPRUN, "--nnodes=%s" % nnodes, "--nproc_per_node=%d" % NPROC,
            "--rdzv_backend=c10d", "--rdzv_endpoint=%s:%d" % (self.hosts.addresses[0], RDZV_PORT),
            "--rdzv_id=%s" % self.rdzv_id, "--max_restarts=%d" % MAX_RESTARTS,
            "--rdzv_conf=%s" % RDZV_CONF, "--local_addr=%s" % self.hosts.addresses[host],
            "--python", lib.SYSTEM_PYTHON, TRAIN, self.job_dir, "--steps", str(STEPS),
            "--ckpt-every", str(CKPT_EVERY), "--sleep", str(STEP_SLEEP)] + list(script_args)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = self.start(args, env=env, stdout=out, stderr=err)
        proc.host, proc.out_path, proc.err_path = host, out_path, err_path
        self.agents[host] = proc
        return proc

    def start_hosts(self, count=3, nnodes="2:3", script_args=()):
        """Host 0 first (it serves the rendezvous store), then the others once it listens."""
        first = self.start_agent(0, nnodes, script_args)
        lib.wait_for(lambda: self._listening(first), 30,
                     "host 0's rendezvous store on port %d" % RDZV_PORT)
        return [first] + [self.start_agent(h, nnodes, script_args) for h in range(1, count)]

    def _listening(self, proc):
        self._fail_if_exited()
        # /proc/PID/net/tcp* list the sockets of PID's network namespace (state 0A: LISTEN).
        lines = []
        for table in ("tcp", "tcp6"):  # a dual-stack listener is in tcp6
            try:
                with open("/proc/%d/net/%s" % (proc.pid, table)) as f:
                    lines += f.read().splitlines()[1:]
            except OSError:
                pass
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == RDZV_PORT:
                return True
        return False

    def _fail_if_exited(self, allowed=()):
        for host, proc in self.agents.items():
            if host not in allowed and proc.poll() is not None:
                self.fail("the agent of host %d exited early (%s)\n%s" % (
                    host, proc.returncode, self.describe_agents()))

    def finish_agent(self, proc, timeout=JOB_TIMEOUT):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            lib.killpg_quietly(proc.pid)
            lib.kill_quietly(proc.pid)
            proc.wait(timeout=30)
            self.fail("the agent of host %d did not exit within %.0f s\n%s" % (
                proc.host, timeout, self.describe_agents()))
        return lib.Result(proc.argv, proc.returncode, lib.read_file(proc.out_path),
                          lib.read_file(proc.err_path), time.monotonic() - proc.start_time)

    def finish_all(self, procs, timeout=JOB_TIMEOUT):
        deadline = time.monotonic() + timeout
        return [self.finish_agent(p, max(1.0, deadline - time.monotonic())) for p in procs]

    def describe_agents(self):
        parts = []
        for host, proc in sorted(self.agents.items()):
            err = lib.read_file(proc.err_path) if os.path.exists(proc.err_path) else ""
            parts.append("--- host %d (%s, exit %s) stderr tail ---\n%s" % (
                host, self.hosts.addresses[host], proc.poll(), err[-3000:]))
        parts.append("--- steps.log tail ---\n%s" % "\n".join(
            json.dumps(e) for e in self.steps()[-8:]))
        return "\n".join(parts)

    def pids_of_host(self, host):
        needle = ("%s=%d" % (HOST_VAR, host)).encode()
        pids = []
        for pid in lib.pids_with_marker(self.marker):
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(pid)
            except OSError:
                pass
        return pids

    def assertNoLeftovers(self):
        self.wait_gone(lib.pids_with_marker(self.marker), 15, "leftover processes on any host")

    # -- what the workers wrote ----------------------------------------------------------------

    def steps(self):
        if not os.path.exists(self.steps_log):
            return []
        entries = []
        for line in lib.read_file(self.steps_log).splitlines():
            if line.strip():
                entries.append(json.loads(line))
        return entries

    def started(self):
        records = []
        for path in glob.glob(os.path.join(self.job_dir, "started_*")):
            if ".tmp." not in path:
                records.append(lib.read_json(path))
        return records

    def wait_step(self, condition, what, allowed_exits=()):
        def ready():
            self._fail_if_exited(allowed_exits)
            return next((e for e in self.steps() if condition(e)), None)
        return lib.wait_for(ready, PROGRESS_TIMEOUT, what, interval=0.05)

    def check_history(self, entries):
        """Segments of steps.log by group; each new group resumes at the latest checkpoint, and
        the steps that count (each group's, minus those a later group redid) are 0..STEPS-1,
        each exactly once."""
        history, segments = [], []
        for entry in entries:
            if not segments or segments[-1][0]["group"] != entry["group"]:
                done = len(history)
                latest = done // CKPT_EVERY * CKPT_EVERY
                # The log line precedes the checkpoint: a group stopped in between leaves the
                # previous checkpoint as the latest one.
                self.assertIn(entry["step"], (latest, max(0, latest - CKPT_EVERY)),
                              "group %s did not resume from the latest checkpoint (%d steps "
                              "done)\n%s" % (entry["group"], done, self.describe_agents()))
                del history[entry["step"]:]
                segments.append([])
            self.assertEqual(entry["step"], len(history), "a step is missing or repeated within "
                             "group %s\n%s" % (entry["group"], self.describe_agents()))
            history.append(entry)
            segments[-1].append(entry)
        self.assertEqual([e["step"] for e in history], list(range(STEPS)),
                         "steps.log does not cover every step exactly once")
        for segment in segments:
            self.assertEqual(len({e["world_size"] for e in segment}), 1)
        return segments

    @staticmethod
    def startup(records):
        """The script's own start-up (spawn -> first step), worst worker of `records`."""
        times = [r["first_step"] - r["spawn"] for r in records if "first_step" in r]
        return max(times) if times else None

    # -- scenarios -----------------------------------------------------------------------------

    def test_a_lost_node_survivors_resume_at_world_size_4(self):
        procs = self.start_hosts(3)
        kill_at = 2 * CKPT_EVERY + 2  # mid-interval: the survivors redo the steps after 10
        before = self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= kill_at,
                                "step %d at world size 6" % kill_at)
        old_group = before["group"]
        victims = self.pids_of_host(2)
        agent = procs[2].pid
        self.assertIn(agent, victims)
        self.assertEqual(len(victims), 1 + NPROC, "host 2's agent and workers: %s" % victims)
        killed_at = time.time()
        lib.kill_quietly(agent)  # the agent first, so that it cannot react; then its workers
        for pid in victims:
            lib.kill_quietly(pid)
        self.wait_gone(victims, 10, "host 2's agent and workers")

        results = self.finish_all(procs[:2])
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        procs[2].wait(timeout=10)
        self.assertNoLeftovers()

        entries = self.steps()
        records = self.started()
        after = [e for e in entries if e["group"] != old_group and e["t"] > killed_at]
        self.assertTrue(after, "no step after the kill\n" + self.describe_agents())
        new_group = after[0]["group"]
        first = [r for r in records if r["group"] == old_group]
        second = [r for r in records if r["group"] == new_group]
        # Timings first (they go into the test log whatever the checks below say).
        startup_first, startup_second = self.startup(first), self.startup(second)
        startup = max(startup_first, startup_second)
        resumed = after[0]["t"] - killed_at
        respawned = min(r["spawn"] for r in second) - killed_at
        budget = HEARTBEAT_TIMEOUT + LAST_CALL + startup + MARGIN
        print("\n[lost node] kill -> first step at world size %d: %.2f s (kill -> new workers "
              "spawned %.2f s; start-up spawn -> first step: first group (6 workers) %.2f s, "
              "new group (4 workers) %.2f s); budget %.2f s = keep-alive %d x %d + last call %d "
              "+ start-up %.2f + margin %.1f; resumed at step %d after step %d; restart counts "
              "logged: %s" % (
                  after[0]["world_size"], resumed, respawned, startup_first, startup_second,
                  budget, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, LAST_CALL, startup, MARGIN,
                  after[0]["step"], max(e["step"] for e in entries if e["group"] == old_group),
                  sorted({e["restart_count"] for e in entries})))

        segments = self.check_history(entries)
        self.assertEqual(len(segments), 2, "expected the first group and one after the kill: %s"
                         % [(s[0]["group"], s[0]["world_size"], s[0]["step"]) for s in segments])
        self.assertEqual(entries[-1]["world_size"], NPROC * 2, self.describe_agents())
        self.assertEqual(len(first), 3 * NPROC)
        self.assertEqual(len(second), 2 * NPROC)
        self.assertNotIn("2", {r["host"] for r in second})
        self.assertLessEqual(resumed, budget, self.describe_agents())
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a lost node spent a failure restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})

    def test_b_new_node_grows_the_group_to_world_size_8(self):
        nnodes = "2:4"  # a 4th node of 2 workers: world size 8
        procs = self.start_hosts(3, nnodes)
        self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= CKPT_EVERY + 2,
                       "step %d at world size 6" % (CKPT_EVERY + 2))
        joined_at = time.time()
        procs.append(self.start_agent(3, nnodes))
        grown = self.wait_step(lambda e: e["world_size"] == 8, "a step at world size 8")
        results = self.finish_all(procs)
        entries = self.steps()
        records = self.started()
        new = [r for r in records if r["group"] == grown["group"]]
        print("\n[new node] agent of host 3 started -> first step at world size 8: %.2f s "
              "(-> new workers spawned %.2f s; their start-up %.2f s); resumed at step %d; "
              "restart counts logged: %s" % (
                  grown["t"] - joined_at, min(r["spawn"] for r in new) - joined_at,
                  self.startup(new), grown["step"], sorted({e["restart_count"] for e in entries})))

        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.assertNoLeftovers()
        self.check_history(entries)
        self.assertEqual(entries[-1]["world_size"], 8, self.describe_agents())
        self.assertEqual(sorted(r["host"] for r in new), sorted(["0", "1", "2", "3"] * NPROC))
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a new node spent a failure restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})

    def test_c_failing_worker_ends_the_job_after_max_restarts(self):
        fail_step = 3  # < CKPT_EVERY: no checkpoint gets past it, every attempt fails there
        started_at = time.monotonic()
        procs = self.start_hosts(3, script_args=("--fail-rank", "1", "--fail-step",
                                                 str(fail_step), "--fail-code", "3"))
        results = self.finish_all(procs)
        elapsed = time.monotonic() - started_at
        for result in results:
            self.assertExit(result, 3)
            self.assertIn("Root Cause", result.stderr, result.describe())
            self.assertNoLauncherTraceback(result)
        self.assertNoLeftovers()

        records = self.started()
        counts = sorted(r["restart_count"] for r in records if r["rank"] == 1)
        self.assertEqual(sorted(set(r["restart_count"] for r in records)),
                         list(range(MAX_RESTARTS + 1)),
                         "attempts: %s\n%s" % (counts, self.describe_agents()))
        self.assertEqual(sorted(set(counts)), list(range(MAX_RESTARTS + 1)))
        entries = self.steps()
        self.assertEqual(max(e["restart_count"] for e in entries), MAX_RESTARTS)
        self.assertTrue(all(e["step"] < fail_step for e in entries), self.describe_agents())
        print("\n[failing worker] %d attempts (restart counts of rank 1's workers: %s), "
              "all %d agents exited 3 after %.1f s" % (len(counts), counts, len(results),
                                                      elapsed))


if __name__ == "__main__":
    unittest.main()
