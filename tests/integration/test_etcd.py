"""The etcd rendezvous (issue 14) against a real 3-member etcd cluster on loopback (etcd_cluster.py,
one cluster per test, torn down after it): `--rdzv_backend=etcd --rdzv_endpoint=<every member>`
runs the elastic rendezvous of the c10d backend with its store in etcd, which never moves; the
round's group rank 0 agent serves the workers' store.

- two nodes form one group and run a real allreduce (ddprun-allreduce-check); etcd-v2 the same;
- a lost node (its agent and its workers' process groups SIGKILLed, as a lost machine), whether
  or not it served the workers' store: the survivors form a new round and finish, no restart spent;
- one etcd member SIGKILLed while an agent waits in the rendezvous, or while the workers train:
  nothing but log lines shows it;
- two members SIGKILLed (quorum lost) for longer than join_timeout: every agent exits 1 with one
  error line naming the rendezvous store and etcd, within a bound derived from the timeouts, and
  no process of the job is left;
- bad endpoints (nothing listening, an HTML server, a non-HTTP server, https against a plain
  member): one line naming the endpoint and the problem, non-zero exit, within the read timeout.

Every wait is on an event (an event-log line, a worker's environment file, a key in etcd, a
process exit) with a deadline; timings are asserted only as generous upper bounds.
"""
import glob
import http.server
import json
import os
import re
import socket
import sys
import threading
import time
import unittest

import ddprun_testlib as lib
import orphan_tree as tree
from etcd_cluster import ETCD, EtcdCluster, etcd_available

CHECK = os.path.join(lib.BUILD_DIR, "worker", "ddprun-allreduce-check")
RUN_ID = "etcd-test"
KEYS = "/ddprun/ddprun/rdzv/%s/" % RUN_ID  # EtcdStore's default prefix + the rendezvous' keys
INTERVAL = 1
ATTEMPTS = 3
HEARTBEAT_TIMEOUT = INTERVAL * ATTEMPTS
OUTAGE_JOIN_TIMEOUT = 8   # scenario 6: how long an etcd outage is waited out
READ_TIMEOUT = 2          # scenario 7: a bad endpoint must be reported within about this
STORE_EVENTS = {"store_unreachable", "store_lost", "store_moved"}


def rdzv_conf(join=30, last_call=60, read=None, interval=INTERVAL):
    conf = ("--rdzv_conf=join_timeout=%s,last_call_timeout=%s,keep_alive_interval=%s,"
            "keep_alive_max_attempt=%d" % (join, last_call, interval, ATTEMPTS))
    return conf + (",read_timeout=%s" % read if read else "")


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("ddprun: error")]


class EtcdTestCase(lib.DdprunTestCase):
    require_binaries = (lib.DDPRUN, lib.FAKE_WORKER, CHECK)

    @classmethod
    def setUpClass(cls):
        if not etcd_available():
            raise unittest.SkipTest("%s is missing (Debian's etcd-server, "
                                    "scripts/install-deps.sh)" % ETCD)
        super().setUpClass()

    def assertOneErrorLine(self, result, *needles):
        """Exactly one error line, the last of stderr, holding every needle; no dump."""
        lines = error_lines(result)
        self.assertEqual(len(lines), 1, "expected one error line\n" + result.describe())
        self.assertEqual(result.stderr.strip().splitlines()[-1], lines[0], result.describe())
        for needle in needles:
            self.assertIn(needle.lower(), lines[0].lower(), result.describe())
        self.assertNotIn("Traceback", result.stderr)
        self.assertNoLauncherTraceback(result)
        return lines[0]


