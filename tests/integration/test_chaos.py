"""Chaos: an elastic job on loopback (three agents, --nnodes=2:4, two workers each, every worker
with a child shell and a grandchild) whose store is a separate `ddprun-store serve`, while a
loop SIGKILLs a random worker, worker child, worker grandchild or agent (an agent is replaced by
a new one). After every kill the job must be training again at full size within a bound, with
no orphan (a process of the launch outside the session of a live worker, agent, keeper or the
store) and no zombie; the store's memory must stay flat across rounds. At the end the workers
are released and every agent exits 0 with nothing left.

Kills: CHAOS_ROUNDS (default 20, the CI figure); the seed is printed (CHAOS_SEED to replay).
"""
import glob
import json
import os
import random
import signal
import subprocess
import sys
import time
import unittest

import ddprun_testlib as lib

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "chaos_worker.py")
STORE_TOOL = os.path.join(lib.BUILD_DIR, "tools", "ddprun-store")
ROUNDS = int(os.environ.get("CHAOS_ROUNDS", "20"))
AGENTS = 3
NPROC = 2
CONF = ("--rdzv_conf=join_timeout=60,last_call_timeout=1,keep_alive_interval=0.5,"
        "keep_alive_max_attempt=2")
STABLE_TIMEOUT = 60  # a kill -> the job trains again at full size
ZOMBIE_REAP_TIMEOUT = 10  # a killed process -> reaped by its parent
RSS_GROWTH_LIMIT_KB = 2048  # the store's peak RSS, second half of the rounds vs first half


