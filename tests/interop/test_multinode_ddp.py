"""Real PyTorch DDP (gloo, env://) across two ddprun agents on loopback (2 nodes x 2 workers,
every worker a client of node 0's store) must give exactly the final loss of the same script
under --standalone --nproc_per_node=4. Exit 77 (skipped) without torch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

TRAIN = os.path.join(lib.INTEROP_DIR, "train_ddp.py")
TIMEOUT = 300


class MultiNodeDdpTest(lib.DdprunTestCase):

    require_binaries = (lib.DDPRUN,)

    def test_two_nodes_match_standalone(self):
        standalone_out = self.path("loss_standalone")
        result = self.ddprun("--standalone", "--nproc_per_node=4", "--python", lib.SYSTEM_PYTHON,
                             TRAIN, standalone_out, timeout=TIMEOUT)
        self.assertExit(result, 0)
        expected = float(lib.read_file(standalone_out))

        out = self.path("loss_multinode")
        port = lib.free_port()
        procs = [self.start_ddprun("--nnodes=2", "--node_rank=%d" % node,
                                   "--master_addr=127.0.0.1", "--master_port=%d" % port,
                                   "--nproc_per_node=2", "--python", lib.SYSTEM_PYTHON, TRAIN, out)
                 for node in range(2)]
        for proc in procs:
            self.assertExit(self.finish(proc, timeout=TIMEOUT), 0)
        actual = float(lib.read_file(out))
        self.assertEqual(actual.hex(), expected.hex(), "2x2 %r != standalone 4 %r" % (actual,
                                                                                   expected))

    @unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
    def test_two_namespaces_match_standalone(self):
        """The same 2x2 job with each agent on its own simulated host (10.213.7.1 and .2)."""
        standalone_out = self.path("loss_standalone")
        result = self.ddprun("--standalone", "--nproc_per_node=4", "--python", lib.SYSTEM_PYTHON,
                             TRAIN, standalone_out, timeout=TIMEOUT)
        self.assertExit(result, 0)
        hosts = lib.NetnsPair()
        self.addCleanup(hosts.remove)
        hosts.create()
        out = self.path("loss_netns")
        procs = []
        for node in range(2):
            # gloo binds the address of the host name (loopback here): name the veth instead.
            env = self.env({"GLOO_SOCKET_IFNAME": hosts.devices[node]})
            procs.append(self.start(hosts.exec_prefix(node) + [
                lib.DDPRUN, "--nnodes=2", "--node_rank=%d" % node,
                "--master_addr=%s" % hosts.addresses[0], "--master_port=29511",
                "--nproc_per_node=2", "--python", lib.SYSTEM_PYTHON, TRAIN, out], env=env))
        for proc in procs:
            self.assertExit(self.finish(proc, timeout=TIMEOUT), 0)
        self.assertEqual(float(lib.read_file(out)).hex(),
                         float(lib.read_file(standalone_out)).hex())


if __name__ == "__main__":
    unittest.main()
