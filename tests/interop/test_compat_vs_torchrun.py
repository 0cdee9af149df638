"""torchrun's event handler and store-sharing switch, checked against real PyTorch:
- --event-log-handler=console: ddprun's torchelastic.worker.status.* lines have torchrun 2.x's
  names, sources, states and metadata keys for the same failing run (torchrun 2.x side by side);
- TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: worker rank 0 of torch 1.13 and 2.x serves the store
  and a gloo all_reduce works. Exit 77 (skipped) without torch.
"""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

WORKER = os.path.join(lib.INTEROP_DIR, "compat_worker.py")
TORCH1 = lib.SYSTEM_PYTHON if lib.torch_major(lib.SYSTEM_PYTHON) == 1 else None
TORCH2 = lib.torch2_python() if lib.torch_major(lib.torch2_python()) == 2 else None
PREFIX = "torchelastic.worker.status."
TIMEOUT = 120


def console_events(stderr):
    return [json.loads(line) for line in stderr.splitlines()
            if line.startswith("{") and PREFIX in line.split(",")[0]]


def shape(events):
    """What must match: per event its name, source, state, global rank, metadata keys, the keys
    of the inner metadata and, for workers, the exit code."""
    out = []
    for event in events:
        metadata = event["metadata"]
        inner = json.loads(metadata["metadata"])
        out.append((event["name"], event["source"], metadata["state"], metadata["global_rank"],
                    tuple(sorted(metadata)), tuple(sorted(inner)), tuple(inner.get("exit_code", ()))))
    return out


class ConsoleEventsVsTorchrun(lib.DdprunTestCase):

    @unittest.skipUnless(TORCH2, "no torch 2.x venv (run scripts/setup-torch2-venv.sh)")
    def test_failing_run_tells_the_same_events(self):
        args = ["--standalone", "--nproc_per_node=2", "--event-log-handler=console"]
        torchrun = self.run_launcher([TORCH2, "-m", "torch.distributed.run"] + args +
                                     [WORKER, "fail"], timeout=TIMEOUT)
        ddprun = self.run_launcher([lib.DDPRUN, "--python", TORCH2] + args + [WORKER, "fail"],
                                   timeout=TIMEOUT)
        self.assertEqual(torchrun.returncode, 1, torchrun.describe())  # ChildFailedError
        self.assertExit(ddprun, 3)
        # ddprun's rounds come with their ranks: it tells no separate ASSIGN_WORKER_RANKS.
        expected = [e for e in shape(console_events(torchrun.stderr))
                    if e[0] != PREFIX + "ASSIGN_WORKER_RANKS"]
        self.assertEqual(len(expected), 6, torchrun.describe())
        self.assertEqual(shape(console_events(ddprun.stderr)), expected, ddprun.describe())


class OwnWorkerStore:
    """The tests, once per torch version (PYTHON)."""
    PYTHON = None

    def test_rank_0_serves_the_store_and_gloo_works(self):
        env = self.env({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
        result = self.run_launcher([lib.DDPRUN, "--python", self.PYTHON, "--standalone",
                                    "--nproc_per_node=2", WORKER, "allreduce", self.tmp],
                                   env=env, timeout=TIMEOUT)
        self.assertExit(result, 0)
        for rank in range(2):
            with open(os.path.join(self.tmp, "rank_%d.json" % rank)) as report:
                seen = json.load(report)
            self.assertEqual(seen["sum"], 3.0)
            self.assertEqual(seen["use_agent_store"], "False")


@unittest.skipUnless(TORCH1, "no torch 1.x at /usr/bin/python3")
class OwnWorkerStoreTorch1(OwnWorkerStore, lib.DdprunTestCase):
    PYTHON = TORCH1


@unittest.skipUnless(TORCH2, "no torch 2.x venv (run scripts/setup-torch2-venv.sh)")
class OwnWorkerStoreTorch2(OwnWorkerStore, lib.DdprunTestCase):
    PYTHON = TORCH2


if __name__ == "__main__":
    unittest.main()
