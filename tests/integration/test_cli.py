"""Command-line handling: one-line errors with exit code 2, argparse-style prefixes, both option
spellings, PET_* defaults, --help and --version.
"""
import os
import unittest

from ddprun_testlib import DDPRUN, DDPRUN_LAUNCH, DdprunTestCase, FAKE_WORKER, free_port, read_json


class CliErrorTest(DdprunTestCase):
    """Bad input: exactly one line on stderr naming the problem, exit code 2, nothing started."""

    def assert_usage_error(self, args, must_mention, env=None, program=DDPRUN):
        result = self.run_launcher([program] + args, env=env, timeout=20)
        self.assertExit(result, 2)
        lines = [l for l in result.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, "expected one line on stderr\n" + result.describe())
        line = lines[0]
        self.assertTrue(any(word in line for word in must_mention),
                        "%r names none of %s\n%s" % (line, must_mention, result.describe()))
        self.assertNotIn("Traceback", result.stderr)
        self.assertFalse(os.path.exists(self.path("env_0.0")), "a worker was started")
        return line

    def worker(self):
        return ["--no_python", FAKE_WORKER, "--env-json", self.path("env_${local_rank}")]

    def test_endpoint_list_is_for_c10d_only(self):
        line = self.assert_usage_error(
            ["--nnodes=2", "--node_rank=0", "--rdzv_endpoint=h1:29500,h2:29500"] + self.worker(),
            ["rdzv_endpoint"])
        self.assertIn("c10d", line)

    def test_endpoint_list_with_an_empty_entry(self):
        line = self.assert_usage_error(
            ["--nnodes=1:3", "--rdzv_backend=c10d", "--rdzv_endpoint=h1:29400,,h2"] + self.worker(),
            ["rdzv_endpoint"])
        self.assertIn("empty endpoint", line)

    def test_endpoint_list_with_a_bad_port(self):
        self.assert_usage_error(
            ["--nnodes=1:3", "--rdzv_backend=c10d", "--rdzv_endpoint=h1:29400,h2:x"] + self.worker(),
            ["port"])

    def test_dry_run_shows_where_the_store_moves(self):
        result = self.ddprun("--dry_run", "--nnodes=1:3", "--rdzv_backend=c10d",
                             "--rdzv_endpoint=127.0.0.1:29411,10.9.9.9:29411", "--rdzv_id=x",
                             *self.worker(), timeout=20)
        self.assertExit(result, 0)
        self.assertIn("serves the rendezvous store at 127.0.0.1:29411", result.stdout)
        self.assertIn("the store moves to a member of the last round, on port 29411; a node "
                      "without a round tries the 2 endpoints in order", result.stdout)

    def test_ddprun_launch_passes_local_rank_after_the_script(self):
        script = self.path("train.py")
        open(script, "w").close()
        result = self.run_launcher([DDPRUN_LAUNCH, "--dry_run", "--python=python3",
                                    "--nproc_per_node=2", script, "--lr", "1"], timeout=20)
        self.assertExit(result, 0)
        for rank in (0, 1):
            self.assertIn("  command: python3 -u %s --local_rank=%d --lr 1\n" % (script, rank),
                          result.stdout, result.describe())

    def test_pass_local_rank_bad_value(self):
        line = self.assert_usage_error(["--pass_local_rank=rank"] + self.worker(),
                                       ["--pass_local_rank=rank"], program=DDPRUN_LAUNCH)
        self.assertIn("local_rank or local-rank", line)

    def test_nnodes_zero(self):
        self.assert_usage_error(["--nnodes=0"] + self.worker(), ["nnodes"])

    def test_refused_line_leaves_no_log_directory(self):
        """A refused configuration is refused before any directory or port exists, --tee too."""
        tmpdir = self.path("tmp")
        os.mkdir(tmpdir)
        for args in (["--tee", "3", "--rdzv_backend=zookeeper", "--rdzv_endpoint=127.0.0.1:2181"],
                     ["--tee", "3", "--nnodes=2", "--node_rank=2"],
                     ["--tee", "3", "--dry_run", "--rdzv_backend=etcd-v2"]):
            self.assert_usage_error(args + self.worker(), ["rdzv_backend", "node_rank"],
                                    env=self.env({"TMPDIR": tmpdir}))
        self.assertEqual(os.listdir(tmpdir), [])

    def test_pet_value_is_named_as_the_variable(self):
        line = self.assert_usage_error(self.worker(), ["PET_NODE_RANK"],
                                       env=self.env({"PET_NNODES": "2", "PET_NODE_RANK": "3"}))
        self.assertIn("PET_NNODES=2", line)

    def test_nnodes_min_above_max(self):
        self.assert_usage_error(["--nnodes=3:2"] + self.worker(), ["nnodes"])

    def test_nnodes_three_parts(self):
        self.assert_usage_error(["--nnodes=1:2:3"] + self.worker(), ["nnodes"])

    def test_nnodes_not_a_number(self):
        self.assert_usage_error(["--nnodes=a"] + self.worker(), ["nnodes"])

    def test_nproc_negative(self):
        self.assert_usage_error(["--nproc_per_node=-1"] + self.worker(), ["nproc"])

    def test_nproc_zero(self):
        self.assert_usage_error(["--nproc_per_node=0"] + self.worker(), ["nproc"])

    def test_nproc_unsupported_word(self):
        self.assert_usage_error(["--nproc_per_node=foo"] + self.worker(), ["nproc", "foo"])

    def test_master_port_out_of_range(self):
        self.assert_usage_error(["--master_port=70000"] + self.worker(),
                                ["master_port", "master-port", "70000"])

    def test_unknown_option(self):
        self.assert_usage_error(["--bogus"] + self.worker(), ["--bogus"])

    def test_unknown_option_with_value(self):
        self.assert_usage_error(["--bogus=1", "--standalone"] + self.worker(), ["--bogus"])

    def test_missing_script(self):
        self.assert_usage_error(["--standalone", "--nproc_per_node=2"],
                                ["training_script", "script"])

    def test_nonexistent_script(self):
        self.assert_usage_error(["--standalone", "--nproc_per_node=1",
                                 "/nonexistent/dir/train.py"], ["/nonexistent/dir/train.py"])

    def test_redirects_out_of_range(self):
        self.assert_usage_error(["--redirects=9"] + self.worker(), ["redirects", "9"])

    def test_tee_bad_map(self):
        self.assert_usage_error(["--tee=0:5"] + self.worker(), ["tee", "0:5"])

    def test_max_restarts_negative(self):
        self.assert_usage_error(["--max_restarts=-1"] + self.worker(), ["max_restarts",
                                                                       "max-restarts"])

    def test_bad_start_method(self):
        self.assert_usage_error(["--start_method=bogus"] + self.worker(), ["start_method",
                                                                         "start-method", "bogus"])

    def test_local_ranks_filter_not_ints(self):
        self.assert_usage_error(["--local_ranks_filter=a,b"] + self.worker(),
                                ["local_ranks_filter", "local-ranks-filter"])

    def test_bad_pet_value(self):
        # PET_* values go through the same validation as the flag.
        self.assert_usage_error(self.worker(), ["nproc", "abc", "PET_NPROC_PER_NODE"],
                                env=self.env({"PET_NPROC_PER_NODE": "abc"}))