class EtcdRendezvousTest(EtcdTestCase):
    """Agents on loopback, each a separate ddprun, over a 3-member etcd started per test."""

    def setUp(self):
        super().setUp()
        self.cluster = EtcdCluster(3)
        self.cluster.__enter__()
        self.addCleanup(self.cluster.__exit__, None, None, None)
        self.envs = self.path("envs")
        os.mkdir(self.envs)
        self.release = self.path("release")

    # -- agents ----------------------------------------------------------------------------

    def agent(self, name, nnodes="2:3", nproc=1, conf=None, worker=None, backend="etcd",
              env=None):
        """One node: a ddprun with its own event log; `name` is in its workers' environment."""
        worker = worker or [lib.FAKE_WORKER, "--env-json-dir", self.envs,
                            "--wait-for-file", self.release]
        proc = self.start_ddprun(
            "--nnodes=%s" % nnodes, "--nproc_per_node=%d" % nproc, "--rdzv_backend=" + backend,
            "--rdzv_endpoint=" + ",".join(self.cluster.endpoints), "--rdzv_id=" + RUN_ID,
            conf or rdzv_conf(), "--local_addr=127.0.0.1", "--max_restarts=0",
            "--event_log=" + self.path("events_%s.jsonl" % name), *worker,
            env=self.env(dict(env or {}, TEST_NODE=name)))
        proc.node = name
        return proc

    def events(self, proc):
        path = self.path("events_%s.jsonl" % proc.node)
        if not os.path.exists(path):
            return []
        return [json.loads(line) for line in lib.read_file(path).splitlines() if line.strip()]

    def release_and_finish(self, procs, timeout=60):
        with open(self.release, "w") as f:
            f.write("go")
        results = [self.finish(proc, timeout=timeout) for proc in procs]
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "processes of the job")
        return results

    # -- workers ---------------------------------------------------------------------------

    def workers(self):
        """{pid: environment} of every fake worker that started so far."""
        found = {}
        for path in glob.glob(os.path.join(self.envs, "env_*.json")):
            try:
                found[int(os.path.basename(path)[len("env_"):-len(".json")])] = lib.read_json(path)
            except ValueError:
                continue  # being written
        return found

    def wait_round(self, count, exclude=(), timeout=30):
        """Waits until `count` workers share a worker store (MASTER_ADDR:PORT) not in `exclude`;
        returns (that address, {pid: environment})."""
        def ready():
            by_master = {}
            for pid, env in self.workers().items():
                master = "%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"])
                by_master.setdefault(master, {})[pid] = env
            for master, members in by_master.items():
                if master not in exclude and len(members) == count:
                    return master, members
            return None
        return lib.wait_for(ready, timeout, "a round of %d workers beside %s (workers: %s)" % (
            count, list(exclude), sorted("%s/%s" % (e["TEST_NODE"], e["MASTER_PORT"])
                                         for e in self.workers().values())))

    def check_round(self, members, nodes, names):
        envs = list(members.values())
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(len(envs))), envs)
        self.assertEqual(sorted({e["TEST_NODE"] for e in envs}), sorted(names), envs)
        self.assertEqual(sorted({int(e["GROUP_RANK"]) for e in envs}), list(range(nodes)), envs)
        for env in envs:
            self.assertEqual(int(env["WORLD_SIZE"]), len(envs))
            self.assertEqual(int(env["GROUP_WORLD_SIZE"]), nodes)
            self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
            self.assertEqual(env["TORCHELASTIC_RUN_ID"], RUN_ID)
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")

    @staticmethod
    def node_of_group_rank(members, rank):
        return {e["TEST_NODE"] for e in members.values() if int(e["GROUP_RANK"]) == rank}.pop()

    def lose_node(self, proc):
        """A lost machine: SIGKILL of its agent and of its workers' process groups at once."""
        pids = [pid for pid, env in self.workers().items()
                if env["TEST_NODE"] == proc.node and lib.is_alive(pid)]
        lib.kill_quietly(proc.pid)
        for pid in pids:
            group = lib.proc_pgid(pid)
            if group is not None and group > 1 and group != os.getpgid(0):
                lib.killpg_quietly(group)
            lib.kill_quietly(pid)
        proc.wait(timeout=10)
        self.wait_gone(pids, 10, "the lost node's workers")
        return time.monotonic()

    # -- etcd ------------------------------------------------------------------------------

    def keys(self):
        """The job's keys in etcd ({} while no quorum answers, e.g. during an election)."""
        try:
            return self.cluster.range(KEYS)
        except AssertionError:
            return {}

    def alive_leases(self):
        """{alive key: lease id} of round 0's members (etcd deletes a key whose lease expired)."""
        return {key: int(value) for key, value in self.keys().items() if "/r0/alive/" in key}

    # -- event checks ----------------------------------------------------------------------

    def assertUndisturbed(self, proc, nodes):
        """One round, no restart, no loss, nothing about the store: the run of a quiet job."""
        events = self.events(proc)
        names = [e["event"] for e in events]
        self.assertEqual(names.count("round_formed"), 1, names)
        self.assertEqual([e["group_world_size"] for e in events if e["event"] == "round_formed"],
                         [nodes])
        for unexpected in ["restart", "node_lost", "membership_changed", "remote_failure"] + sorted(
                STORE_EVENTS):
            self.assertNotIn(unexpected, names, names)
        self.assertEqual({e["exitcode"] for e in events if e["event"] == "worker_exited"}, {0})
        self.assertTrue(all(e["restart_count"] == 0 for e in events), events)
        self.assertEqual((events[-1]["event"], events[-1].get("state")), ("finished", "succeeded"))

    def assertSurvivedLoss(self, proc):
        """Two rounds (3 nodes, then 2), one membership restart, nothing about the store."""
        events = self.events(proc)
        names = [e["event"] for e in events]
        formed = [e for e in events if e["event"] == "round_formed"]
        self.assertEqual([e["group_world_size"] for e in formed], [3, 2], names)
        self.assertIn("node_lost", names)
        self.assertEqual([e["cause"] for e in events if e["event"] == "restart"], ["membership"])
        self.assertFalse(STORE_EVENTS & set(names), "the etcd store never moves: %s" % names)
        self.assertTrue(all(e["restart_count"] == 0 for e in events), events)
        self.assertEqual((events[-1]["event"], events[-1].get("state")), ("finished", "succeeded"))
        return formed

    # -- scenarios -------------------------------------------------------------------------

    def allreduce_over_etcd(self, backend, env=None):
        nodes = [self.agent("n%d" % i, nnodes="2", nproc=2, backend=backend, env=env,
                            worker=["--no_python", CHECK]) for i in range(2)]
        results = [self.finish(proc, timeout=120) for proc in nodes]
        ranks = []
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
            ranks += [int(r) for r in re.findall(r"^rank (\d+)/4 ok", result.stdout, re.M)]
        self.assertEqual(sorted(ranks), [0, 1, 2, 3], "\n".join(r.describe() for r in results))
        keys = self.keys()
        self.assertEqual(json.loads(keys[KEYS + "r0/sealed"])["world"], 4, keys)
        self.assertIn(KEYS + "closed", keys)  # the job finished for good, in etcd
        for proc in nodes:
            self.assertUndisturbed(proc, nodes=2)
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "processes of the job")
        return results

    def test_two_nodes_form_one_group_and_allreduce(self):
        self.allreduce_over_etcd("etcd")

    def test_etcd_v2_is_the_same_rendezvous_over_the_v3_api(self):
        results = self.allreduce_over_etcd("etcd-v2")
        for result in results:
            self.assertIn("--rdzv_backend=etcd-v2: ddprun speaks etcd's v3 API", result.stderr,
                          result.describe())

    def spot_loss(self, lose_group_rank):
        nodes = [self.agent("n%d" % i) for i in range(3)]
        first_master, members = self.wait_round(3)  # MAX closes the first round at once
        self.check_round(members, 3, ["n0", "n1", "n2"])
        victim_name = self.node_of_group_rank(members, lose_group_rank)
        victim = [p for p in nodes if p.node == victim_name][0]
        survivors = [p for p in nodes if p is not victim]
        lost_at = self.lose_node(victim)
        # The new round seals as soon as the victim is declared lost (no 60 s last call).
        master, members = self.wait_round(2, exclude=(first_master,),
                                          timeout=HEARTBEAT_TIMEOUT + 20)
        print("\nnode of group rank %d lost -> workers of the new round: %.2f s (heartbeat "
              "timeout %d s)" % (lose_group_rank, time.monotonic() - lost_at, HEARTBEAT_TIMEOUT),
              file=sys.stderr)
        self.check_round(members, 2, [p.node for p in survivors])
        with socket.create_connection(tuple(master.rsplit(":", 1)), timeout=10):
            pass  # the new round's worker store is served
        results = self.release_and_finish(survivors)
        for proc, result in zip(survivors, results):
            formed = self.assertSurvivedLoss(proc)
            self.assertEqual([e["master"] for e in formed], [first_master, master])
            self.assertIn("no restart spent", result.stderr, result.describe())
        return victim, survivors, first_master, master

    def test_lost_node_survivors_form_a_new_round_without_spending_a_restart(self):
        self.spot_loss(lose_group_rank=2)

    def test_lost_worker_store_host_another_agent_serves_the_new_round(self):
        victim, survivors, first_master, master = self.spot_loss(lose_group_rank=0)
        self.assertNotEqual(master, first_master)
        host, port = first_master.rsplit(":", 1)
        with socket.socket() as probe:  # the victim's agent and its store are gone
            self.assertNotEqual(probe.connect_ex((host, int(port))), 0, first_master)
        # The new round's group rank 0 is a survivor, and it announced the store it serves.
        second = [e for p in survivors for e in self.events(p)
                  if e["event"] == "round_formed" and e["group_world_size"] == 2]
        server = [e for e in second if e["group_rank"] == 0]
        self.assertEqual(len(server), 1, second)
        self.assertIn(server[0]["pid"], [p.pid for p in survivors])
        self.assertEqual(server[0]["master"], master)

    def test_etcd_member_lost_while_an_agent_waits_in_the_rendezvous(self):
        first = self.agent("n0", nnodes="2")
        beat = KEYS + "r0/fhb_at/1"  # n0 waiting for the seal of round 0 (ticket 1)
        before = lib.wait_for(lambda: self.keys().get(beat), 30, "n0 waiting in round 0")
        self.cluster.make_leader(0)
        self.cluster.kill(0)  # the member every client talks to first, and the leader
        # n0 goes on beating through the surviving members.
        lib.wait_for(lambda: self.keys().get(beat, before) != before, HEARTBEAT_TIMEOUT + 15,
                     "n0's next beat after the member was lost")
        second = self.agent("n1", nnodes="2")
        _, members = self.wait_round(2)
        self.check_round(members, 2, ["n0", "n1"])
        self.release_and_finish([first, second])
        for proc in (first, second):
            self.assertUndisturbed(proc, nodes=2)

    def test_etcd_member_lost_while_the_workers_train(self):
        # A 6 s lease (not the 3 s of the other cases): the surviving members elect a leader
        # first, and in the ASan tree beside two other tests (CTEST_JOBS=3 on 2 cores) that
        # and the forwarded keep-alives once took longer than 3 s (both leases expired; the
        # same run passes alone). What is checked is unchanged: the keep-alives reach the
        # survivors, so each lease outlives two TTLs after the kill.
        interval = 2 * INTERVAL
        nodes = [self.agent("n%d" % i, nnodes="2", nproc=2, conf=rdzv_conf(interval=interval))
                 for i in range(2)]
        _, members = self.wait_round(4)
        self.check_round(members, 2, ["n0", "n1"])
        leases = lib.wait_for(lambda: len(self.alive_leases()) == 2 and self.alive_leases(), 30,
                              "both members' alive keys in etcd")
        self.cluster.make_leader(0)
        self.cluster.kill(0)  # the member every client talks to first, and the leader
        lost_at = time.monotonic()
        # An observation window, not a synchronisation: each member's lease (TTL = heartbeat
        # timeout, renewed once by the election) must outlive two TTLs after the kill, which it
        # does only if its keep-alives reach the surviving members.
        window = 2 * interval * ATTEMPTS + 1

        def outlived():
            ttls = {key: self.cluster.lease_ttl(lease) for key, lease in leases.items()}
            if -1 in ttls.values():
                raise AssertionError("a member's lease expired after the etcd member was lost: "
                                     "%s" % ttls)
            return time.monotonic() - lost_at >= window
        lib.wait_for(outlived, window + 20, "the leases to outlive %d s" % window, interval=0.2)
        self.assertEqual(sorted(self.alive_leases()), sorted(leases),
                         "the members' alive keys %d s after the etcd member was lost" % window)
        self.assertNotIn(KEYS + "r0/change", self.keys(), "round 0 had to end")
        self.release_and_finish(nodes)
        self.assertEqual(len(self.workers()), 4, "no worker was restarted")
        for proc in nodes:
            self.assertUndisturbed(proc, nodes=2)

    def test_quorum_lost_longer_than_join_timeout_every_agent_exits_with_one_line(self):
        nproc = 2
        worker = ["--no_python", sys.executable, tree.WORKER, "wait", "--own-group"]
        nodes = [self.agent("n%d" % i, nnodes="2", nproc=nproc, worker=worker,
                            conf=rdzv_conf(join=OUTAGE_JOIN_TIMEOUT, last_call=1))
                 for i in range(2)]
        agents = {p.pid for p in nodes}

        def descendants():
            return [pid for pid in lib.pids_with_marker(self.marker)
                    if pid not in agents and tree.argv0(pid) != tree.KEEPER_NAME]
        expected = 2 * nproc * tree.PER_WORKER
        pids = lib.wait_for(lambda: len(descendants()) >= expected and descendants(), 30,
                            "%d worker processes (workers, children, grandchildren)" % expected)
        self.cluster.kill(0)
        self.cluster.kill(1)  # member 2 lives on without a quorum: its requests time out
        lost_at = time.monotonic()
        # Promised: the watch notices within about the heartbeat timeout, the outage is waited
        # out for join_timeout, each try bounded by the etcd request timeout. Generous bound:
        # Each try also waits out the client's patience (an election): max(heartbeat timeout, 5 s).
        patience = max(HEARTBEAT_TIMEOUT, 5)
        bound = 2 * (HEARTBEAT_TIMEOUT + OUTAGE_JOIN_TIMEOUT) + 3 * patience + 10
        results = [self.finish(p, timeout=max(1.0, lost_at + bound - time.monotonic()))
                   for p in nodes]
        took = time.monotonic() - lost_at
        print("\nquorum lost -> every agent exited: %.1f s (bound %d s)" % (took, bound),
              file=sys.stderr)
        for proc, result in zip(nodes, results):
            self.assertExit(result, 1)
            line = self.assertOneErrorLine(result, "rendezvous store", "etcd")
            self.assertIn("join timeout", line)
            events = self.events(proc)
            self.assertIn("store_unreachable", [e["event"] for e in events])
            self.assertEqual((events[-1]["event"], events[-1]["state"]), ("finished", "error"))
        self.wait_gone(pids, 10, "the workers and their children")
        self.wait_gone(lib.pids_with_marker(self.marker), 10, "processes of the job")


