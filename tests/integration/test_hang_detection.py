"""Hang detection with the real launcher and plain (non-torch) workers (issue 24): a silent
worker is caught within the timeout and its group fails with the cause; pulses keep a silent
worker alive; workers keep their terminal (a pseudo-terminal where the console is one); a
failure without @record shows the last lines of its stderr; the event log records the hang.
Issue 37: start-up has its own timeout and its hang says so; hangs before any progress, three in
a row, stop the job with restarts left; the options' refusals and the dry run.
The torch workers' side (stacks, restarts, two nodes, the file timer) is tests/interop/test_hangs.py.
"""
import json
import os
import pty
import select
import subprocess
import time
import unittest

from ddprun_testlib import DDPRUN, DdprunTestCase, SYSTEM_PYTHON

SH = "/bin/sh"


class HangDetectionTest(DdprunTestCase):

    def shell(self, script, *flags, nproc=1, timeout=60):
        return self.ddprun("--standalone", "--nproc_per_node=%d" % nproc, *flags, "--no_python",
                           SH, "-c", script, timeout=timeout)

    def test_a_silent_worker_is_caught_within_the_timeout(self):
        events = self.path("events.jsonl")
        started = time.monotonic()
        result = self.shell("echo started; exec sleep 60", "--hang-timeout=1",
                            "--event-log", events)
        elapsed = time.monotonic() - started
        self.assertExit(result, 128 + 6)  # the shell died of the SIGABRT that asked for stacks
        self.assertLess(elapsed, 1 + 2 + 5, result.describe())  # timeout + 2 s, plus start-up
        self.assertIn("hang: rank 0 (local rank 0", result.stderr, result.describe())
        self.assertIn("no progress for 1.0 s", result.stderr)
        self.assertIn("rank 0: no Python stack", result.stderr)
        with open(events) as log:
            hangs = [e for e in map(json.loads, log) if e["event"] == "hang"]
        self.assertEqual(len(hangs), 1, result.describe())
        self.assertEqual(hangs[0]["kind"], "no_progress")
        self.assertEqual(hangs[0]["ranks"], [0])
        self.assertNoLauncherTraceback(result)

    def test_without_the_flag_a_silent_worker_is_left_alone(self):
        result = self.shell("sleep 2; echo done")
        self.assertExit(result, 0)
        self.assertNotIn("hang", result.stderr)

    def test_pulses_keep_a_silent_worker_alive(self):
        # Silent for 1.5 timeouts, pulsing every 0.2 s: from a shell, as the docs show.
        script = ('i=0; while [ $i -lt 15 ]; do echo > "$DDPRUN_PULSE_FILE"; sleep 0.2; '
                  'i=$((i+1)); done; echo finished')
        result = self.shell(script, "--hang-timeout=2", nproc=2)
        self.assertExit(result, 0)
        self.assertEqual(result.stdout.split(), ["finished", "finished"], result.describe())

    def test_output_is_progress(self):
        script = "i=0; while [ $i -lt 15 ]; do echo tick; sleep 0.2; i=$((i+1)); done"
        result = self.shell(script, "--hang-timeout=2")
        self.assertExit(result, 0)
        self.assertEqual(result.stdout.split().count("tick"), 15)

    def test_a_failure_without_record_shows_its_last_stderr_lines(self):
        result = self.shell("echo first >&2; echo 'ValueError: the real reason' >&2; exit 3")
        self.assertExit(result, 3)
        self.assertIn("last lines of stderr:", result.stderr, result.describe())
        self.assertIn("  ValueError: the real reason", result.stderr)
        self.assertNotIn("To enable traceback see", result.stderr)

    def events(self, path):
        with open(path) as log:
            return [json.loads(line) for line in log if line.strip()]

    def test_a_silent_start_is_caught_by_the_startup_timeout(self):
        events = self.path("events.jsonl")
        started = time.monotonic()
        result = self.shell("exec sleep 60", "--hang-timeout=1", "--hang-startup-timeout=2",
                            "--max-no-progress-hangs=1", "--event-log", events)
        elapsed = time.monotonic() - started
        self.assertExit(result, 128 + 6)
        self.assertIn("no first progress within the start-up timeout of 2 s", result.stderr,
                      result.describe())
        self.assertNotIn("no progress for", result.stderr, result.describe())
        self.assertGreater(elapsed, 2, result.describe())  # not the hang timeout of 1 s
        hangs = [e for e in self.events(events) if e["event"] == "hang"]
        self.assertEqual(len(hangs), 1, result.describe())
        self.assertTrue(hangs[0]["startup"])
        self.assertTrue(hangs[0]["before_progress"])

    def test_three_hangs_before_progress_stop_the_job_with_restarts_left(self):
        events = self.path("events.jsonl")
        result = self.shell("exec sleep 60", "--hang-timeout=1", "--hang-startup-timeout=1",
                            "--max_restarts=5", "--event-log", events, nproc=2)
        self.assertExit(result, 128 + 6)
        lines = [line for line in result.stderr.splitlines()
                 if "attempts in a row before any rank made progress" in line]
        self.assertEqual(len(lines), 1, result.describe())
        self.assertIn("the job hung 3 attempts in a row before any rank made progress past "
                      "start-up (--max-no-progress-hangs=3): not restarting again, 3 of 5 "
                      "restarts left unspent", lines[0])
        log = self.events(events)
        self.assertEqual(len([e for e in log if e["event"] == "workers_started"]), 3,
                         result.describe())
        self.assertEqual([e["hangs_before_progress"] for e in log if e["event"] == "hang"],
                         [1, 2, 3])
        self.assertEqual([e["event"] for e in log][-2:], ["no_progress_stop", "finished"])
        self.assertNoLauncherTraceback(result)

    def test_hang_options_refused_with_one_line_and_exit_2(self):
        for flags, message in (
                (("--hang-timeout=-1",), "--hang_timeout=-1: must be a number of seconds"),
                (("--hang-timeout=soon",), "--hang_timeout=soon: must be a number of seconds"),
                (("--hang-startup-timeout=60",),
                 "--hang_startup_timeout=60: applies only with hang detection"),
                (("--hang-timeout=5", "--hang-startup-timeout=auto"),
                 "--hang_startup_timeout=auto: must be a number of seconds > 0"),
                (("--hang-timeout=5", "--hang-timeout-floor=3"),
                 "--hang_timeout_floor=3: applies only to a learned hang timeout"),
                (("--max-no-progress-hangs=-2",),
                 "--max_no_progress_hangs=-2: must be an integer >= 0")):
            with self.subTest(flags=flags):
                result = self.shell("echo never", *flags)
                self.assertExit(result, 2)
                self.assertIn(message, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.describe())
                self.assertNotIn("never", result.stdout)

    def test_the_dry_run_shows_both_timeouts(self):
        result = self.shell("true", "--hang-timeout=auto", "--dry-run")
        self.assertExit(result, 0)
        self.assertIn("hang_timeout     : learned: auto (5 x the longest interval", result.stdout)
        self.assertIn("hang_startup_timeout: 600 s before a rank's first sign of progress",
                      result.stdout)
        result = self.shell("true", "--hang-timeout=3", "--hang-startup-timeout=45", "--dry-run")
        self.assertIn("hang_timeout     : 3 s between signs of progress (fixed)", result.stdout)
        self.assertIn("hang_startup_timeout: 45 s before", result.stdout, result.describe())

    def run_in_terminal(self, *flags):
        """Runs ddprun with a pseudo-terminal as its stdout and stderr; returns what it wrote."""
        master, slave = pty.openpty()
        code = "import sys; print('isatty', sys.stdout.isatty(), sys.stderr.isatty())"
        proc = self.start([DDPRUN, "--standalone", "--nproc_per_node=1", *flags, "--no_python",
                           SYSTEM_PYTHON, "-c", code], stdout=slave, stderr=slave)
        os.close(slave)
        output = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every slave closed
                break
            if not chunk:
                break
            output += chunk
        os.close(master)
        self.assertEqual(proc.wait(timeout=10), 0, output)
        return output.decode(errors="replace")

    def test_workers_keep_their_terminal(self):
        for flags in ((), ("--hang-timeout=5",)):
            with self.subTest(flags=flags):
                self.assertIn("isatty True True", self.run_in_terminal(*flags))

    def test_without_a_terminal_workers_see_none(self):
        code = "import sys; print('isatty', sys.stdout.isatty(), sys.stderr.isatty())"
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--hang-timeout=5",
                             "--no_python", SYSTEM_PYTHON, "-c", code)
        self.assertExit(result, 0)
        self.assertIn("isatty False False", result.stdout)


if __name__ == "__main__":
    unittest.main()
