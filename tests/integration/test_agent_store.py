"""The c10d store ddprun serves for its workers (TORCHELASTIC_USE_AGENT_STORE=True): workers reach
it at MASTER_ADDR:MASTER_PORT as clients, keys of a failed attempt are gone in the next one, and a
--master_port that is taken is one clear line and exit code 2."""
import os
import socket
import unittest

import ddprun_testlib as lib

STORE_TOOL = os.path.join(lib.BUILD_DIR, "tools", "ddprun-store")


class AgentStoreTest(lib.DdprunTestCase):

    require_binaries = (lib.DDPRUN, STORE_TOOL)

    def store(self, command):
        """A shell snippet running `ddprun-store <command>` against the worker's MASTER_ADDR/PORT."""
        return '"%s" %s --host "$MASTER_ADDR" --port "$MASTER_PORT" --timeout 10' % (STORE_TOOL,
                                                                                   command)

    def test_workers_are_clients_of_the_launchers_store(self):
        out = self.path("seen_by_rank1")
        script = ('[ "$TORCHELASTIC_USE_AGENT_STORE" = True ] || exit 9; '
                  'if [ "$RANK" = 0 ]; then %s; else %s > %s; fi' % (
                      self.store("set from_rank0 hello"), self.store("get from_rank0"), out))
        result = self.ddprun("--standalone", "--nproc_per_node=2", "--no_python", "/bin/sh", "-c",
                             script)
        self.assertExit(result, 0)
        self.assertEqual(lib.read_file(out).strip(), "hello")

    def test_keys_of_a_failed_attempt_are_cleaned_up(self):
        out = self.path("check_in_attempt_1")
        script = ('if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then %s; exit 1; fi; %s > %s' % (
            self.store("set stale 1"), self.store("check stale"), out))
        result = self.ddprun("--standalone", "--nproc_per_node=1", "--max_restarts=1",
                             "--no_python", "/bin/sh", "-c", script)
        self.assertExit(result, 0)
        self.assertEqual(lib.read_file(out).strip(), "false")

    def test_master_port_in_use_is_one_line_and_exit_2(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("0.0.0.0", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = self.ddprun("--nproc_per_node=1", "--master_port=%d" % port, "--no_python",
                                 "/bin/true")
        self.assertExit(result, 2)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.describe())
        self.assertIn(str(port), lines[0])
        self.assertIn("--master_port", lines[0])
        self.assertNoLauncherTraceback(result)


if __name__ == "__main__":
    unittest.main()
