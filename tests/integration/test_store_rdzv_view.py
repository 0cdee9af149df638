"""`ddprun-store rdzv`: the read-only view of a c10d dynamic rendezvous.

Two halves:
- a realistic rendezvous state written key by key into `ddprun-store serve` with the client
  commands (`multi-set`, `set`), in the key layout of rendezvous/dynamic_rendezvous.h; the view
  (tables and --json) must show every field, and must not create or change a key;
- a real elastic job: two ddprun agents (--nnodes=2:3) with fake workers that wait for a file;
  the view must show their round with live heartbeats, and the agents must still exit 0.
"""
import json
import os
import re
import select
import socket
import subprocess
import time
import unittest

import ddprun_testlib as lib

STORE_TOOL = os.path.join(lib.BUILD_DIR, "tools", "ddprun-store")
TIMEOUT = 30  # seconds, for every command and wait here

NODE_A = {"host": "node-a", "addr": "10.0.0.1", "pid": 111, "nproc": 2}
NODE_B = {"host": "node-b", "addr": "10.0.0.2", "pid": 222, "nproc": 1}
NODE_C = {"host": "node-c", "addr": "10.0.0.3", "pid": 333, "nproc": 2}
NODE_D = {"host": "node-d", "addr": "10.0.0.4", "pid": 444, "nproc": 1}

ARRIVAL, WORKER, SEAL = 1, 1 << 20, 1 << 50


def seq(arrivals, workers, seals=0):
    return arrivals * ARRIVAL + workers * WORKER + seals * SEAL


def now_ms():
    return int(time.time() * 1000)


