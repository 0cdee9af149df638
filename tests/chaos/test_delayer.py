"""The chaos harness's packet delayer (delayer.py) on two real netns hosts: UDP echo round
trips through host 0's link with no delay, with a delay, with jitter, after the heal, and with
the delayer killed while its rules stay (--queue-bypass lets packets through). Needs root and
netns; skipped otherwise (unittest's skip, exit 0; the ctest runs it as integration.chaos_delayer).
"""
import os
import signal
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import ddprun_testlib as lib  # noqa: E402
import harness  # noqa: E402

ECHO_PORT = 29123
ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(data, peer)
"""
# Round trips from host 0 to host 1's echo server: one line of milliseconds each (-1 for a
# datagram that did not come back within 2 s).
ECHO_CLIENT = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
for n in range(int(sys.argv[3])):
    began = time.monotonic()
    s.sendto(b"%d" % n, (sys.argv[1], int(sys.argv[2])))
    try:
        while s.recv(2048) != b"%d" % n:
            pass
        print("%.2f" % ((time.monotonic() - began) * 1000))
    except socket.timeout:
        print("-1")
"""


@unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
class DelayerTest(unittest.TestCase):
    def setUp(self):
        self.hosts = lib.NetnsHosts(2)
        self.addCleanup(self.hosts.remove)
        self.hosts.create()
        self.network = harness.Network(self.hosts)
        self.addCleanup(self.network.heal_all)
        self.server = subprocess.Popen(
            self.hosts.exec_prefix(1) + [sys.executable, "-c", ECHO_SERVER,
                                         self.hosts.addresses[1], str(ECHO_PORT)],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(self._stop, self.server)
        self.assertTrue(harness.read_ready(self.server), "the echo server did not start")

    @staticmethod
    def _stop(proc):
        proc.kill()
        proc.communicate(timeout=10)

    def round_trips(self, count):
        out = subprocess.run(
            self.hosts.exec_prefix(0) + [sys.executable, "-c", ECHO_CLIENT,
                                         self.hosts.addresses[1], str(ECHO_PORT), str(count)],
            stdout=subprocess.PIPE, text=True, timeout=count * 3 + 30, check=True).stdout
        times = [float(line) for line in out.split()]
        self.assertEqual(len(times), count)
        self.assertNotIn(-1.0, times, "a datagram was lost: %s" % times)
        return times

    def test_delay_applies_to_both_directions_of_the_host_link_and_heals(self):
        before = self.round_trips(10)
        self.assertLess(max(before), 50, before)
        self.network.delay(0, 100, 0)
        delayed = self.round_trips(10)
        # 100 ms out of host 0 and 100 ms into it: a 200 ms round trip (loaded CI: generous top).
        self.assertGreaterEqual(min(delayed), 195, delayed)
        self.assertLess(max(delayed), 1000, delayed)
        stats = self.network.heal(0)
        self.assertRegex(stats.get(0, ""), r"delayer: queue 0: [1-9]\d* packets, delay mean "
                                           r"100\.0 min 100\.0 max 100\.0 ms")
        after = self.round_trips(10)
        self.assertLess(min(after), 50, after)

    def test_jitter_spreads_the_delay(self):
        self.network.delay(0, 60, 40)
        times = self.round_trips(30)
        # Each direction 20..100 ms: round trips 40..200 ms, and 30 of them are not all alike.
        self.assertGreaterEqual(min(times), 38, times)
        self.assertLess(max(times), 1000, times)
        self.assertGreater(max(times) - min(times), 20, times)
        self.network.heal(0)

    def test_a_killed_delayer_lets_packets_through(self):
        self.network.delay(0, 100, 0)
        proc = self.network.delayers[0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        times = self.round_trips(3)  # the kernel unbound the queue when the socket closed
        self.assertLess(max(times), 50, "rules kept without a delayer held packets: %s" % times)


if __name__ == "__main__":
    unittest.main()
