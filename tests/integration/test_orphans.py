"""No orphans, ever (issue 12): whatever ddprun's workers start goes away with ddprun, on any end
of it, SIGKILL included (the session keeper, docs/architecture.md). Each launch: 4 workers of
orphan_tree.py, each with a child and a grandchild (12 descendants).
"""
import os
import signal
import sys
import unittest

import ddprun_testlib as lib
import orphan_tree as tree

NPROC = 4
DESCENDANTS = NPROC * tree.PER_WORKER
KILLS = 5  # bench/orphans_bench.py does 100
BOUND_S = 1.0


class OrphanTest(lib.DdprunTestCase):

    def start_tree(self, mode, own_group=False, flags=()):
        # ddprun's output goes to a file, not a pipe: leftovers holding a pipe would make the
        # harness wait for its end of file forever instead of failing.
        with open(self.path("ddprun.out"), "wb") as out:
            return self.start([lib.DDPRUN] + tree.ddprun_args(NPROC, mode, own_group, flags),
                              stdout=out, stderr=out)

    def launch(self, mode, own_group=False, flags=(), count=DESCENDANTS):
        proc = self.start_tree(mode, own_group, flags)
        return proc, tree.wait_for_tree(self.marker, proc, count)

    def wait_exit(self, proc, code):
        try:
            proc.wait(timeout=30)
        except Exception:
            lib.kill_quietly(proc.pid)
            raise
        self.assertEqual(proc.returncode, code, lib.read_file(self.path("ddprun.out")))

    def assertNothingLeft(self, what):
        left = lib.pids_with_marker(self.marker)
        self.assertEqual(left, [], "%s: left behind: %s" % (
            what, [(pid, tree.argv0(pid)) for pid in left]))

    def assertGoneAfterSigkill(self, proc, pids, what):
        self.assertEqual(len(tree.keepers(self.marker)), 1, "no session keeper")
        took = tree.sigkill_and_time(proc, pids, BOUND_S)
        self.assertIsNotNone(took, "%s: alive %.1f s after SIGKILL of ddprun: %s" % (
            what, BOUND_S, [pid for pid in pids if lib.is_alive(pid)]))
        proc.wait(timeout=10)
        # The keeper itself, and anything forked meanwhile, within the same bound.
        lib.wait_for(lambda: not lib.pids_with_marker(self.marker), BOUND_S - took,
                     "no process of the launch left")
        return took

    def test_sigkill_of_ddprun_leaves_no_descendant(self):
        timings = []
        for kill in range(KILLS):
            with self.subTest(kill=kill):
                proc, pids = self.launch("wait")
                self.assertEqual(len(pids), DESCENDANTS)
                timings.append(self.assertGoneAfterSigkill(proc, pids, "kill %d" % kill))
        print("\nSIGKILL -> last descendant gone: %s ms" % (
            ", ".join("%.1f" % (t * 1000) for t in timings)), file=sys.stderr)

    def test_sigkill_reaches_descendants_in_other_process_groups(self):
        proc, pids = self.launch("wait", own_group=True)
        self.assertGoneAfterSigkill(proc, pids, "own process groups")

    def test_sigkill_after_a_restart_covers_both_attempts(self):
        # Attempt 0's rank 0 fails leaving its tree; the group's stop reaches only the workers'
        # process groups, so attempt 0 leaves 2 processes per worker; attempt 1 runs 12.
        proc, pids = self.launch("fail-first", own_group=True, flags=["--max_restarts=1"],
                                 count=NPROC * 2 + DESCENDANTS)
        self.assertGoneAfterSigkill(proc, pids, "after a restart")

    def test_normal_end_leaves_nothing(self):
        # Each worker exits 0 leaving its child and grandchild in a process group of their own
        # (the group's stop at the end reaches only the workers' groups); ddprun waits for the
        # keeper's sweep, so nothing is left when it returns.
        self.wait_exit(self.start_tree("exit", own_group=True), 0)
        self.assertNothingLeft("after a normal end")

    def test_sigterm_of_ddprun_leaves_nothing(self):
        proc, _ = self.launch("wait", own_group=True)
        os.kill(proc.pid, signal.SIGTERM)
        self.wait_exit(proc, 143)
        self.assertNothingLeft("after SIGTERM of ddprun")

    def test_keeper_outlives_signals_to_ddprun_group(self):
        # Ctrl-C at a terminal signals the foreground process group: ddprun handles it, the
        # keeper (a session of its own) does not see it and still sweeps at the end.
        proc, _ = self.launch("wait", own_group=True)
        keeper = tree.keepers(self.marker)
        os.killpg(proc.pid, signal.SIGINT)
        self.wait_exit(proc, 130)
        self.assertEqual(len(keeper), 1)
        self.assertNothingLeft("after SIGINT to ddprun's process group")


if __name__ == "__main__":
    unittest.main()
