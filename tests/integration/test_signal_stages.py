"""A handled signal ends ddprun with exit 128+N at every stage of a launch, never by the signal
itself: waiting for the other node, workers running, stopping workers after a remote failure,
in the exit barrier, and as the run ends. Each stage is reached by waiting on the agent's
--event-log lines (no sleeps), then the signal is sent.
"""
import json
import os
import signal
import unittest

import ddprun_testlib as lib
from ddprun_testlib import DDPRUN, FAKE_WORKER, DdprunTestCase, free_port, wait_for

TIMEOUT = 60.0
FAST = "--rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3,join_timeout=60"


def events(path):
    try:
        with open(path) as log:
            return [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []


class SignalStagesTest(DdprunTestCase):

    def node(self, node_rank, port, *worker, nproc=1, extra=()):
        log = self.path("events_%d.jsonl" % node_rank)
        args = [DDPRUN, "--nnodes=2", "--node_rank=%d" % node_rank, "--master_addr=127.0.0.1",
                "--master_port=%d" % port, "--nproc_per_node=%d" % nproc, FAST,
                "--event-log", log] + list(extra) + ["--no_python", FAKE_WORKER] + list(worker)
        return self.start(args), log

    def wait_event(self, log, what, count=1, proc=None):
        def seen():
            if proc is not None and proc.poll() is not None:
                raise AssertionError("ddprun exited (%s) before %s" % (proc.returncode, what))
            return sum(1 for e in events(log) if what(e)) >= count
        wait_for(seen, TIMEOUT, "event %s" % getattr(what, "__name__", what))

    def assertSignalled(self, proc, sig, allowed_before=()):
        proc.send_signal(sig)
        result = self.finish(proc, timeout=TIMEOUT)
        self.assertIn(result.returncode, (128 + sig,) + tuple(allowed_before), result.describe())
        self.assertNoLauncherTraceback(result)
        return result

    def test_waiting_for_the_other_node(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            proc, log = self.node(0, free_port(), "--exit", "0")
            self.wait_event(log, lambda e: e["event"] == "rendezvous_started", proc=proc)
            self.assertSignalled(proc, sig)
            os.unlink(log)

    def test_workers_running(self):
        port = free_port()
        ready = [self.path("ready_%d" % n) for n in range(2)]
        procs = [self.node(n, port, "--ready-file", ready[n], "--sleep", "120")[0]
                 for n in range(2)]
        self.wait_for_files(ready, timeout=TIMEOUT)
        self.assertSignalled(procs[0], signal.SIGTERM)
        self.finish(procs[1], timeout=TIMEOUT)  # told by node 0's leaving record

    def test_stopping_workers_after_a_remote_failure(self):
        port = free_port()
        ready = self.path("ready_0")
        # Node 0's worker ignores SIGTERM: its stop lasts the shutdown timeout.
        node0, log0 = self.node(0, port, "--ignore-sigterm", "--ready-file", ready,
                                "--sleep", "120", extra=["--shutdown_timeout=20"])
        fail = self.path("fail")
        node1, _ = self.node(1, port, "--wait-for-file", fail, "--exit", "3")
        self.wait_for_files([ready], timeout=TIMEOUT, proc=node0)
        with open(fail, "w"):
            pass
        self.wait_event(log0, lambda e: e["event"] == "remote_failure", proc=node0)
        self.assertSignalled(node0, signal.SIGTERM)
        self.assertEqual(self.finish(node1, timeout=TIMEOUT).returncode, 3)

    def test_in_the_exit_barrier(self):
        port = free_port()
        release = self.path("release")
        node0, log0 = self.node(0, port, "--exit", "0")
        node1, _ = self.node(1, port, "--wait-for-file", release)
        self.wait_event(log0, lambda e: e["event"] == "worker_exited" and e["exitcode"] == 0,
                        proc=node0)
        self.assertSignalled(node0, signal.SIGTERM)
        with open(release, "w"):
            pass
        self.finish(node1, timeout=TIMEOUT)

    def test_as_the_run_ends_never_by_the_signal(self):
        # The signal lands after the agent is done (closing the rendezvous, reporting, exiting):
        # the exit is 143, or 0 when ddprun had already left; never death by SIGTERM.
        for attempt in range(3):
            port = free_port()
            procs = [self.node(n, port, "--exit", "0") for n in range(2)]
            self.wait_event(procs[0][1], lambda e: e["event"] == "finished")
            self.assertSignalled(procs[0][0], signal.SIGTERM, allowed_before=(0,))
            self.assertEqual(self.finish(procs[1][0], timeout=TIMEOUT).returncode, 0)
            for path in (procs[0][1], procs[1][1]):
                os.unlink(path)


if __name__ == "__main__":
    unittest.main()
