"""The worker environment (torchrun reference §2) and script-argument handling (§1.4)."""
import json
import os
import unittest

from ddprun_testlib import DdprunTestCase, FAKE_WORKER, free_port, read_json

OMP_BANNER = ("Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
              "to avoid your system being overloaded, please further tune the variable for "
              "optimal performance in your application as needed.")
STARS = "*****************************************"


class EnvTest(DdprunTestCase):

    def run_envs(self, *flags, nproc=3, env=None):
        """Runs `ddprun flags --no_python fake_worker --env-json ...`; returns (result, envs)."""
        result = self.ddprun(*flags, "--no_python", FAKE_WORKER,
                             "--env-json", self.path("env_${local_rank}"), env=env)
        self.assertExit(result, 0)
        envs = []
        for rank in range(nproc):
            path = self.path("env_%d.0" % rank)  # ".0": the restart count fake_worker appends
            self.assertTrue(os.path.exists(path), "no env from rank %d\n%s" % (rank,
                                                                             result.describe()))
            envs.append(read_json(path))
        extra = [f for f in os.listdir(self.tmp) if f.startswith("env_") and
                 f not in ["env_%d.0" % r for r in range(nproc)]]
        self.assertEqual(extra, [], "unexpected extra workers\n" + result.describe())
        return result, envs

    def test_standard_variables(self):
        result, envs = self.run_envs("--standalone", "--nproc_per_node=3")
        run_ids = set()
        ports = set()
        for rank, env in enumerate(envs):
            msg = "rank %d env: %s" % (rank, json.dumps(env, indent=1, sort_keys=True))
            expected = {
                "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3",
                "LOCAL_WORLD_SIZE": "3", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
                "ROLE_NAME": "default", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": "3",
                "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            }
            for key, value in expected.items():
                self.assertEqual(env.get(key), value, "%s\n%s" % (key, msg))
            self.assertTrue(env.get("MASTER_ADDR"), msg)
            port = env.get("MASTER_PORT", "")
            self.assertTrue(port.isdigit() and 0 < int(port) < 65536, msg)
            ports.add(port)
            self.assertTrue(env.get("TORCHELASTIC_RUN_ID"), msg)
            run_ids.add(env["TORCHELASTIC_RUN_ID"])
            self.assertIn(env.get("TORCHELASTIC_USE_AGENT_STORE"), ("True", "False"), msg)
            error_file = env.get("TORCHELASTIC_ERROR_FILE", "")
            self.assertTrue(error_file.endswith("/attempt_0/%d/error.json" % rank), msg)
            self.assertTrue(os.path.isabs(error_file), msg)
        self.assertEqual(len(run_ids), 1, "ranks disagree on TORCHELASTIC_RUN_ID")
        self.assertEqual(len(ports), 1, "ranks disagree on MASTER_PORT")
        # Standalone: a fresh uuid4 run id per job.
        self.assertRegex(run_ids.pop(), r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                        r"[0-9a-f]{12}$")

    def test_error_files_share_one_run_log_dir(self):
        _, envs = self.run_envs("--standalone", "--nproc_per_node=3")
        dirs = {os.path.dirname(os.path.dirname(e["TORCHELASTIC_ERROR_FILE"])) for e in envs}
        self.assertEqual(len(dirs), 1, dirs)
        run_dir = os.path.dirname(dirs.pop())
        self.assertTrue(os.path.basename(run_dir).startswith(envs[0]["TORCHELASTIC_RUN_ID"] + "_"),
                        run_dir)

    def test_role(self):
        _, envs = self.run_envs("--standalone", "--nproc_per_node=2", "--role", "trainer", nproc=2)
        for rank, env in enumerate(envs):
            self.assertEqual(env["ROLE_NAME"], "trainer")
            self.assertEqual(env["ROLE_RANK"], str(rank))
            self.assertEqual(env["ROLE_WORLD_SIZE"], "2")

    def test_max_restarts_exported(self):
        _, envs = self.run_envs("--standalone", "--nproc_per_node=2", "--max_restarts=4", nproc=2)
        for env in envs:
            self.assertEqual(env["TORCHELASTIC_MAX_RESTARTS"], "4")
            self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")

    def test_launcher_environment_is_inherited(self):
        _, envs = self.run_envs("--standalone", "--nproc_per_node=2", nproc=2,
                                env=self.env({"DDPRUN_TEST_CUSTOM": "x y=z", "PET_ROLE": "r"}))
        for env in envs:
            self.assertEqual(env["DDPRUN_TEST_CUSTOM"], "x y=z")
            self.assertEqual(env["PET_ROLE"], "r")  # PET_* leak through, as in torchrun
            self.assertEqual(env["ROLE_NAME"], "r")  # ...and act as flag defaults
            self.assertEqual(env["PATH"], os.environ["PATH"])

    def test_parent_nccl_async_error_handling_kept(self):
        _, envs = self.run_envs("--standalone", "--nproc_per_node=2", nproc=2,
                                env=self.env({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}))
        for env in envs:
            self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0")

    def test_omp_num_threads_default_and_banner(self):
        result, envs = self.run_envs("--standalone", "--nproc_per_node=3")
        for env in envs:
            self.assertEqual(env.get("OMP_NUM_THREADS"), "1")
        self.assertIn(OMP_BANNER, result.stderr, result.describe())
        lines = result.stderr.splitlines()
        i = next(i for i, l in enumerate(lines) if OMP_BANNER in l)
        self.assertIn(STARS, lines[i - 1], result.describe())
        self.assertIn(STARS, lines[i + 1], result.describe())

    def test_omp_num_threads_parent_value_kept_no_banner(self):
        result, envs = self.run_envs("--standalone", "--nproc_per_node=3",
                                     env=self.env({"OMP_NUM_THREADS": "7"}))
        for env in envs:
            self.assertEqual(env.get("OMP_NUM_THREADS"), "7")
        self.assertNotIn("OMP_NUM_THREADS", result.stderr, result.describe())

    def test_omp_num_threads_absent_for_single_worker(self):
        result, envs = self.run_envs("--standalone", "--nproc_per_node=1", nproc=1)
        self.assertNotIn("OMP_NUM_THREADS", envs[0])
        self.assertNotIn(OMP_BANNER, result.stderr, result.describe())

    def test_print_env_line(self):
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--no_python", FAKE_WORKER,
                             "--print-env")
        self.assertExit(result, 0)
        lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
        self.assertEqual(len(lines), 1, result.describe())
        env = json.loads(lines[0])
        self.assertEqual(env["RANK"], "0")
        self.assertEqual(env["WORLD_SIZE"], "1")

    def test_static_rendezvous_variables(self):
        # Explicit static rendezvous: MASTER_ADDR/PORT are the given strings, the agent store is
        # used, and the run id is the default "none".
        port = free_port()
        _, envs = self.run_envs("--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=static",
                                "--master_addr=127.0.0.1", "--master_port=%d" % port, nproc=2)
        for env in envs:
            self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
            self.assertEqual(env["MASTER_PORT"], str(port))
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")
            self.assertEqual(env["TORCHELASTIC_RUN_ID"], "none")

    def test_c10d_rendezvous_run_id(self):
        port = free_port()
        _, envs = self.run_envs("--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=c10d",
                                "--rdzv_endpoint=localhost:%d" % port, "--rdzv_id=myjob", nproc=2)
        for env in envs:
            self.assertEqual(env["TORCHELASTIC_RUN_ID"], "myjob")
            self.assertTrue(env["TORCHELASTIC_ERROR_FILE"].endswith("/attempt_0/%s/error.json" %
                                                                    env["LOCAL_RANK"]))
            self.assertIn("/myjob_", env["TORCHELASTIC_ERROR_FILE"])


