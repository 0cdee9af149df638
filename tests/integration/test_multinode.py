"""Multi-node static launches: two ddprun agents on loopback (and, as root, in two network
namespaces joined by a veth pair) form one worker group, agree on torchrun's ranks, and stop
together when a worker or an agent on the other node dies."""
import os
import signal
import subprocess
import time
import unittest
import uuid

import ddprun_testlib as lib  # noqa: E402
from ddprun_testlib import (DDPRUN, FAKE_WORKER, DdprunTestCase, free_port, pids_with_marker,
                            read_json, wait_for)

FAST_KEEPALIVE = "--rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3,join_timeout=60"
TIMEOUT = 60.0


class MultiNodeCase(DdprunTestCase):

    def node_args(self, node_rank, nproc, port, addr="127.0.0.1", nnodes=2):
        return [DDPRUN, "--nnodes=%d" % nnodes, "--node_rank=%d" % node_rank,
                "--master_addr=%s" % addr, "--master_port=%d" % port,
                "--nproc_per_node=%d" % nproc, FAST_KEEPALIVE, "--no_python", FAKE_WORKER]

    def env_path(self, node, local_rank):
        return self.path("env_n%d_%d" % (node, local_rank))

    def env_action(self, node):
        return ["--env-json", self.path("env_n%d_${local_rank}" % node)]

    def read_env(self, node, local_rank):
        return read_json(self.env_path(node, local_rank) + ".0")

    def assertNothingLeft(self):
        wait_for(lambda: not pids_with_marker(self.marker), 10, "no process of the test left")

    def check_group(self, sizes, addr="127.0.0.1", port=None):
        world = sum(sizes)
        base = 0
        for node, nproc in enumerate(sizes):
            for local_rank in range(nproc):
                env = self.read_env(node, local_rank)
                expected = {"RANK": base + local_rank, "LOCAL_RANK": local_rank,
                            "WORLD_SIZE": world, "GROUP_RANK": node, "GROUP_WORLD_SIZE": len(sizes),
                            "ROLE_RANK": base + local_rank, "ROLE_WORLD_SIZE": world,
                            "LOCAL_WORLD_SIZE": nproc, "MASTER_ADDR": addr, "MASTER_PORT": port,
                            "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": 0}
                for key, value in expected.items():
                    self.assertEqual(env.get(key), str(value), "node %d local rank %d: %s" % (
                        node, local_rank, key))
            base += nproc


