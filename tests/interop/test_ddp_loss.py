"""Real PyTorch DDP (gloo, env://) under ddprun, compared with torchrun: the final loss of the
deterministic train_ddp.py must be exactly equal. Exit 77 (skipped) without torch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

TRAIN = os.path.join(lib.INTEROP_DIR, "train_ddp.py")
NPROC = 4
TIMEOUT = 240


class DdpLossTest(lib.DdprunTestCase):

    require_binaries = (lib.DDPRUN,)

    def ddprun_loss(self, *rdzv_flags):
        out = self.path("loss_ddprun")
        result = self.ddprun(*rdzv_flags, "--nproc_per_node=%d" % NPROC, "--python",
                             lib.SYSTEM_PYTHON, TRAIN, out, timeout=TIMEOUT)
        self.assertExit(result, 0)
        self.assertTrue(os.path.exists(out), "rank 0 wrote no loss\n" + result.describe())
        return float(lib.read_file(out))

    _torchrun_loss = None  # computed once per run: torchrun is the fixed reference

    def torchrun_loss(self):
        if not lib.torchrun_available():
            self.skipTest("%s not installed" % lib.TORCHRUN)
        if DdpLossTest._torchrun_loss is None:
            DdpLossTest._torchrun_loss = self._run_torchrun()
        return DdpLossTest._torchrun_loss

    def _run_torchrun(self):
        out = self.path("loss_torchrun")
        # An explicit c10d endpoint on a free port: 1.13's --standalone always uses port 29400.
        result = self.run_launcher(
            lib.torchrun_prefix() + lib.TORCHRUN_COMPAT_FLAGS + [
                "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:%d" % lib.free_port(),
                "--nnodes=1", "--nproc_per_node=%d" % NPROC, TRAIN, out], timeout=TIMEOUT)
        self.assertExit(result, 0)
        return float(lib.read_file(out))

    def test_ddprun_standalone_trains(self):
        loss = self.ddprun_loss("--standalone")
        self.assertTrue(0.0 < loss < 10.0, loss)

    def test_same_loss_as_torchrun(self):
        expected = self.torchrun_loss()
        actual = self.ddprun_loss("--standalone")
        self.assertEqual(actual.hex(), expected.hex(), "ddprun %r != torchrun %r" % (actual,
                                                                                 expected))

    def test_same_loss_with_static_rendezvous(self):
        # The agent-store path (TORCHELASTIC_USE_AGENT_STORE=True): workers use ddprun's store.
        expected = self.torchrun_loss()
        actual = self.ddprun_loss("--rdzv_backend=static", "--master_addr=127.0.0.1",
                                  "--master_port=%d" % lib.free_port(), "--nnodes=1")
        self.assertEqual(actual.hex(), expected.hex())


if __name__ == "__main__":
    unittest.main()