class ArgsTest(DdprunTestCase):

    def dump_args(self, *script_args, nproc=2, flags=()):
        result = self.ddprun("--standalone", "--nproc_per_node=%d" % nproc, *flags, "--no_python",
                             FAKE_WORKER, "--dump-args", self.path("args_${local_rank}"),
                             *script_args)
        self.assertExit(result, 0)
        return [read_json(self.path("args_%d" % r)) for r in range(nproc)]

    def test_local_rank_macro(self):
        per_rank = self.dump_args("x${local_rank}y", "$local_rank", "a$$b", "${rank}", "$rank",
                                  "${local_rank}${local_rank}", "$", "$$local_rank", "${other}")
        for rank, args in enumerate(per_rank):
            self.assertEqual(args, ["x%dy" % rank, str(rank), "a$b", "${rank}", "$rank",
                                    "%d%d" % (rank, rank), "$", "$local_rank", "${other}"])

    def test_args_after_script_are_verbatim(self):
        per_rank = self.dump_args("--nnodes", "7", "-h", "--nproc_per_node=9", "--", "--help",
                                  "", "a b")
        for args in per_rank:
            self.assertEqual(args, ["--nnodes", "7", "-h", "--nproc_per_node=9", "--", "--help",
                                    "", "a b"])

    def test_double_dash_after_options_is_dropped(self):
        # torchrun (argparse): a lone "--" right after the options is dropped.
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--no_python", "--",
                             FAKE_WORKER, "--dump-args", self.path("args"), "x")
        self.assertExit(result, 0)
        self.assertEqual(read_json(self.path("args")), ["x"])

    def test_double_dash_right_after_script_is_dropped(self):
        # torchrun 1.13 (checked): `torchrun ... env.py -- a` gives the script ['a']; a later "--"
        # is kept (see test_args_after_script_are_verbatim).
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--no_python", FAKE_WORKER,
                             "--", "--dump-args", self.path("args"), "x")
        self.assertExit(result, 0)
        self.assertEqual(read_json(self.path("args")), ["x"])

    def test_script_path_substituted_too(self):
        # The macro applies to every worker argument, the script path included.
        link_dir = self.path("bin1")
        os.mkdir(link_dir)
        os.mkdir(self.path("bin0"))
        for r in range(2):
            os.symlink(FAKE_WORKER, self.path("bin%d" % r, "fw"))
        result = self.ddprun("--standalone", "--nproc_per_node=2", "--no_python",
                             self.path("bin${local_rank}", "fw"), "--env-json",
                             self.path("env_${local_rank}"))
        self.assertExit(result, 0)
        for r in range(2):
            self.assertEqual(read_json(self.path("env_%d.0" % r))["LOCAL_RANK"], str(r))


if __name__ == "__main__":
    unittest.main()
