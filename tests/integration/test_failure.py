"""Worker failures: teardown of the peers, exit code, torchrun's root-cause summary, restarts,
exec failures.

The summary format is torchrun's (checked against torchrun 1.13 on this machine):

    ============================================================
    /path/to/fake_worker FAILED
    ------------------------------------------------------------
    Failures:
      <NO_OTHER_FAILURES>
    ------------------------------------------------------------
    Root Cause (first observed failure):
    [0]:
      time      : 2026-11-23_11:13:42
      host      : localhost
      rank      : 1 (local_rank: 1)
      exitcode  : 3 (pid: 8492)
      error_file: <N/A>
      traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
    ============================================================

Newer torchrun also lists the peers it stopped under "Failures:" (exitcode -15/-9); both forms
are accepted. The border width is min(max(len(title), longest line of any failure block), 60).
"""
import os
import re
import socket
import unittest

from ddprun_testlib import DdprunTestCase, FAKE_WORKER, read_file, read_int_file, read_json

NPROC = 4
NO_TRACEBACK_HINT = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


def parse_summary(test, stderr, entrypoint):
    """Returns {"root": [lines of the root-cause block], "other": [...], "width": n} after checking
    the box structure; fails the test with the whole stderr when it is malformed."""
    lines = stderr.split("\n")
    title = "%s FAILED" % entrypoint
    test.assertIn(title, lines, "no summary title line %r in stderr:\n%s" % (title, stderr))
    t = lines.index(title)
    test.assertGreater(t, 0, stderr)
    border = lines[t - 1]
    test.assertTrue(border and set(border) == {"="}, "no '=' border above the title:\n" + stderr)
    width = len(border)
    section = "-" * width
    test.assertEqual(lines[t + 1], section, "no section line under the title:\n" + stderr)
    test.assertEqual(lines[t + 2], "Failures:", stderr)
    i = t + 3
    other = []
    while i < len(lines) and lines[i] != section:
        other.append(lines[i])
        i += 1
    test.assertLess(i, len(lines), "unterminated Failures section:\n" + stderr)
    test.assertEqual(lines[i + 1], "Root Cause (first observed failure):", stderr)
    i += 2
    root = []
    while i < len(lines) and lines[i] != border:
        root.append(lines[i])
        i += 1
    test.assertLess(i, len(lines), "no closing '=' border:\n" + stderr)
    # Width rule (torchrun's format_msg).
    block_lines = root + ([] if other == ["  <NO_OTHER_FAILURES>"] else other)
    expected_width = min(max([len(title)] + [len(l) for l in block_lines]), 60)
    test.assertEqual(width, expected_width, "border width %d, torchrun would use %d:\n%s" % (
        width, expected_width, stderr))
    return {"root": root, "other": other, "width": width}


def check_failure_block(test, block, rank, local_rank, exitcode, pid, error_file, traceback):
    """Checks one failure block ([idx]:, time, host, rank, exitcode, error_file, traceback)."""
    text = "\n".join(block)
    test.assertRegex(block[0], r"^\[\d+\]:$", text)
    test.assertRegex(block[1], r"^  time      : \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d$", text)
    test.assertRegex(block[2], r"^  host      : \S+$", text)
    test.assertEqual(block[3], "  rank      : %d (local_rank: %d)" % (rank, local_rank), text)
    test.assertEqual(block[4], "  exitcode  : %d (pid: %d)" % (exitcode, pid), text)
    if error_file is None:
        test.assertEqual(block[5], "  error_file: <N/A>", text)
    else:
        test.assertEqual(block[5], "  error_file: %s" % error_file, text)
    test.assertEqual(block[6], "  traceback : %s" % traceback[0], text)
    test.assertEqual(block[7:], ["  " + l for l in traceback[1:]], text)