class StoreRdzvViewTest(lib.DdprunTestCase):

    require_binaries = (STORE_TOOL,)

    def setUp(self):
        super().setUp()
        self.port = self.serve()

    # -- helpers -------------------------------------------------------------------------------

    def serve(self):
        """Starts `ddprun-store serve` on an ephemeral loopback port; returns the port."""
        proc = self.start([STORE_TOOL, "serve", "--host", "127.0.0.1", "--port", "0"])
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        self.assertTrue(ready, "ddprun-store serve printed nothing within %d s" % TIMEOUT)
        line = proc.stdout.readline().decode()
        match = re.match(r"listening on 127\.0\.0\.1:(\d+)$", line.strip())
        self.assertTrue(match, "unexpected first line of serve: %r" % line)
        return int(match.group(1))

    def tool(self, *args):
        return subprocess.run([STORE_TOOL] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT, cwd=self.tmp,
                              env=self.env())

    def client(self, command, *args):
        result = self.tool(command, "--port", self.port, "--timeout", 10, "--connect-timeout", 10,
                           *args)
        self.assertEqual(result.returncode, 0, "ddprun-store %s failed: %s" % (command,
                                                                            result.stderr))
        return result.stdout

    def populate(self, run_id, keys):
        """Writes {name under ddprun/rdzv/<run_id>/: value} with one multi-set."""
        args = []
        for name, value in keys.items():
            args += ["ddprun/rdzv/%s/%s" % (run_id, name),
                     value if isinstance(value, str) else json.dumps(value)]
        self.client("multi-set", *args)

    def view(self, run_id, *extra, endpoint=None, code=0):
        endpoint = endpoint or "127.0.0.1:%d" % self.port
        result = self.tool("rdzv", "--endpoint", endpoint, "--rdzv_id", run_id, "--timeout", 10,
                           "--connect-timeout", 10, *extra)
        self.assertEqual(result.returncode, code, "rdzv view: exit %s\nstdout:\n%s\nstderr:\n%s" % (
            result.returncode, result.stdout, result.stderr))
        if code == 0:
            self.assertEqual(result.stderr, "")
        return result

    def view_json(self, run_id):
        return json.loads(self.view(run_id, "--json").stdout)

    def assertOneLineError(self, result, *needles):
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("ddprun-store: "), lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0])
        self.assertEqual(result.stdout, "")

    # -- a realistic state -------------------------------------------------------------------

    def two_round_state(self, run_id):
        """Round 3 formed with a, b, c (5 workers, restart count 1); newcomer d arrived at round
        4 and announced itself (node_waiting); a rejoined; c's agent then died and b declared
        it lost (the change already in force stays). Rounds 0-2 are sealed history. Returns the
        heartbeat times written."""
        beats_at = {0: now_ms() - 800, 1: now_ms() - 1300, 2: now_ms() - 30_000}
        keys = {"round": "4"}
        for old in range(3):  # history: sealed, ended by a failure each
            keys.update({"r%d/seq" % old: str(seq(2, 3, 1)), "r%d/min" % old: "1",
                         "r%d/sealed" % old: {"nodes": 2, "world": 3, "restarts": old}})
        keys.update({
            # d's late ADD still counts in r3/seq: the view must go by `sealed`.
            "r3/seq": str(seq(4, 6, 1)), "r3/min": "1", "r3/failures": "1",
            "r3/sealed": {"nodes": 3, "world": 5, "restarts": 1},
            "r3/node/1": NODE_A, "r3/node/2": NODE_B, "r3/node/3": NODE_C,
            "r3/master": "10.0.0.1:41000",
            "r3/hb/0": "40", "r3/hb_at/0": str(beats_at[0]),
            "r3/hb/1": "39", "r3/hb_at/1": str(beats_at[1]),
            "r3/hb/2": "12", "r3/hb_at/2": str(beats_at[2]),
            "r3/gone/2": "node-b:222",
            "r3/change": {"kind": "node_waiting", "group_rank": -1, "host": "node-d",
                          "detail": "node node-d is waiting to join"},
            "r4/seq": str(seq(2, 3)), "r4/node/1": NODE_D, "r4/node/2": NODE_A,
            "r4/min": "1", "r4/accounted": "2",
        })
        self.populate(run_id, keys)
        return beats_at

    def all_keys(self, run_id, names):
        return self.client("multi-get", *["ddprun/rdzv/%s/%s" % (run_id, n) for n in names])

    def test_table_shows_the_formed_and_the_forming_round(self):
        beats_at = self.two_round_state("job")
        out = self.view("job").stdout
        lines = out.splitlines()
        self.assertEqual(lines[:3], ["rendezvous job at 127.0.0.1:%d" % self.port,
                                     "  closed: no", "  newest round opened: 4"], out)
        self.assertIn("round 3: formed", lines)
        self.assertIn("  nodes: 3  world size: 5  restart count: 1  worker store: 10.0.0.1:41000",
                      lines)
        self.assertIn("  change: node_waiting (newcomer, host node-d): "
                      "node node-d is waiting to join", lines)
        header = lines.index("  RANK  HOST    ADDR      PID  NPROC  HEARTBEATS  LAST HEARTBEAT  GONE")
        rows = lines[header + 1:header + 4]
        expected = [(0, NODE_A, 40, "no"), (1, NODE_B, 39, "no"), (2, NODE_C, 12,
                                                                  "yes (by node-b:222)")]
        for row, (rank, node, beats, gone) in zip(rows, expected):
            match = re.match(r"^  (\d+) +(\S+) +(\S+) +(\d+) +(\d+) +(\d+) +(-?\d+\.\d) s ago +(.+)$",
                             row)
            self.assertTrue(match, "bad member row %r\n%s" % (row, out))
            self.assertEqual(match.group(1, 2, 3, 4, 5, 6, 8), (
                str(rank), node["host"], node["addr"], str(node["pid"]), str(node["nproc"]),
                str(beats), gone), row)
            age = float(match.group(7))
            written = (now_ms() - beats_at[rank]) / 1000.0
            self.assertTrue(written - 10 - 0.1 <= age <= written + 0.1, (age, written, row))
        forming = lines.index("round 4: forming, 2 nodes arrived (3 workers), minimum reached")
        self.assertEqual(lines[forming + 1:], [
            "  TICKET  HOST    ADDR      PID  NPROC",
            "  1       node-d  10.0.0.4  444  1",
            "  2       node-a  10.0.0.1  111  2"], out)

    def test_json_shows_every_field(self):
        beats_at = self.two_round_state("job")
        view = self.view_json("job")
        self.assertEqual(view["run_id"], "job")
        self.assertEqual(view["endpoint"], "127.0.0.1:%d" % self.port)
        self.assertIs(view["closed"], False)
        self.assertEqual(view["round_hint"], 4)
        formed = view["formed"]
        self.assertEqual({k: formed[k] for k in ("round", "nodes", "world_size", "restart_count",
                                                 "master")},
                         {"round": 3, "nodes": 3, "world_size": 5, "restart_count": 1,
                          "master": "10.0.0.1:41000"})
        self.assertEqual(formed["change"], {"kind": "node_waiting", "group_rank": -1,
                                            "host": "node-d",
                                            "detail": "node node-d is waiting to join"})
        self.assertEqual(len(formed["members"]), 3)
        for rank, (member, node, beats) in enumerate(zip(formed["members"],
                                                         (NODE_A, NODE_B, NODE_C), (40, 39, 12))):
            self.assertEqual(member["group_rank"], rank)
            self.assertEqual({k: member[k] for k in node}, node)
            self.assertEqual(member["heartbeats"], beats)
            self.assertEqual(member["heartbeat_at_ms"], beats_at[rank])
            written = (now_ms() - beats_at[rank]) / 1000.0
            self.assertTrue(written - 10 <= member["heartbeat_age_s"] <= written,
                            (member, written))
            self.assertIs(member["gone"], rank == 2)
            self.assertEqual(member["gone_by"], "node-b:222" if rank == 2 else None)
        forming = view["forming"]
        self.assertEqual({k: forming[k] for k in ("round", "seq", "arrivals", "workers", "seals",
                                                  "min_reached")},
                         {"round": 4, "seq": seq(2, 3), "arrivals": 2, "workers": 3, "seals": 0,
                          "min_reached": True})
        self.assertEqual(forming["nodes"], [dict(ticket=1, group_rank=0, **NODE_D),
                                            dict(ticket=2, group_rank=1, **NODE_A)])

    def test_the_view_writes_nothing(self):
        self.two_round_state("job")
        names = ["round", "r3/hb/0", "r3/hb/2", "r3/seq", "r4/seq", "r4/accounted"]
        keys_before, values_before = self.client("num-keys"), self.all_keys("job", names)
        self.view("job")
        self.view_json("job")
        self.assertEqual(self.client("num-keys"), keys_before)
        self.assertEqual(self.all_keys("job", names), values_before)
        # Keys the view looks for but that do not exist stay missing (no ADD of 0).
        missing = ["ddprun/rdzv/job/%s" % name for name in (
            "closed", "r5/seq", "r4/sealed", "r4/node/3")]
        for key in missing:
            self.assertEqual(self.client("check", key).strip(), "false", key)

    def test_a_lagging_hint_still_finds_the_newest_rounds(self):
        self.two_round_state("job")
        self.client("set", "ddprun/rdzv/job/round", "3")  # r4's first arrival has not written it
        view = self.view_json("job")
        self.assertEqual(view["round_hint"], 3)
        self.assertEqual(view["formed"]["round"], 3)
        self.assertEqual(view["forming"]["round"], 4)

    def test_a_huge_hint_is_read_in_bounded_time(self):
        """A corrupt hint (the largest accepted) must not make the view walk a billion rounds:
        it looks a bounded number of rounds back and reports none formed."""
        self.two_round_state("job")
        self.client("set", "ddprun/rdzv/job/round", "999999999")
        started = time.monotonic()
        view = self.view_json("job")
        self.assertEqual(view["round_hint"], 999999999)
        self.assertIsNone(view["formed"])
        self.assertLess(time.monotonic() - started, 9.0)  # the tool's --timeout is 10 s

    def test_sealing_round_and_closed_job(self):
        # Round 0 just sealed (the seal ADD is in, the first sealer has not published it yet).
        self.populate("j2", {"round": "0", "r0/seq": str(seq(2, 2, 1)), "r0/min": "1",
                             "r0/node/1": NODE_B, "r0/node/2": NODE_D, "closed": "1"})
        view = self.view_json("j2")
        self.assertIs(view["closed"], True)
        self.assertIsNone(view["formed"])
        self.assertEqual(view["forming"]["round"], 0)
        self.assertEqual(view["forming"]["seals"], 1)
        self.assertEqual(view["forming"]["arrivals"], 2)
        out = self.view("j2").stdout
        self.assertIn("  closed: yes", out)
        self.assertIn("no round formed yet", out)
        self.assertIn("round 0: sealing, 2 nodes arrived (2 workers)", out)

    def test_hot_spares_and_a_round_settling(self):
        """A full round 0 runs (no change) with node d queued in round 1: a hot spare. Then
        round 1 is closed by MAX and waits for round 0's accounting (`settling`)."""
        full = {"round": "1", "r0/seq": str(seq(2, 3, 1)), "r0/min": "1",
                "r0/sealed": {"nodes": 2, "world": 3, "restarts": 0},
                "r0/node/1": NODE_A, "r0/node/2": NODE_B,
                "r1/seq": str(seq(1, 1)), "r1/node/1": NODE_D}
        self.populate("spares", full)
        out = self.view("spares").stdout
        self.assertIn("round 1: forming, 1 node arrived (1 worker)", out)
        self.assertIn("  hot spares: round 0 runs; they take the place of a member that is lost "
                      "or leaves", out)
        self.assertIs(self.view_json("spares")["forming"]["hot_spares"], True)
        self.assertIsNone(self.view_json("spares")["forming"]["settling_for"])
        settling_at = now_ms() - 1500
        self.populate("settle", dict(full, **{
            "r0/change": {"kind": "failure", "group_rank": 0, "host": "node-a", "detail": "{}"},
            "r1/seq": str(seq(2, 3, 1)), "r1/node/2": NODE_A, "r1/min": "1",
            "r1/settling": str(settling_at)}))
        out = self.view("settle").stdout
        self.assertNotIn("hot spares", out)
        self.assertIn("round 1: sealing, 2 nodes arrived (3 workers)", out)
        self.assertRegex(out, r"  settling: closed by MAX \d+\.\d s ago; its restart count waits "
                              r"for round 0's members to be accounted for")
        forming = self.view_json("settle")["forming"]
        self.assertIs(forming["hot_spares"], False)
        self.assertGreaterEqual(forming["settling_for"], 1.4)

    def test_formed_round_with_nothing_waiting(self):
        self.populate("j3", {"round": "0", "r0/seq": str(seq(1, 1, 1)),
                             "r0/sealed": {"nodes": 1, "world": 1, "restarts": 0},
                             "r0/node/1": NODE_B})
        view = self.view_json("j3")
        self.assertIsNone(view["forming"])
        member = view["formed"]["members"][0]
        self.assertEqual((member["heartbeats"], member["heartbeat_age_s"], member["gone"]),
                         (None, None, False))
        self.assertIsNone(view["formed"]["master"])
        self.assertIsNone(view["formed"]["change"])
        out = self.view("j3").stdout
        self.assertIn("  change: none", out)
        self.assertIn("worker store: -", out)
        self.assertIn("round 1: no node waiting", out)

    # -- errors --------------------------------------------------------------------------------

    def test_unknown_rendezvous_is_one_line_and_exit_1(self):
        self.two_round_state("job")
        result = self.view("other", code=1)
        self.assertOneLineError(result, "no rendezvous 'other'", "127.0.0.1:%d" % self.port)

    def test_malformed_value_is_one_line_naming_the_key(self):
        self.populate("bad", {"round": "0", "r0/seq": str(seq(1, 1, 1)),
                              "r0/sealed": {"nodes": 1, "world": 1, "restarts": 0},
                              "r0/node/1": "{not json"})
        result = self.view("bad", code=1)
        self.assertOneLineError(result, "ddprun/rdzv/bad/r0/node/1", "node descriptor")

    def test_no_store_is_one_line_and_exit_1_within_the_connect_timeout(self):
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
            started = time.monotonic()
            result = self.tool("rdzv", "--endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "x",
                               "--connect-timeout", 1)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertOneLineError(result, "127.0.0.1:%d" % port)
        self.assertLess(time.monotonic() - started, 10)

    def test_bad_command_lines_exit_2(self):
        for args, needle in [
                (["--endpoint", "127.0.0.1:%d" % self.port], "--rdzv_id"),
                (["--rdzv_id", "job"], "--endpoint"),
                (["--endpoint", "127.0.0.1:70000", "--rdzv_id", "job"], "port"),
                (["--endpoint", ":%d" % self.port, "--rdzv_id", "job"], "host"),
                (["--endpoint", "127.0.0.1:%d" % self.port, "--rdzv_id", "job", "--bogus"],
                 "--bogus")]:
            result = self.tool("rdzv", *args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertOneLineError(result, needle)


class RealJobRdzvViewTest(lib.DdprunTestCase):
    """Two real agents in one elastic round: the view sees them beat."""

    require_binaries = (lib.DDPRUN, lib.FAKE_WORKER, STORE_TOOL)

    def test_view_of_a_running_elastic_job(self):
        port = lib.free_port()
        envs = self.path("envs")
        os.mkdir(envs)
        release = self.path("release")

        def agent():
            return self.start_ddprun(
                "--nnodes=2:3", "--nproc_per_node=1", "--rdzv_backend=c10d",
                "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=view-test",
                "--rdzv_conf=last_call_timeout=1,keep_alive_interval=0.5", lib.FAKE_WORKER,
                "--env-json-dir", envs, "--wait-for-file", release)

        first = agent()

        def listening():
            if first.poll() is not None:
                raise AssertionError("the store host exited early\n" + self.finish(first).describe())
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        lib.wait_for(listening, TIMEOUT, "the rendezvous store on port %d" % port)
        second = agent()
        agents = (first, second)

        def started():
            for proc in agents:
                if proc.poll() is not None:
                    raise AssertionError("an agent exited early\n" + self.finish(proc).describe())
            return len([n for n in os.listdir(envs) if n.endswith(".json")]) == 2
        lib.wait_for(started, TIMEOUT, "both workers to start")
        worker_envs = [lib.read_json(os.path.join(envs, n)) for n in sorted(os.listdir(envs))
                       if n.endswith(".json")]
        master = {"%s:%s" % (e["MASTER_ADDR"], e["MASTER_PORT"]) for e in worker_envs}
        self.assertEqual(len(master), 1, worker_envs)

        def view_json():
            result = subprocess.run(
                [STORE_TOOL, "rdzv", "--endpoint", "127.0.0.1:%d" % port, "--rdzv_id",
                 "view-test", "--json", "--timeout", "10", "--connect-timeout", "10"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(result.returncode, 0, result.stderr)
            return json.loads(result.stdout)

        def both_beating():  # the monitors beat from the round's start, every 0.5 s
            view = view_json()
            members = (view["formed"] or {}).get("members", [])
            return view if len(members) == 2 and all(
                m["heartbeats"] and m["heartbeats"] >= 2 for m in members) else None
        view = lib.wait_for(both_beating, TIMEOUT, "both members' heartbeats in the view",
                            interval=0.2)
        self.assertEqual(view["run_id"], "view-test")
        self.assertIs(view["closed"], False)
        self.assertEqual(view["round_hint"], 0)
        formed = view["formed"]
        self.assertEqual((formed["round"], formed["nodes"], formed["world_size"],
                          formed["restart_count"]), (0, 2, 2, 0))
        self.assertIsNone(formed["change"])
        self.assertIsNone(view["forming"])
        master_port = int(next(iter(master)).rsplit(":", 1)[1])
        self.assertTrue(formed["master"].endswith(":%d" % master_port), (formed, master))
        self.assertEqual(sorted(m["pid"] for m in formed["members"]),
                         sorted(p.pid for p in agents))
        for member in formed["members"]:
            self.assertEqual(member["nproc"], 1)
            self.assertTrue(member["host"] and member["addr"], member)
            self.assertLess(member["heartbeat_age_s"], 5, member)
            self.assertGreater(member["heartbeat_age_s"], -1, member)
            self.assertIs(member["gone"], False)

        table = subprocess.run(
            [STORE_TOOL, "rdzv", "--endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "view-test",
             "--timeout", "10", "--connect-timeout", "10"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(table.returncode, 0, table.stderr)
        print("\n" + table.stdout)
        self.assertIn("round 0: formed", table.stdout)
        self.assertIn("  nodes: 2  world size: 2  restart count: 0", table.stdout)
        ages = [float(a) for a in re.findall(r"(-?\d+\.\d) s ago", table.stdout)]
        self.assertEqual(len(ages), 2, table.stdout)
        self.assertTrue(all(age < 5 for age in ages), table.stdout)

        with open(release, "w") as f:
            f.write("go")
        for proc in agents:
            result = self.finish(proc, timeout=60)
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)


if __name__ == "__main__":
    unittest.main()
