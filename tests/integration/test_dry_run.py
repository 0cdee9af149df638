"""--dry_run with --env_preset: the real binary, a fixed environment, exact expected output.

Each preset runs `ddprun --env_preset=X --dry_run --nproc_per_node=2 --no_python /bin/true` with
only PATH, TMPDIR and the platform's variables set, and its stdout must equal
expected/dry_run_<preset>.txt byte for byte: nothing in a dry run is random for these
(non-standalone) command lines. DDPRUN_UPDATE_EXPECTED=1 rewrites the files instead.

DryRunIsTheRunTest runs a line with and without --dry_run: the workers started are those shown.
"""
import json
import os
import subprocess
import tempfile
import unittest

from ddprun_testlib import DDPRUN, FAKE_WORKER, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_DIR = os.path.join(HERE, "expected")
COMMAND = ["--dry_run", "--nproc_per_node=2", "--no_python", "/bin/true"]

PRESET_ENVS = {
    "aiplatform": {
        "WORLD_SIZE": "2",
        "RANK": "0",
        "MASTER_ADDR": "cmle-training-master-0",
        "MASTER_PORT": "2222",
    },
    "azureml": {
        "WORLD_SIZE": "3",
        "NODE_RANK": "2",
        "MASTER_ADDR": "10.0.0.4",
        "MASTER_PORT": "6105",
    },
    "slurm": {
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "node[07-08]",
        "SLURM_JOB_ID": "4242",
    },
    "skypilot": {
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NODE_RANK": "1",
        "SKYPILOT_NODE_IPS": "172.31.0.10\n172.31.0.11\n",
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",  # overridden by --nproc_per_node=2
    },
}


class DryRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ddprun_dry_run_")
        self.addCleanup(self.tmp.cleanup)

    def run_ddprun(self, args, extra_env):
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": self.tmp.name}
        env.update(extra_env)
        return subprocess.run([DDPRUN] + args, env=env, capture_output=True, text=True,
                              timeout=60)

    def check_expected(self, name, text):
        path = os.path.join(EXPECTED_DIR, "dry_run_%s.txt" % name)
        if os.environ.get("DDPRUN_UPDATE_EXPECTED") == "1":
            with open(path, "w") as f:
                f.write(text)
        with open(path) as f:
            self.assertEqual(text, f.read(), "stdout differs from %s" % path)

    def test_each_preset_matches_its_expected_output(self):
        for preset, preset_env in sorted(PRESET_ENVS.items()):
            with self.subTest(preset=preset):
                result = self.run_ddprun(["--env_preset=" + preset] + COMMAND, preset_env)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.check_expected(preset, result.stdout)

    def test_output_is_deterministic_and_nothing_is_created(self):
        args = ["--env-preset", "slurm"] + COMMAND
        first = self.run_ddprun(args, PRESET_ENVS["slurm"])
        second = self.run_ddprun(args, PRESET_ENVS["slurm"])
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertEqual(os.listdir(self.tmp.name), [], "a dry run created files in TMPDIR")

    def test_preset_from_pet_env_preset(self):
        env = dict(PRESET_ENVS["slurm"], PET_ENV_PRESET="slurm")
        result = self.run_ddprun(COMMAND, env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.check_expected("slurm", result.stdout)

    def test_flags_win_over_the_preset(self):
        result = self.run_ddprun(["--env_preset=slurm", "--master_port=29555"] + COMMAND,
                                 PRESET_ENVS["slurm"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("  master           : node07:29555\n", result.stdout)
        self.assertIn("  env: MASTER_PORT=29555\n", result.stdout)

    def test_missing_variable_is_a_one_line_usage_error(self):
        env = dict(PRESET_ENVS["skypilot"])
        del env["SKYPILOT_NODE_RANK"]
        result = self.run_ddprun(["--env_preset=skypilot"] + COMMAND, env)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        self.assertEqual(
            result.stderr,
            "ddprun: error: --env_preset=skypilot: SKYPILOT_NODE_RANK is not set; "
            "expected this node's rank, an integer >= 0\n")

    def test_unknown_preset_lists_the_known_ones(self):
        result = self.run_ddprun(["--env_preset=k8s"] + COMMAND, {})
        self.assertEqual(result.returncode, 2)
        self.assertEqual(
            result.stderr,
            "ddprun: error: --env_preset=k8s: unknown preset; "
            "known: aiplatform, azureml, skypilot, slurm\n")


if __name__ == "__main__":
    unittest.main()


class DryRunIsTheRunTest(unittest.TestCase):
    """What --dry_run prints is what the run starts (one plan, launcher/backend/launch_plan.h):
    each worker's command, and every variable the dry run shows with a value ("<chosen at
    launch>" is not one; "<log_dir>" stands for the run's log directory)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ddprun_dry_run_")
        self.addCleanup(self.tmp.cleanup)

    def run_ddprun(self, args):
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": self.tmp.name}
        worker = ["--no_python", FAKE_WORKER, "--env-json",
                  os.path.join(self.tmp.name, "env_${local_rank}")]
        result = subprocess.run([DDPRUN, "--nproc_per_node=2"] + args + worker, env=env,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    @staticmethod
    def shown_workers(text):
        workers = []
        for line in text.splitlines():
            if line.startswith("worker local_rank="):
                workers.append({"env": {}})
            elif line.startswith("  command: "):
                workers[-1]["command"] = line[len("  command: "):]
            elif line.startswith("  env: "):
                name, _, value = line[len("  env: "):].partition("=")
                workers[-1]["env"][name] = value
        return workers

    def check_run_is_dry_run(self, args):
        random_id = "--standalone" in args  # a new run id each time, as torchrun's
        workers = self.shown_workers(self.run_ddprun(["--dry_run"] + args))
        self.assertEqual(len(workers), 2)
        self.run_ddprun(args)
        for local_rank, shown in enumerate(workers):
            self.assertIn(os.path.join(self.tmp.name, "env_%d" % local_rank), shown["command"])
            with open(os.path.join(self.tmp.name, "env_%d.0" % local_rank)) as f:  # attempt 0
                started = json.load(f)
            for name, value in shown["env"].items():
                if value.startswith("<chosen at") or (name == "TORCHELASTIC_RUN_ID" and random_id):
                    continue
                if value.startswith("<log_dir>"):
                    self.assertTrue(started.get(name, "").endswith(value[len("<log_dir>"):]), name)
                else:
                    self.assertEqual(started.get(name), value, "%s %s" % (args, name))

    def test_static_single_node(self):
        self.check_run_is_dry_run(["--master_port=%d" % free_port()])

    def test_standalone(self):
        self.check_run_is_dry_run(["--standalone"])

    def test_standalone_with_nnodes_is_one_node(self):
        """The dry run used to show --standalone --nnodes=2 as 2 nodes (WORLD_SIZE=4)."""
        self.check_run_is_dry_run(["--standalone", "--nnodes=2"])
