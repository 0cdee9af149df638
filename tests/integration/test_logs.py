"""Worker output: --tee prefixes, --redirects into the log dir (torchrun reference §6.3 layout
<log_dir>/<run_id>_<random>/attempt_<n>/<local_rank>/{stdout,stderr}.log), --local_ranks_filter,
and whole-line (never torn) console output under --tee.
"""
import glob
import os
import re
import unittest

from ddprun_testlib import DdprunTestCase, FAKE_WORKER, glob_one, read_file, read_json


class LogsTest(DdprunTestCase):

    def run_printers(self, *flags, nproc=2):
        """Each worker prints out_<r> on stdout, err_<r> on stderr and writes its env."""
        result = self.ddprun("--standalone", "--nproc_per_node=%d" % nproc, *flags, "--no_python",
                             FAKE_WORKER, "--env-json", self.path("env_${local_rank}"),
                             "--print", "out_${local_rank}", "--print-err", "err_${local_rank}")
        self.assertExit(result, 0)
        return result

    def run_dir(self, log_dir):
        run_id = read_json(self.path("env_0.0"))["TORCHELASTIC_RUN_ID"]
        return glob_one(self, os.path.join(log_dir, glob.escape(run_id) + "_*"))

    def assertRankLogFiles(self, log_dir):
        """Each of the 2 workers' stdout and stderr is in <run dir>/attempt_0/<rank>/; returns
        those directories by rank."""
        run_dir = self.run_dir(log_dir)
        attempts = [os.path.join(run_dir, "attempt_0", str(r)) for r in range(2)]
        for r, attempt in enumerate(attempts):
            self.assertEqual(read_file(os.path.join(attempt, "stdout.log")), "out_%d\n" % r)
            self.assertEqual(read_file(os.path.join(attempt, "stderr.log")), "err_%d\n" % r)
        return attempts

    def test_default_output_is_unprefixed(self):
        result = self.run_printers()
        self.assertEqual(sorted(l for l in result.stdout.splitlines() if l), ["out_0", "out_1"],
                         result.describe())
        self.assertIn("err_0", result.stderr.splitlines(), result.describe())
        self.assertIn("err_1", result.stderr.splitlines(), result.describe())

    def test_tee_prefixes_both_streams(self):
        result = self.run_printers("--tee", "3")
        self.assertEqual(sorted(l for l in result.stdout.splitlines() if l),
                         ["[default0]:out_0", "[default1]:out_1"], result.describe())
        stderr_lines = result.stderr.splitlines()
        self.assertIn("[default0]:err_0", stderr_lines, result.describe())
        self.assertIn("[default1]:err_1", stderr_lines, result.describe())
        self.assertNotIn("err_0", stderr_lines, result.describe())

    def test_tee_prefix_uses_role(self):
        result = self.run_printers("--tee", "3", "--role", "trainer")
        self.assertIn("[trainer1]:out_1", result.stdout.splitlines(), result.describe())

    def test_tee_stdout_only(self):
        result = self.run_printers("-t", "1")
        self.assertIn("[default0]:out_0", result.stdout.splitlines(), result.describe())
        self.assertIn("err_0", result.stderr.splitlines(), result.describe())

    def test_redirects_go_to_log_dir_not_console(self):
        log_dir = self.path("logs")
        result = self.run_printers("--redirects", "3", "--log_dir", log_dir)
        self.assertNotIn("out_", result.stdout, result.describe())
        self.assertNotIn("err_", result.stderr, result.describe())
        for r, attempt in enumerate(self.assertRankLogFiles(log_dir)):
            env = read_json(self.path("env_%d.0" % r))
            self.assertEqual(env["TORCHELASTIC_ERROR_FILE"], os.path.join(attempt, "error.json"))

    def test_redirects_with_dashed_flag_and_map(self):
        # "-r 0:3": only local rank 0 is redirected; rank 1 (absent from the map) gets 0.
        log_dir = self.path("logs")
        result = self.run_printers("-r", "0:3", "--log-dir", log_dir)
        self.assertEqual(sorted(l for l in result.stdout.splitlines() if l), ["out_1"],
                         result.describe())
        run_dir = self.run_dir(log_dir)
        self.assertEqual(read_file(os.path.join(run_dir, "attempt_0", "0", "stdout.log")),
                         "out_0\n")

    def test_tee_also_writes_files(self):
        log_dir = self.path("logs")
        result = self.run_printers("--tee", "3", "--log_dir", log_dir)
        self.assertIn("[default0]:out_0", result.stdout.splitlines(), result.describe())
        self.assertRankLogFiles(log_dir)

    def test_local_ranks_filter(self):
        log_dir = self.path("logs")
        result = self.run_printers("--tee", "3", "--local_ranks_filter", "0", "--log_dir",
                                   log_dir)
        self.assertEqual(sorted(l for l in result.stdout.splitlines() if l),
                         ["[default0]:out_0"], result.describe())
        self.assertNotIn("err_1", result.stderr, result.describe())
        self.assertRankLogFiles(log_dir)

    def test_long_lines_are_never_interleaved(self):
        nproc, count, length = 4, 1000, 3000
        result = self.ddprun("--standalone", "--nproc_per_node=%d" % nproc, "--tee", "3",
                             "--no_python", FAKE_WORKER, "--lines", str(count), "--line-length",
                             str(length), timeout=120)
        self.assertExit(result, 0)
        pattern = re.compile(r"^\[default(\d)\]:r(\d) (\d+) ([a-z])\4*$")
        seen = {r: [] for r in range(nproc)}
        for line in result.stdout.split("\n")[:-1]:
            m = pattern.match(line)
            self.assertTrue(m and m.group(1) == m.group(2), "torn line: %r" % line[:200])
            self.assertEqual(len(line), len("[default0]:") + length, "torn line: %r" % line[:200])
            index = int(m.group(3))
            self.assertEqual(m.group(4), chr(ord("a") + index % 26), "torn line: %r" % line[:200])
            seen[int(m.group(1))].append(index)
        self.assertTrue(result.stdout.endswith("\n"))
        for r in range(nproc):
            self.assertEqual(seen[r], list(range(count)), "rank %d lines lost or reordered" % r)

    def test_partial_last_line_is_flushed(self):
        # A worker whose last output has no newline: the text still reaches the console.
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--tee", "3", "--no_python",
                             "/bin/sh", "-c", "printf 'no newline'")
        self.assertExit(result, 0)
        self.assertIn("[default0]:no newline", result.stdout, result.describe())


if __name__ == "__main__":
    unittest.main()
