"""Shared part of the interop tests that run elastic training with real PyTorch (gloo, env://,
CPU) on simulated hosts: test_elastic_netns.py and test_failover_netns.py. Not a test module
itself (no test_ prefix, so CTest's interop/test_*.py glob leaves it out; NetnsTrainingTest has
no test_ methods).

Each host is a network namespace with one veth into a Linux bridge (lib.NetnsHosts,
10.213.8.0/24); each runs one ddprun agent (--rdzv_backend=c10d, NPROC workers) with
--local_addr set to its own address, GLOO_SOCKET_IFNAME to its veth (gloo would otherwise bind
the address of the host name, loopback here) and the endpoint list of the first ENDPOINT_HOSTS
hosts at port RDZV_PORT. Host 0 (the first endpoint) serves the rendezvous store. The workers
run train_elastic.py: a fixed number of global steps, checkpoints every CKPT_EVERY steps to a
shared directory, resume from the latest one, and rank 0 logs one JSON line per step to
steps.log (world size, restart count, group).

NetnsTrainingTest provides the hosts, starting and finishing the agents, killing a host, and
reading and checking what the workers wrote; a subclass sets RDZV_ID_PREFIX and, where it
differs, ENDPOINT_HOSTS, and may add launcher arguments per host (agent_args) and lines per host
to the failure descriptions (describe_host). This module puts tests/integration on sys.path and
imports ddprun_testlib as lib; a test module imports lib from here, calls lib.exit_if_no_torch()
and marks its class skipUnless(lib.can_create_netns()).
"""
import glob
import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

TRAIN = os.path.join(lib.INTEROP_DIR, "train_elastic.py")
STORE_TOOL = os.path.join(lib.BUILD_DIR, "tools", "ddprun-store")
HOSTS = 4
NPROC = 2
RDZV_PORT = 29500  # in each host's namespace: no clash with anything outside them
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
HOST_VAR = "DDPRUN_TEST_HOST"
# Deadlines that bound start-ups (6 to 8 workers importing torch at once on 2 cores, cold after a
# dropped page cache, beside other tests) cost time only when a scenario is broken: generous.
JOB_TIMEOUT = 300  # one scenario's agents, start to exit (test_c: 4 attempts, each a start-up)
PROGRESS_TIMEOUT = 240  # a wait for training progress (a group's start-up included)


