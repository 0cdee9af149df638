"""Signals to the launcher: SIGKILL (workers die with it), SIGTERM/SIGINT (forwarded, 128+N),
a worker ignoring SIGTERM (SIGKILL after --shutdown-timeout), grandchildren in the worker's group.
"""
import os
import signal
import time
import unittest

from ddprun_testlib import DdprunTestCase, FAKE_WORKER, is_alive, read_file, read_int_file

NPROC = 4


class SignalTest(DdprunTestCase):

    def start_sleepers(self, *worker_actions, extra_flags=(), nproc=NPROC):
        """Starts ddprun with `nproc` workers that run worker_actions, write a pid file, then sleep.

        Returns (launcher process, worker pids by local rank) once every worker is ready.
        """
        args = ["--standalone", "--nproc_per_node=%d" % nproc] + list(extra_flags) + [
            "--no_python", FAKE_WORKER] + list(worker_actions) + [
            "--pid-file", self.path("pid_${local_rank}"), "--sleep", "300"]
        proc = self.start_ddprun(*args)
        pid_files = [self.path("pid_%d" % r) for r in range(nproc)]
        self.wait_for_files(pid_files, timeout=30, proc=proc)
        return proc, [read_int_file(p) for p in pid_files]

    def test_sigkill_of_launcher_kills_workers(self):
        proc, pids = self.start_sleepers()
        for pid in pids:
            self.assertTrue(is_alive(pid))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # PR_SET_PDEATHSIG: a worker may linger as a zombie under PID 1 for ~1 s; Z counts as gone.
        self.wait_gone(pids, timeout=1.0, what="workers after SIGKILL of ddprun")

    def test_sigterm_is_forwarded_and_exit_is_143(self):
        proc, pids = self.start_sleepers("--on-sigterm-write", self.path("term_${local_rank}"))
        os.kill(proc.pid, signal.SIGTERM)
        result = self.finish(proc, timeout=30)
        self.assertExit(result, 143)
        for rank in range(NPROC):
            path = self.path("term_%d" % rank)
            self.assertTrue(os.path.exists(path), "worker %d got no SIGTERM\n%s" % (
                rank, result.describe()))
            self.assertEqual(read_file(path), "SIGTERM")
        self.wait_gone(pids, timeout=2.0, what="workers")
        self.assertNoLauncherTraceback(result)

    def test_sigint_exit_is_130(self):
        proc, pids = self.start_sleepers()
        os.kill(proc.pid, signal.SIGINT)
        result = self.finish(proc, timeout=30)
        self.assertExit(result, 130)
        self.wait_gone(pids, timeout=2.0, what="workers")
        self.assertNoLauncherTraceback(result)

    def test_sighup_exit_is_129(self):
        proc, pids = self.start_sleepers()
        os.kill(proc.pid, signal.SIGHUP)
        result = self.finish(proc, timeout=30)
        self.assertExit(result, 129)
        self.wait_gone(pids, timeout=2.0, what="workers")

    def test_worker_ignoring_sigterm_is_killed_after_shutdown_timeout(self):
        proc, pids = self.start_sleepers(
            "--if-local-rank", "2", "--ignore-sigterm", extra_flags=["--shutdown-timeout=1"])
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        result = self.finish(proc, timeout=30)
        took = time.monotonic() - sent
        self.assertExit(result, 143)
        self.assertGreaterEqual(took, 0.9, "ddprun did not wait for the grace period\n" +
                                result.describe())
        self.assertLess(took, 10.0, "SIGKILL did not follow the 1 s grace period\n" +
                        result.describe())
        self.wait_gone(pids, timeout=2.0, what="workers")

    def test_grandchild_in_worker_group_is_gone_after_stop(self):
        proc, pids = self.start_sleepers("--spawn-grandchild", self.path("gc_${local_rank}"),
                                         nproc=2)
        grandchildren = [read_int_file(self.path("gc_%d" % r)) for r in range(2)]
        for pid in grandchildren:
            self.assertTrue(is_alive(pid))
        os.kill(proc.pid, signal.SIGTERM)
        result = self.finish(proc, timeout=30)
        self.assertExit(result, 143)
        self.wait_gone(pids, timeout=2.0, what="workers")
        self.wait_gone(grandchildren, timeout=2.0, what="grandchildren")

    def test_success_leaves_no_workers(self):
        # Success path: all workers exit 0 -> ddprun exits 0 and nothing of the job is left.
        result = self.ddprun("--standalone", "--nproc_per_node=%d" % NPROC, "--no_python",
                             FAKE_WORKER, "--pid-file", self.path("pid_${local_rank}"))
        self.assertExit(result, 0)
        pids = [read_int_file(self.path("pid_%d" % r)) for r in range(NPROC)]
        self.wait_gone(pids, timeout=1.0, what="workers")


if __name__ == "__main__":
    unittest.main()