class FailureTest(DdprunTestCase):

    def run_failing(self, *rank1_actions, extra_flags=(), timeout=60):
        """4 workers; local rank 1 waits until its peers are ready, then runs rank1_actions (which
        end it); the peers sleep until SIGTERM, which they record."""
        args = ["--standalone", "--nproc_per_node=%d" % NPROC] + list(extra_flags) + [
            "--no_python", FAKE_WORKER,
            "--pid-file", self.path("pid_${local_rank}"),
            "--on-sigterm-write", self.path("term_${local_rank}"),
            "--ready-file", self.path("ready_${local_rank}")]
        for r in range(NPROC):
            if r != 1:
                args += ["--if-local-rank", "1", "--wait-for-file", self.path("ready_%d" % r)]
        for action in rank1_actions:  # a flag gets the rank-1 guard, its value follows it
            args += ["--if-local-rank", "1", action] if action.startswith("--") else [action]
        args += ["--sleep", "300"]
        return self.ddprun(*args, timeout=timeout)

    def pid_of(self, rank):
        return read_int_file(self.path("pid_%d" % rank))

    def assert_peers_stopped(self, result):
        for r in range(NPROC):
            if r == 1:
                continue
            self.assertTrue(os.path.exists(self.path("term_%d" % r)),
                            "peer %d was not sent SIGTERM\n%s" % (r, result.describe()))
        self.wait_gone([self.pid_of(r) for r in range(NPROC)], timeout=2.0, what="workers")

    def test_worker_exit_code_is_propagated_with_root_cause(self):
        result = self.run_failing("--exit", "3")
        self.assertExit(result, 3)
        self.assert_peers_stopped(result)
        summary = parse_summary(self, result.stderr, FAKE_WORKER)
        check_failure_block(self, summary["root"], rank=1, local_rank=1, exitcode=3,
                            pid=self.pid_of(1), error_file=None, traceback=[NO_TRACEBACK_HINT])
        self.assertNotIn("Traceback (most recent call last)", result.stderr, result.describe())
        self.assertNoLauncherTraceback(result)

    def test_root_cause_host_is_fqdn_like_torchrun(self):
        result = self.run_failing("--exit", "3")
        self.assertExit(result, 3)
        summary = parse_summary(self, result.stderr, FAKE_WORKER)
        self.assertEqual(summary["root"][2], "  host      : %s" % socket.getfqdn(),
                         result.describe())

    def test_error_log_line_names_the_failed_worker(self):
        # torchrun: "failed (exitcode: 3) local_rank: 1 (pid: P) of binary: B" before the table.
        result = self.run_failing("--exit", "3")
        self.assertExit(result, 3)
        self.assertIn("failed (exitcode: 3) local_rank: 1 (pid: %d) of binary: %s" % (
            self.pid_of(1), FAKE_WORKER), result.stderr, result.describe())

    def test_other_failures_if_listed_are_stopped_peers(self):
        result = self.run_failing("--exit", "3")
        self.assertExit(result, 3)
        summary = parse_summary(self, result.stderr, FAKE_WORKER)
        if summary["other"] == ["  <NO_OTHER_FAILURES>"]:
            return  # torchrun <= 2.8 form
        # torchrun >= 2.9 form: the stopped peers, each with exitcode -15 (or 143 when they
        # handled SIGTERM and exited 143 themselves, as fake_worker does).
        text = "\n".join(summary["other"])
        for r in (0, 2, 3):
            self.assertIn("  rank      : %d (local_rank: %d)" % (r, r), text, result.describe())

    def test_worker_killed_by_sigkill(self):
        result = self.run_failing("--signal", "KILL")
        self.assertExit(result, 137)
        self.assert_peers_stopped(result)
        pid = self.pid_of(1)
        summary = parse_summary(self, result.stderr, FAKE_WORKER)
        check_failure_block(self, summary["root"], rank=1, local_rank=1, exitcode=-9, pid=pid,
                            error_file=None,
                            traceback=["Signal 9 (SIGKILL) received by PID %d" % pid])
        self.assertNoLauncherTraceback(result)

    def test_worker_killed_by_sigsegv(self):
        result = self.run_failing("--signal", "SEGV")
        self.assertExit(result, 139)
        pid = self.pid_of(1)
        self.assertIn("  traceback : Signal 11 (SIGSEGV) received by PID %d" % pid, result.stderr,
                      result.describe())

    def test_error_file_message_is_shown(self):
        message = "ValueError: boom from rank 1"
        # An explicit --log_dir keeps error.json after the run (ddprun removes its temp log dir).
        result = self.run_failing("--write-error-file", message, "--exit", "1",
                                  extra_flags=["--log_dir", self.path("logs")])
        self.assertExit(result, 1)
        self.assert_peers_stopped(result)
        summary = parse_summary(self, result.stderr, FAKE_WORKER)
        root = summary["root"]
        error_file = root[5][len("  error_file: "):]
        self.assertTrue(error_file.startswith(self.path("logs") + "/"), result.describe())
        self.assertTrue(error_file.endswith("/attempt_0/1/error.json"), result.describe())
        self.assertEqual(read_json(error_file)["message"]["message"], message)
        # fake_worker's py_callstack, continuation lines indented by two spaces (torchrun).
        check_failure_block(self, root, rank=1, local_rank=1, exitcode=1, pid=self.pid_of(1),
                            error_file=error_file,
                            traceback=["Traceback (most recent call last):",
                                       '  File "fake_worker", line 1', message, ""])
        # Only the worker's own traceback, none from the launcher.
        self.assertEqual(result.stderr.count("Traceback (most recent call last)"), 1,
                         result.describe())
        self.assertNoLauncherTraceback(result)

    def test_max_restarts_runs_three_attempts(self):
        env_base = self.path("env_${local_rank}")  # fake_worker appends ".<restart count>"
        # Rank 1 fails only once rank 0 has written its file of the attempt (else a slow start,
        # e.g. under ThreadSanitizer, has rank 0 stopped before it writes).
        result = self.ddprun("--standalone", "--nproc_per_node=2", "--max_restarts=2",
                             "--no_python", FAKE_WORKER, "--env-json", env_base,
                             "--if-local-rank", "1", "--wait-for-attempt-file", self.path("env_0"),
                             "--if-local-rank", "1", "--exit", "3", "--sleep", "300",
                             timeout=90)
        self.assertExit(result, 3)
        for attempt in range(3):
            for rank in range(2):
                path = self.path("env_%d.%d" % (rank, attempt))
                self.assertTrue(os.path.exists(path), "missing %s\n%s" % (path, result.describe()))
                env = read_json(path)
                self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], str(attempt))
                self.assertEqual(env["TORCHELASTIC_MAX_RESTARTS"], "2")
                self.assertTrue(env["TORCHELASTIC_ERROR_FILE"].endswith(
                    "/attempt_%d/%d/error.json" % (attempt, rank)), env["TORCHELASTIC_ERROR_FILE"])
        self.assertEqual(sorted(f for f in os.listdir(self.tmp) if f.startswith("env_")),
                         ["env_%d.%d" % (r, a) for r in range(2) for a in range(3)])

    def test_restart_then_success(self):
        # Attempt 0 fails (rank 1 exits 5 when no marker file exists yet), attempt 1 succeeds.
        script = self.path("flaky.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\n'
                    'if [ "$LOCAL_RANK" = 1 ] && [ ! -e "$1" ]; then : > "$1"; exit 5; fi\n'
                    'echo "$TORCHELASTIC_RESTART_COUNT" > "$2.$LOCAL_RANK"\n')
        os.chmod(script, 0o755)
        result = self.ddprun("--standalone", "--nproc_per_node=2", "--max_restarts=3",
                             "--no_python", script, self.path("failed_once"), self.path("done"))
        self.assertExit(result, 0)
        for rank in range(2):
            self.assertEqual(read_file(self.path("done.%d" % rank)).strip(), "1")

    def test_non_executable_script_exits_126(self):
        script = self.path("not_executable.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o644)
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--no_python", script)
        self.assertExit(result, 126)
        reason = [l for l in result.stderr.splitlines()
                  if script in l and "FAILED" not in l and "binary:" not in l]
        self.assertTrue(reason, "no line naming %s\n%s" % (script, result.describe()))
        self.assertRegex(reason[0], r"(?i)permission denied|not executable", result.describe())
        self.assertNoLauncherTraceback(result)

    def test_missing_python_exits_127(self):
        script = self.path("train.py")
        with open(script, "w") as f:
            f.write("print('hi')\n")
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--python",
                             "/nonexistent/python", script)
        self.assertExit(result, 127)
        reason = [l for l in result.stderr.splitlines()
                  if "/nonexistent/python" in l and "FAILED" not in l and "binary:" not in l]
        self.assertTrue(reason, result.describe())
        self.assertRegex(reason[0], r"(?i)no such file|not found", result.describe())
        self.assertNoLauncherTraceback(result)


if __name__ == "__main__":
    unittest.main()