class NetnsTrainingTest(lib.DdprunTestCase):
    """HOSTS namespaces, one agent per started host (self.agents: {host: proc}), the job
    directory self.job_dir with steps.log and the workers' started_* records."""

    require_binaries = (lib.DDPRUN,)
    RDZV_ID_PREFIX = "netns"  # the --rdzv_id is this plus a random suffix
    ENDPOINT_HOSTS = 1  # --rdzv_endpoint: hosts 0..ENDPOINT_HOSTS-1 at RDZV_PORT

    def setUp(self):
        super().setUp()
        self.hosts = lib.NetnsHosts(HOSTS)
        self.addCleanup(self._remove_hosts)  # runs before the base class's process cleanup
        self.hosts.create()
        self.rdzv_id = "%s-%s" % (self.RDZV_ID_PREFIX, uuid.uuid4().hex[:8])
        self.job_dir = self.path("job")
        os.mkdir(self.job_dir)
        self.steps_log = os.path.join(self.job_dir, "steps.log")
        self.endpoints = ",".join("%s:%d" % (self.hosts.addresses[h], RDZV_PORT)
                                  for h in range(self.ENDPOINT_HOSTS))
        self.agents = {}

    def _remove_hosts(self):
        self._cleanup_processes()  # every process first (idempotent), then the namespaces
        self.hosts.remove()

    # -- agents --------------------------------------------------------------------------------

    def agent_args(self, host):
        """Launcher arguments of host's agent beyond the common ones (after --local_addr)."""
        return []

    def start_agent(self, host, nnodes="2:3", script_args=(), steps=STEPS,
                    max_restarts=MAX_RESTARTS):
        out_path, err_path = self.path("agent%d.out" % host), self.path("agent%d.err" % host)
        env = self.env({"GLOO_SOCKET_IFNAME": self.hosts.devices[host], HOST_VAR: str(host)})
        args = self.hosts.exec_prefix(host) + [
            lib.DDPRUN, "--nnodes=%s" % nnodes, "--nproc_per_node=%d" % NPROC,
            "--rdzv_backend=c10d", "--rdzv_endpoint=%s" % self.endpoints,
            "--rdzv_id=%s" % self.rdzv_id, "--max_restarts=%d" % max_restarts,
            "--rdzv_conf=%s" % RDZV_CONF, "--local_addr=%s" % self.hosts.addresses[host]]
        args += self.agent_args(host)
        args += ["--python", lib.SYSTEM_PYTHON, TRAIN, self.job_dir, "--steps", str(steps),
                 "--ckpt-every", str(CKPT_EVERY), "--sleep", str(STEP_SLEEP)] + list(script_args)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = self.start(args, env=env, stdout=out, stderr=err)
        proc.host, proc.out_path, proc.err_path = host, out_path, err_path
        self.agents[host] = proc
        return proc

    def start_hosts(self, count=3, nnodes="2:3", script_args=(), steps=STEPS,
                    max_restarts=MAX_RESTARTS):
        """Host 0 first (it serves the rendezvous store), then the others once it listens."""
        first = self.start_agent(0, nnodes, script_args, steps, max_restarts)
        lib.wait_for(lambda: self._listening(first), 30,
                     "host 0's rendezvous store on port %d" % RDZV_PORT)
        return [first] + [self.start_agent(h, nnodes, script_args, steps, max_restarts)
                          for h in range(1, count)]

    def rdzv_view(self):
        """`ddprun-store rdzv --json` of this job, run in host 0's namespace."""
        result = subprocess.run(
            self.hosts.exec_prefix(0) + [
                STORE_TOOL, "rdzv", "--endpoint", "%s:%d" % (self.hosts.addresses[0], RDZV_PORT),
                "--rdzv_id", self.rdzv_id, "--json", "--timeout", "10", "--connect-timeout", "10"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

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

    def result_of(self, proc):
        return lib.Result(proc.argv, proc.returncode, lib.read_file(proc.out_path),
                          lib.read_file(proc.err_path), time.monotonic() - proc.start_time)

    def finish_agent(self, proc, timeout=JOB_TIMEOUT):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            lib.killpg_quietly(proc.pid)
            lib.kill_quietly(proc.pid)
            proc.wait(timeout=30)
            self.fail("the agent of host %d did not exit within %.0f s\n%s" % (
                proc.host, timeout, self.describe_agents()))
        return self.result_of(proc)

    def finish_all(self, procs, timeout=JOB_TIMEOUT):
        deadline = time.monotonic() + timeout
        return [self.finish_agent(p, max(1.0, deadline - time.monotonic())) for p in procs]

    def describe_host(self, host):
        """Lines about host added to describe_agents after its stderr tail."""
        return []

    def describe_agents(self):
        parts = []
        for host, proc in sorted(self.agents.items()):
            err = lib.read_file(proc.err_path) if os.path.exists(proc.err_path) else ""
            parts.append("--- host %d (%s, exit %s) stderr tail ---\n%s" % (
                host, self.hosts.addresses[host], proc.poll(), err[-3000:]))
            parts += self.describe_host(host)
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

    def kill_host(self, host):
        """SIGKILLs host's agent (first, so that it cannot react), its session keeper and its
        workers, as a lost machine loses them all; returns the wall-clock time of the kill."""
        victims = self.pids_of_host(host)
        agent = self.agents[host].pid
        self.assertIn(agent, victims)
        # The warm pool (on by default; DDPRUN_TEST_WARM_RESTART=off turns it off) is one more.
        pool = 0 if os.environ.get("DDPRUN_TEST_WARM_RESTART") == "off" else 1
        self.assertIn(len(victims), (2 + NPROC, 2 + NPROC + pool),
                      "host %d's agent, keeper, workers (and warm pool): %s" % (host, victims))
        killed_at = time.time()
        lib.kill_quietly(agent)
        for pid in victims:
            lib.kill_quietly(pid)
        self.wait_gone(victims, 10, "host %d's agent and workers" % host)
        return killed_at

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

    def check_history(self, entries, steps=STEPS):
        """Segments of steps.log by group; each new group resumes at the latest checkpoint, and
        the steps that count (each group's, minus those a later group redid) are 0..steps-1,
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
        self.assertEqual([e["step"] for e in history], list(range(steps)),
                         "steps.log does not cover every step exactly once")
        for segment in segments:
            self.assertEqual(len({e["world_size"] for e in segment}), 1)
        return segments

    @staticmethod
    def startup(records):
        """The script's own start-up (spawn -> first step), worst worker of `records`."""
        times = [r["first_step"] - r["spawn"] for r in records if "first_step" in r]
        return max(times) if times else None