class CliTest(DdprunTestCase):

    def run_count(self, *flags, env=None):
        """Runs fake workers that write their env; returns the LOCAL_WORLD_SIZE they saw."""
        result = self.ddprun("--standalone", *flags, "--no_python", FAKE_WORKER, "--env-json",
                             self.path("env_${local_rank}"), env=env)
        self.assertExit(result, 0)
        written = sorted(f for f in os.listdir(self.tmp) if f.startswith("env_"))
        size = int(read_json(self.path("env_0.0"))["LOCAL_WORLD_SIZE"])
        self.assertEqual(written, ["env_%d.0" % r for r in range(size)], result.describe())
        return size

    def test_prefix_abbreviation(self):
        self.assertEqual(self.run_count("--nproc=2"), 2)

    def test_prefix_abbreviation_separate_value(self):
        self.assertEqual(self.run_count("--nproc", "2"), 2)

    def test_dashed_spelling(self):
        self.assertEqual(self.run_count("--nproc-per-node=2"), 2)

    def test_underscore_spelling(self):
        self.assertEqual(self.run_count("--nproc_per_node", "3"), 3)

    def test_pet_default(self):
        self.assertEqual(self.run_count(env=self.env({"PET_NPROC_PER_NODE": "2"})), 2)

    def test_flag_overrides_pet(self):
        self.assertEqual(self.run_count("--nproc_per_node=3",
                                        env=self.env({"PET_NPROC_PER_NODE": "2"})), 3)

    def test_pet_standalone_flag(self):
        # PET_STANDALONE=1 acts as --standalone, which overrides an explicit --rdzv_id.
        result = self.ddprun("--nproc_per_node=1", "--rdzv_backend=c10d",
                             "--rdzv_endpoint=localhost:%d" % free_port(), "--rdzv_id=myid",
                             "--no_python", FAKE_WORKER, "--env-json",
                             self.path("env"), env=self.env({"PET_STANDALONE": "1"}))
        self.assertExit(result, 0)
        self.assertRegex(read_json(self.path("env.0"))["TORCHELASTIC_RUN_ID"], r"^[0-9a-f-]{36}$")

    def test_help(self):
        result = self.ddprun("--help", timeout=20)
        self.assertExit(result, 0)
        self.assertIn("--nproc_per_node", result.stdout, result.describe())
        self.assertNotIn("Traceback", result.stderr)

    def test_short_help(self):
        result = self.ddprun("-h", timeout=20)
        self.assertExit(result, 0)
        self.assertIn("--nproc_per_node", result.stdout, result.describe())

    def test_version(self):
        result = self.ddprun("--version", timeout=20)
        self.assertExit(result, 0)
        self.assertTrue(result.stdout.strip(), result.describe())


if __name__ == "__main__":
    unittest.main()