def stat_fields(pid):
    """(state, ppid, session) of `pid`, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[3])


def read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class ChaosTest(lib.DdprunTestCase):

    def setUp(self):
        super().setUp()
        self.out = self.path("workers")
        os.mkdir(self.out)
        self.store = self.start([STORE_TOOL, "serve", "--host", "127.0.0.1", "--port", "0"])
        line = self.store.stdout.readline().decode()
        self.assertTrue(line.startswith("listening on "), line)
        self.port = int(line.rsplit(":", 1)[1])
        self.agents = []

    def start_agent(self):
        proc = self.start_ddprun(
            "--nnodes=2:4", "--nproc_per_node=%d" % NPROC, "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % self.port, "--rdzv_id=chaos", "--max_restarts=100",
            "--local_addr=127.0.0.1", CONF, "--no_python", sys.executable, WORKER, self.out)
        self.agents.append(proc)
        return proc

    def live_agents(self):
        return [a for a in self.agents if a.poll() is None]

    def records(self):
        found = []
        for path in glob.glob(os.path.join(self.out, "w_*.json")):
            try:
                found.append(lib.read_json(path))
            except ValueError:
                continue
        return found

    def live_workers(self):
        live = []
        for record in self.records():
            fields = stat_fields(record["pid"])  # read once: it may exit meanwhile
            if fields is not None and fields[0] != "Z":
                live.append(record)
        return live

    def wait_stable(self, what):
        """The live agents' workers form one group at full size, each with its tree running."""
        def stable():
            for agent in self.agents:
                if agent.poll() not in (None, -signal.SIGKILL):
                    raise AssertionError("an agent exited with %s\n%s" % (
                        agent.returncode, self.finish(agent).describe()))
            workers = self.live_workers()
            expected = len(self.live_agents()) * NPROC
            if len(workers) != expected or len({w["master"] for w in workers}) != 1:
                return None
            if any(w["world_size"] != expected for w in workers):
                return None
            return workers
        return lib.wait_for(stable, STABLE_TIMEOUT, what)

    def zombies(self):
        """{pid: parent} of the zombies whose parent is a process of the launch. (A zombie's
        environment reads empty, so its own marker cannot tell.)"""
        launch = set(lib.pids_with_marker(self.marker))
        found = {}
        for entry in os.listdir("/proc"):
            fields = stat_fields(int(entry)) if entry.isdigit() else None
            if fields is not None and fields[0] == "Z" and fields[1] in launch:
                found[int(entry)] = fields[1]
        return found

    def check_clean(self, workers, what):
        """No orphan and no zombie among the launch's processes."""
        # A process just killed is a zombie until its parent (a worker's shell, an agent, the
        # keeper) reaps it; on a loaded machine that parent may not have run yet (a grandchild
        # seen as a zombie of its live shell 0 s after the kill, beside a CPU burner). A zombie
        # that nobody reaps within the bound is a leak.
        left = {}

        def reaped():
            left.clear()
            left.update(self.zombies())
            return not left
        try:
            lib.wait_for(reaped, ZOMBIE_REAP_TIMEOUT, "zombies reaped")
        except AssertionError:
            self.fail("zombies (pid: parent) %s not reaped within %d s %s" % (
                left, ZOMBIE_REAP_TIMEOUT, what))
        owners = {w["pid"] for w in workers}  # worker sessions (a worker leads its session)
        owners |= {a.pid for a in self.live_agents()} | {self.store.pid}
        for pid in lib.pids_with_marker(self.marker):
            fields = stat_fields(pid)
            if fields is None:
                continue
            state, ppid, session = fields
            if pid in owners or session in owners:
                continue
            cmdline = read_cmdline(pid)
            if cmdline is None or cmdline.startswith(b"ddprun-session-keeper"):
                continue  # gone meanwhile, or the keeper (a session of its own)
            self.fail("orphan %d (session %d, parent %d, %s) %s" % (pid, session, ppid, cmdline,
                                                                    what))
        # The children of the test (killed agents) are reaped by Popen.poll() above.

    def test_random_kills_leave_no_orphan_and_the_job_goes_on(self):
        seed = int(os.environ.get("CHAOS_SEED", str(random.randrange(1 << 30))))
        rng = random.Random(seed)
        print("\nchaos: %d rounds, seed %d (CHAOS_SEED to replay)" % (ROUNDS, seed))
        for _ in range(AGENTS):
            self.start_agent()
        workers = self.wait_stable("the first group")
        rss, kinds, recoveries = [], [], []
        for round_ in range(ROUNDS):
            kind = rng.choice(["worker", "child", "grandchild", "agent"])
            victim_worker = rng.choice(workers)
            killed_at = time.monotonic()
            if kind == "agent":
                agent = rng.choice(self.live_agents())
                os.kill(agent.pid, signal.SIGKILL)
                agent.wait(timeout=10)
                self.start_agent()
            else:
                pid = {"worker": victim_worker["pid"], "child": victim_worker["child"],
                       "grandchild": victim_worker["grandchild"]}[kind]
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            what = "after round %d (%s killed)" % (round_, kind)
            if kind in ("worker", "agent"):  # the group restarts: wait for a new group
                old = victim_worker["master"]
                lib.wait_for(lambda: not [w for w in self.live_workers() if w["master"] == old],
                             STABLE_TIMEOUT, "the old group gone " + what)
            workers = self.wait_stable("the job at full size " + what)
            recoveries.append(time.monotonic() - killed_at)
            self.check_clean(workers, what)
            rss.append(rss_kb(self.store.pid))
            kinds.append(kind)
        print("chaos: kills %s" % {k: kinds.count(k) for k in sorted(set(kinds))})
        print("chaos: kill -> full size again: median %.2f s, max %.2f s" % (
            sorted(recoveries)[len(recoveries) // 2], max(recoveries)))
        print("chaos: store RSS (KiB) per round: %s" % rss)
        half = len(rss) // 2
        self.assertLessEqual(max(rss[half:]) - max(rss[:half]), RSS_GROWTH_LIMIT_KB,
                             "the store's memory grew across rounds: %s" % rss)

        with open(os.path.join(self.out, "release"), "w") as f:
            f.write("go")
        for agent in self.live_agents():
            result = self.finish(agent, timeout=60)
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.store.send_signal(signal.SIGTERM)
        self.store.wait(timeout=10)
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "leftover processes")


if __name__ == "__main__":
    unittest.main()
