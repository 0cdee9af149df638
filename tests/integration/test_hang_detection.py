"""Hang detection with the real launcher and plain (non-torch) workers (issue 24): a silent
worker is caught within the timeout and its group fails with the cause; pulses keep a silent
worker alive; workers keep their terminal (a pseudo-terminal where the console is one); a
failure without @record shows the last lines of its stderr; the event log records the hang.
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