class LoopbackTest(MultiNodeCase):

    def run_pair(self, sizes):
        port = free_port()
        procs = [self.start(self.node_args(n, nproc, port) + self.env_action(n))
                 for n, nproc in enumerate(sizes)]
        results = [self.finish(p, timeout=TIMEOUT) for p in procs]
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.check_group(sizes, port=port)
        self.assertNothingLeft()

    def test_two_nodes_two_workers_each(self):
        self.run_pair([2, 2])

    def test_heterogeneous_ranks_as_torchrun(self):
        self.run_pair([2, 3])  # node 0: ranks 0-1, node 1: ranks 2-4, WORLD_SIZE=5

    def test_node_1_can_start_first(self):
        port = free_port()
        log = self.path("node1.err")
        with open(log, "wb") as err:
            node1 = self.start(self.node_args(1, 1, port) + self.env_action(1), stderr=err)
        wait_for(lambda: "waiting for 2 nodes" in lib.read_file(log), 10, "node 1 waiting")
        node0 = self.start(self.node_args(0, 1, port) + self.env_action(0))
        for proc in (node0, node1):
            self.assertExit(self.finish(proc, timeout=TIMEOUT), 0)
        self.check_group([1, 1], port=port)

    def test_worker_failure_on_node_1_stops_node_0(self):
        port = free_port()
        ready = [self.path("ready_n0_%d" % r) for r in range(2)]
        failed = self.path("failed")
        node0 = self.start(self.node_args(0, 2, port) + [
            "--ready-file", self.path("ready_n0_${local_rank}"), "--sleep", "120"])
        node1 = self.start(self.node_args(1, 2, port) + [
            "--if-local-rank", "1", "--wait-for-file", ready[0],
            "--if-local-rank", "1", "--wait-for-file", ready[1],
            "--if-local-rank", "1", "--write", failed, "x",
            "--if-local-rank", "1", "--exit", "3", "--sleep", "120"])
        wait_for(lambda: os.path.exists(failed) or node0.poll() is not None, 30, "the failure")
        failed_at = time.monotonic()
        r0 = self.finish(node0, timeout=TIMEOUT)
        propagation = time.monotonic() - failed_at
        r1 = self.finish(node1, timeout=TIMEOUT)
        self.assertExit(r1, 3)
        self.assertExit(r0, 3)  # the root cause's code on every node
        self.assertLess(propagation, 5.0, r0.describe())
        self.assertIn("fake_worker FAILED", r0.stderr, r0.describe())
        root = r0.stderr[r0.stderr.index("Root Cause"):]
        self.assertIn("rank      : 3 (local_rank: 1)", root, r0.describe())
        self.assertIn("exitcode  : 3", root, r0.describe())
        self.assertIn("the root cause is on node 1", r0.stderr, r0.describe())
        self.assertNothingLeft()
        print("\n[multinode] worker failure on node 1 -> node 0 exited after %.2f s" % propagation)

    def test_killed_agent_on_node_1_is_noticed_within_heartbeat_timeout(self):
        port = free_port()
        ready = [self.path("ready_n%d_%d" % (n, r)) for n in range(2) for r in range(2)]
        node0 = self.start(self.node_args(0, 2, port) + [
            "--ready-file", self.path("ready_n0_${local_rank}"), "--sleep", "120"])
        node1 = self.start(self.node_args(1, 2, port) + [
            "--ready-file", self.path("ready_n1_${local_rank}"), "--sleep", "120"])
        self.wait_for_files(ready, timeout=30, proc=node0)
        os.kill(node1.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        r0 = self.finish(node0, timeout=TIMEOUT)
        detection = time.monotonic() - killed_at
        self.assertNotEqual(r0.returncode, 0, r0.describe())
        self.assertLess(detection, 3.0 + 2.5, r0.describe())  # 1 s x 3, plus one interval
        self.assertIn("node 1", r0.stderr, r0.describe())
        self.assertIn("was lost", r0.stderr, r0.describe())
        self.finish(node1, timeout=10)
        self.assertNothingLeft()
        print("\n[multinode] SIGKILL of node 1's agent -> node 0 exited after %.2f s" % detection)

    def test_killed_agent_on_node_0_stops_node_1(self):
        port = free_port()
        ready = [self.path("ready_n%d_%d" % (n, r)) for n in range(2) for r in range(1)]
        node0 = self.start(self.node_args(0, 1, port) + [
            "--ready-file", self.path("ready_n0_${local_rank}"), "--sleep", "120"])
        node1 = self.start(self.node_args(1, 1, port) + [
            "--ready-file", self.path("ready_n1_${local_rank}"), "--sleep", "120"])
        self.wait_for_files(ready, timeout=30, proc=node1)
        os.kill(node0.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        r1 = self.finish(node1, timeout=TIMEOUT)
        self.assertNotEqual(r1.returncode, 0, r1.describe())
        self.assertLess(time.monotonic() - killed_at, 5.5, r1.describe())
        self.assertIn("node 0", r1.stderr, r1.describe())
        self.finish(node0, timeout=10)
        self.assertNothingLeft()

    def sigterm_to_node_1(self, node1_worker):
        """SIGTERM to node 1's agent while both nodes train; node 0 must name the signal (not a
        lost heartbeat) whatever the order of node 1's record, its workers' exits and its
        heartbeats' end. Returns node 0's result and the seconds it took to stop."""
        port = free_port()
        ready = [self.path("ready_n%d_0" % n) for n in range(2)]
        node0 = self.start(self.node_args(0, 1, port) + [
            "--ready-file", self.path("ready_n0_${local_rank}"), "--sleep", "120"])
        node1 = self.start(self.node_args(1, 1, port) + [
            "--ready-file", self.path("ready_n1_${local_rank}")] + node1_worker + ["--sleep", "120"])
        self.wait_for_files(ready, timeout=30, proc=node0)
        os.kill(node1.pid, signal.SIGTERM)
        sent_at = time.monotonic()
        r0 = self.finish(node0, timeout=TIMEOUT)
        stopped_after = time.monotonic() - sent_at
        r1 = self.finish(node1, timeout=TIMEOUT)
        node1_after = time.monotonic() - sent_at
        self.assertExit(r1, 128 + signal.SIGTERM)
        self.assertNotEqual(r0.returncode, 0, r0.describe())
        self.assertIn("the agent of node 1 received SIGTERM", r0.stderr, r0.describe())
        self.assertNotIn("was lost", r0.stderr, r0.describe() + "\n" + r1.describe())
        self.assertNothingLeft()
        return r0, stopped_after, node1_after

    def test_sigterm_to_node_1_agent_stops_node_0(self):
        r0, stopped_after, _ = self.sigterm_to_node_1([])
        self.assertLess(stopped_after, 5.0, r0.describe())

    def test_sigterm_named_while_node_1_workers_outlast_the_heartbeat_timeout(self):
        # Node 1's worker traps SIGTERM and takes 5 s to exit, longer than the 3 s heartbeat
        # timeout (keep_alive 1 s x 3): node 1's heartbeats go on until its agent exits, so
        # node 0 (whose store lingers for node 1's connections) names the signal.
        r0, _, node1_after = self.sigterm_to_node_1(["--on-sigterm-sleep", "5"])
        self.assertGreater(node1_after, 3.0, r0.describe())  # the workers did outlast it

    def test_join_timeout_names_the_missing_node(self):
        port = free_port()
        result = self.run_launcher(self.node_args(0, 1, port)[:-2] + [
            "--rdzv_conf=join_timeout=1", "--no_python", FAKE_WORKER], timeout=TIMEOUT)
        self.assertExit(result, 1)
        self.assertIn("missing node_rank 1", result.stderr, result.describe())
        self.assertIn("join_timeout", result.stderr, result.describe())
        self.assertNothingLeft()

    def test_signal_during_the_join_stops_the_agent(self):
        port = free_port()
        node0 = self.start(self.node_args(0, 1, port))
        wait_for(lambda: self._listening(port), 10, "node 0's store")
        os.kill(node0.pid, signal.SIGTERM)
        result = self.finish(node0, timeout=10)
        self.assertExit(result, 128 + signal.SIGTERM)
        self.assertNothingLeft()

    @staticmethod
    def _listening(port):
        import socket
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0


@unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
class NetnsTest(MultiNodeCase):
    """Each agent in its own network namespace; node 0 at 10.213.7.1, node 1 at 10.213.7.2."""

    def setUp(self):
        super().setUp()
        hosts = lib.NetnsPair()
        self.ns = hosts.names
        self.devices = hosts.devices
        self.addCleanup(hosts.remove)  # runs after the processes are killed
        hosts.create()

    def test_two_namespaces(self):
        port = 29500 + (os.getpid() % 1000)
        addr = "10.213.7.1"
        procs = [self.start(["ip", "netns", "exec", self.ns[n]] +
                            self.node_args(n, 2, port, addr=addr) + self.env_action(n))
                 for n in range(2)]
        for proc in procs:
            result = self.finish(proc, timeout=TIMEOUT)
            self.assertExit(result, 0)
        self.check_group([2, 2], addr=addr, port=port)
        self.assertNothingLeft()

    def test_failure_crosses_namespaces(self):
        port = 29500 + (os.getpid() % 1000)
        addr = "10.213.7.1"
        ready = self.path("ready_n0_0")
        node0 = self.start(["ip", "netns", "exec", self.ns[0]] + self.node_args(0, 1, port, addr) +
                           ["--ready-file", self.path("ready_n0_${local_rank}"), "--sleep", "120"])
        node1 = self.start(["ip", "netns", "exec", self.ns[1]] + self.node_args(1, 1, port, addr) +
                           ["--wait-for-file", ready, "--exit", "5"])
        r0 = self.finish(node0, timeout=TIMEOUT)
        self.assertExit(self.finish(node1, timeout=TIMEOUT), 5)
        self.assertExit(r0, 5)
        self.assertIn("the root cause is on node 1", r0.stderr, r0.describe())
        self.assertNothingLeft()

    def test_network_partition_stops_both_sides(self):
        """The veth link goes down under a running group: node 0 (the store) loses node 1's
        heartbeats and node 1 loses the store; each side stops its workers and exits non-zero
        with one line naming the other node, and no process is left."""
        port = 29500 + (os.getpid() % 1000)
        addr = "10.213.7.1"
        ready = [self.path("ready_n%d_0" % n) for n in range(2)]
        nodes = [self.start(["ip", "netns", "exec", self.ns[n]] + self.node_args(n, 1, port, addr) +
                            ["--ready-file", self.path("ready_n%d_${local_rank}" % n),
                             "--sleep", "120"])
                 for n in range(2)]
        self.wait_for_files(ready, timeout=30, proc=nodes[0])
        lib.NetnsPair.set_link(self.ns[1], self.devices[1], "down")
        cut_at = time.monotonic()
        results = [self.finish(node, timeout=TIMEOUT) for node in nodes]
        elapsed = time.monotonic() - cut_at
        for n, result in enumerate(results):
            self.assertNotEqual(result.returncode, 0, result.describe())
            self.assertIn("node %d" % (1 - n), result.stderr, result.describe())
            self.assertNoLauncherTraceback(result)
        # Heartbeat timeout 1 s x 3, plus an interval on each side and slack; node 0 must not
        # wait out its 10 s store linger for the lost node's connections, which never close.
        self.assertLess(elapsed, 8.0, results[0].describe())
        self.assertNothingLeft()
        print("\n[multinode] link down -> both nodes exited after %.2f s" % elapsed)


if __name__ == "__main__":
    unittest.main()