class _HtmlHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP server that is not etcd: every request gets an HTML page."""

    def _page(self):
        body = b"<html><body><h1>It works!</h1></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _page

    def log_message(self, *args):
        pass


class BadEndpointTest(EtcdTestCase):
    """One node, one endpoint that cannot be the rendezvous store: a one-line error naming the
    endpoint and the problem, well before the join timeout (set far above the read timeout)."""

    # Measured from the launch, so it holds ddprun's own start (its binary read from a cold page
    # cache, a sanitizer's runtime, a loaded machine) besides the read timeout's tries (~5 s in
    # all here); still far below the join timeout (60 s) that a refusal must not wait for.
    BOUND = 2 * READ_TIMEOUT + 15

    def refused(self, endpoint, problem, conf=""):
        result = self.ddprun(
            "--nnodes=1", "--rdzv_backend=etcd", "--rdzv_endpoint=" + endpoint,
            "--rdzv_id=" + RUN_ID,
            "--rdzv_conf=join_timeout=60,read_timeout=%d%s" % (READ_TIMEOUT, conf),
            lib.FAKE_WORKER, timeout=self.BOUND)
        self.assertNotEqual(result.returncode, 0, result.describe())
        self.assertLess(result.elapsed, self.BOUND, result.describe())
        self.assertOneErrorLine(result, endpoint, problem)
        return result

    def serve(self, server):
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return "127.0.0.1:%d" % server.server_address[1]

    def test_nothing_listening(self):
        self.refused("127.0.0.1:%d" % lib.free_port(), "refused")

    def test_an_http_server_that_is_not_etcd(self):
        self.refused(self.serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HtmlHandler)),
                     "not etcd")

    def test_a_tcp_server_that_is_not_http(self):
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.2)
        stop = threading.Event()

        def garbage():
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                with conn:
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01\x02 garbage\r\n")
        thread = threading.Thread(target=garbage, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(stop.set)  # cleanups run last first: stop, join, close
        self.refused("127.0.0.1:%d" % listener.getsockname()[1], "not an HTTP server")

    def test_https_against_a_plain_member(self):
        with EtcdCluster(1) as plain:
            endpoint = plain.endpoints[0]
            result = self.ddprun(
                "--nnodes=1", "--rdzv_backend=etcd", "--rdzv_endpoint=" + endpoint,
                "--rdzv_id=" + RUN_ID,
                "--rdzv_conf=join_timeout=60,read_timeout=%d,protocol=https" % READ_TIMEOUT,
                lib.FAKE_WORKER, timeout=self.BOUND)
            if result.returncode == 2 and re.search(r"not supported|unsupported", result.stderr):
                self.skipTest("ddprun rejects protocol=https: " + result.stderr.strip())
            self.assertNotEqual(result.returncode, 0,
                                "protocol=https ran against a plain-HTTP member\n" +
                                result.describe())
            self.assertLess(result.elapsed, self.BOUND, result.describe())
            self.assertOneErrorLine(result, endpoint, "TLS")


if __name__ == "__main__":
    unittest.main()
