"""Elastic launches on loopback: several real ddprun agents (--rdzv_backend=c10d, --nnodes=MIN:MAX)
with fake workers, keep-alive scaled down. Rounds are told apart by the workers' MASTER_PORT:
every round's group rank 0 serves a fresh worker store on a new ephemeral port.

Each worker writes its environment to <tmp>/envs/env_<pid>.json when it starts, then waits for
<tmp>/release (or fails, where a scenario says so). Promptness is asserted with generous
deadlines: a re-rendezvous that sat out the last call (set to 60 s here where it must not be
waited for) fails its deadline.
"""
import glob
import json
import os
import signal
import socket
import subprocess
import time
import unittest

import ddprun_testlib as lib

INTERVAL = 0.5
ATTEMPTS = 2
HEARTBEAT_TIMEOUT = INTERVAL * ATTEMPTS


def conf(last_call=1, join=30):
    return ("--rdzv_conf=join_timeout=%s,last_call_timeout=%s,keep_alive_interval=%s,"
            "keep_alive_max_attempt=%d" % (join, last_call, INTERVAL, ATTEMPTS))


class ElasticTest(lib.DdprunTestCase):

    def setUp(self):
        super().setUp()
        self.port = lib.free_port()
        self.envs = self.path("envs")
        os.mkdir(self.envs)
        self.release = self.path("release")

    # -- helpers -------------------------------------------------------------------------------

    def agent(self, nnodes="2:3", nproc=1, last_call=1, join=30, extra=(), worker=None,
              role="healthy"):
        worker = worker or ["--env-json-dir", self.envs, "--wait-for-file", self.release]
        return self.start_ddprun(
            "--nnodes=%s" % nnodes, "--nproc_per_node=%d" % nproc, "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % self.port, "--rdzv_id=elastic-test",
            conf(last_call, join), *extra, lib.FAKE_WORKER, *worker,
            env=self.env({"TEST_AGENT_ROLE": role}))

    def wait_store_listening(self, proc):
        def listening():
            if proc.poll() is not None:
                raise AssertionError("the store host exited early\n" + self.finish(proc).describe())
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0
        lib.wait_for(listening, 30, "the rendezvous store on port %d" % self.port)

    def rounds(self):
        """Worker environments grouped by round (MASTER_PORT), in order of appearance."""
        by_port = {}
        for path in glob.glob(os.path.join(self.envs, "env_*.json")):
            try:
                env = lib.read_json(path)
            except ValueError:
                continue
            by_port.setdefault(env["MASTER_PORT"], []).append(env)
        return by_port

    def wait_round(self, workers, exclude=(), timeout=30):
        """Waits for a round (a MASTER_PORT not in `exclude`) with `workers` workers."""
        def ready():
            for port, envs in self.rounds().items():
                if port not in exclude and len(envs) == workers:
                    return port, envs
            return None
        return lib.wait_for(ready, timeout, "a round of %d workers (have %s)" % (
            workers, {p: len(e) for p, e in self.rounds().items()}))

    def check_round(self, envs, nodes, restart_count=0):
        world = len(envs)
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(world)))
        for env in envs:
            self.assertEqual(int(env["WORLD_SIZE"]), world)
            self.assertEqual(int(env["GROUP_WORLD_SIZE"]), nodes)
            self.assertEqual(int(env["TORCHELASTIC_RESTART_COUNT"]), restart_count)
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")
            self.assertEqual(env["TORCHELASTIC_RUN_ID"], "elastic-test")
            self.assertNotEqual(int(env["MASTER_PORT"]), self.port)
        self.assertEqual(len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}), 1)

    def release_and_finish(self, procs, code=0):
        with open(self.release, "w") as f:
            f.write("go")
        results = [self.finish(p, timeout=60) for p in procs]
        for result in results:
            self.assertExit(result, code)
            self.assertNoLauncherTraceback(result)
        return results

    # -- scenarios -----------------------------------------------------------------------------

    def test_two_nodes_form_one_group(self):
        first = self.agent(nproc=2)
        self.wait_store_listening(first)
        second = self.agent(nproc=2)
        _, envs = self.wait_round(4)
        self.check_round(envs, nodes=2)
        self.release_and_finish([first, second])

    def test_lost_node_survivors_continue_without_spending_a_restart(self):
        logs = [self.path("events_%d.jsonl" % i) for i in range(3)]
        host = self.agent(last_call=60, extra=("--event_log=" + logs[0],))
        self.wait_store_listening(host)
        others = [self.agent(last_call=60, extra=("--event_log=" + logs[i],)) for i in (1, 2)]
        # MAX (3) closes the first round at once, whatever the last call.
        first_port, envs = self.wait_round(3)
        self.check_round(envs, nodes=3)
        victim = others[1]
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        # Survivors all rejoined: the round must not sit out the 60 s last call.
        _, envs = self.wait_round(2, exclude=(first_port,),
                                  timeout=HEARTBEAT_TIMEOUT + 10)
        resumed = time.monotonic() - killed_at
        self.check_round(envs, nodes=2, restart_count=0)
        print("kill -> workers of the new round started: %.2f s (heartbeat timeout %.1f s)" %
              (resumed, HEARTBEAT_TIMEOUT))
        results = self.release_and_finish([host, others[0]])
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "leftover processes")
        for log, result in zip(logs[:2], results):
            events = [json.loads(line) for line in lib.read_file(log).splitlines()]
            names = [e["event"] for e in events]
            self.assertEqual(names.count("round_formed"), 2, names)
            self.assertIn("node_lost", names)
            restarts = [e for e in events if e["event"] == "restart"]
            self.assertEqual([e["cause"] for e in restarts], ["membership"])
            formed = [e for e in events if e["event"] == "round_formed"]
            self.assertEqual([e["group_world_size"] for e in formed], [3, 2])
            self.assertEqual(events[-1]["event"], "finished")
            self.assertEqual(events[-1]["state"], "succeeded")
            self.assertTrue(all(e["restart_count"] == 0 for e in events))
            # One console line per membership change.
            self.assertIn("restarting at a new membership (no restart spent)", result.stderr)

    def test_paused_agent_declared_lost_stops_its_stale_workers_and_rejoins(self):
        # A frozen VM or a stop-the-world pause: SIGSTOP past the heartbeat timeout. The others
        # go on without it; once it wakes its workers (still running meanwhile: nothing could
        # stop them) are stopped at once and it rejoins as a new member, no restart spent.
        logs = [self.path("events_%d.jsonl" % i) for i in range(3)]
        host = self.agent(last_call=60, extra=("--event_log=" + logs[0],))
        self.wait_store_listening(host)
        others = [self.agent(last_call=60, extra=("--event_log=" + logs[i],)) for i in (1, 2)]
        first_port, _ = self.wait_round(3)
        paused = others[1]

        def events(i):  # whole lines only: the agent may be writing the last one
            return [json.loads(line) for line in lib.read_file(logs[i]).split("\n")[:-1] if line]
        # The workers can write their environment before their agent logs having started them
        # (a ThreadSanitizer build, in a fresh-clone CI run): wait for the line.
        def started_pids():
            return [p for e in events(2) if e["event"] == "workers_started" for p in e["pids"]]
        stale = lib.wait_for(started_pids, 30, "the paused node's workers_started event")
        self.assertEqual(len(stale), 1, events(2))
        os.kill(paused.pid, signal.SIGSTOP)
        try:
            second_port, envs = self.wait_round(2, exclude=(first_port,),
                                                timeout=HEARTBEAT_TIMEOUT + 10)
            self.check_round(envs, nodes=2)
            self.assertTrue(lib.is_alive(stale[0]), "the paused node's worker ran on meanwhile")
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        woke_at = time.monotonic()
        self.wait_gone(stale, 2.0, "the paused node's stale worker")
        stopped = time.monotonic() - woke_at
        _, envs = self.wait_round(3, exclude=(first_port, second_port), timeout=15)
        rejoined = time.monotonic() - woke_at
        self.check_round(envs, nodes=3)
        print("SIGCONT -> stale worker gone %.2f s, rejoined (a round of 3 started) %.2f s" % (
            stopped, rejoined))
        results = self.release_and_finish([host] + others)
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "leftover processes")
        mine = events(2)
        lost = [e for e in mine if e["event"] == "node_lost" and e.get("self")]
        self.assertEqual(len(lost), 1, [e["event"] for e in mine])
        self.assertEqual(lost[0]["node"], lost[0]["group_rank"])
        self.assertIn("was declared lost by the others", results[2].stderr, results[2].describe())
        self.assertIn("stopping its stale workers and rejoining as a new member",
                      results[2].stderr)
        formed = [e for e in mine if e["event"] == "round_formed"]
        self.assertEqual([e["group_world_size"] for e in formed], [3, 3])
        for i in range(3):
            self.assertTrue(all(e["restart_count"] == 0 for e in events(i)), events(i))

    def test_store_host_lost_the_store_moves_and_survivors_go_on(self):
        """The agent serving the rendezvous store is SIGKILLed: the survivors move the store to
        the first of them (group-rank order) and form a round of 2 without spending a restart;
        the next round's worker store is the successor's. On loopback every agent shares one
        address, so the successor serves the same port."""
        logs = [self.path("events_%d.jsonl" % i) for i in range(3)]
        extra = lambda i: ("--event_log=" + logs[i], "--local_addr=127.0.0.1")
        host = self.agent(last_call=60, extra=extra(0))
        self.wait_store_listening(host)
        others = [self.agent(last_call=60, extra=extra(i)) for i in (1, 2)]
        first_port, envs = self.wait_round(3)
        self.check_round(envs, nodes=3)
        killed_at = time.monotonic()
        os.kill(host.pid, signal.SIGKILL)
        _, envs = self.wait_round(2, exclude=(first_port,), timeout=HEARTBEAT_TIMEOUT + 10)
        resumed = time.monotonic() - killed_at
        self.check_round(envs, nodes=2, restart_count=0)
        print("store host killed -> workers of the new round started: %.2f s" % resumed)
        view = subprocess.run(
            [os.path.join(lib.BUILD_DIR, "tools", "ddprun-store"), "rdzv", "--endpoint",
             "127.0.0.1:%d" % self.port, "--rdzv_id", "elastic-test", "--json"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(view.returncode, 0, view.stderr)
        state = json.loads(view.stdout)
        self.assertEqual((state["store_epoch"], state["store_basis"]), (1, 0))
        self.assertEqual(state["formed"]["round"], 1)
        results = self.release_and_finish(others)
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "leftover processes")
        # Which events a survivor logs depends on timing on loopback, where the successor serves
        # the same port: one that reaches the moved store before deciding the old one is lost
        # logs no store_unreachable, one whose heartbeat watch saw the host go first logs
        # node_lost before the connection fails. Every survivor noticed the loss one way or
        # another, and exactly one serves the moved store (epoch 1).
        servers = 0
        moves = 0
        for log, result in zip(logs[1:], results):
            events = [json.loads(line) for line in lib.read_file(log).splitlines()]
            names = set(e["event"] for e in events)
            self.assertTrue(names & {"store_unreachable", "store_lost", "node_lost"}, names)
            for moved in (e for e in events if e["event"] == "store_moved"):
                self.assertEqual(moved["epoch"], 1)
                servers += moved["serving"]
                moves += 1
            formed = [e for e in events if e["event"] == "round_formed"]
            self.assertEqual([e["group_world_size"] for e in formed], [3, 2])
            self.assertTrue(all(e["restart_count"] == 0 for e in events))
            self.assertEqual(events[-1]["state"], "succeeded")
        self.assertGreaterEqual(moves, 1, "a survivor logged the move")
        self.assertEqual(servers, 1, "exactly one survivor serves the moved store")

    def test_new_node_joins_a_running_group_without_spending_a_restart(self):
        host = self.agent()
        self.wait_store_listening(host)
        second = self.agent()
        first_port, envs = self.wait_round(2)  # MIN (2), then the 1 s last call
        self.check_round(envs, nodes=2)
        third = self.agent()
        _, envs = self.wait_round(3, exclude=(first_port,), timeout=15)
        self.check_round(envs, nodes=3, restart_count=0)
        self.release_and_finish([host, second, third])

    def test_failing_worker_ends_the_job_after_max_restarts(self):
        failing = ["--env-json-dir", self.envs, "--exit", "3"]
        host = self.agent(nnodes="2:2", extra=("--max_restarts=2",), worker=failing,
                          role="failing")
        self.wait_store_listening(host)
        healthy = self.agent(nnodes="2:2", extra=("--max_restarts=2",))
        results = [self.finish(p, timeout=90) for p in (host, healthy)]
        for result in results:
            self.assertExit(result, 3)
            self.assertIn("exitcode  : 3", result.stderr, result.describe())
            self.assertNoLauncherTraceback(result)

        def counts(role):
            return sorted(int(e["TORCHELASTIC_RESTART_COUNT"]) for envs in self.rounds().values()
                          for e in envs if e["TEST_AGENT_ROLE"] == role)
        # Three attempts (restart counts 0, 1, 2). The healthy node's workers may be stopped
        # before they write their file, but never run with another count.
        self.assertEqual(counts("failing"), [0, 1, 2])
        self.assertTrue(set(counts("healthy")) <= {0, 1, 2}, counts("healthy"))

    def test_a_separate_store_server_can_be_the_endpoint(self):
        """`ddprun-store serve` holds the port: every agent, on this host too, is its client."""
        store = self.start([os.path.join(lib.BUILD_DIR, "tools", "ddprun-store"), "serve",
                            "--host", "127.0.0.1", "--port", str(self.port)])
        self.wait_store_listening(store)
        agents = [self.agent(nnodes="2:2") for _ in range(2)]
        _, envs = self.wait_round(2)
        self.check_round(envs, nodes=2)
        self.release_and_finish(agents)  # no agent could bind the port: both were clients
        self.assertIsNone(store.poll(), "the store server must outlive the job")

    def test_too_few_nodes_is_a_one_line_error(self):
        lonely = self.agent(nnodes="2:3", join=2)
        result = self.finish(lonely, timeout=30)
        self.assertExit(result, 1)
        self.assertIn("only 1 of the minimum 2 nodes joined", result.stderr, result.describe())
        self.assertNoLauncherTraceback(result)

    def test_endpoint_is_required(self):
        result = self.ddprun("--nnodes=2", "--rdzv_backend=c10d", lib.FAKE_WORKER)
        self.assertExit(result, 2)
        self.assertIn("--rdzv_endpoint", result.stderr)


if __name__ == "__main__":
    unittest.main()
