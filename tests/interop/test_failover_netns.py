"""Store-host failover's acceptance test (docs/elastic.md, "Surviving the loss of the store
host"): elastic training with real PyTorch (gloo, env://, CPU) on simulated hosts, as in
test_elastic_netns.py. Each host is a network namespace with one veth into a Linux bridge
(lib.NetnsHosts, 10.213.8.0/24); each runs one ddprun agent (--rdzv_backend=c10d,
--nnodes=2:3, 2 workers) with --local_addr set to its own address, GLOO_SOCKET_IFNAME to its
veth, its own --event_log, and the same endpoint list: hosts 0, 1 and 2 at port RDZV_PORT.
Host 0 (the first endpoint) serves the rendezvous store. The workers run train_elastic.py
(fixed number of global steps, checkpoints every CKPT_EVERY steps, resume from the latest one,
rank 0 logs one JSON line per step to steps.log). The hosts, the agents and the reading and
checking of what the workers wrote are netns_training.py's (NetnsTrainingTest); this module adds
the event logs, partitioning a host, and the failover checks.

Scenarios (hosts 0..2 start in each, the group trains at world size 6 first):
- a: the store host is lost: host 0's agent and workers are SIGKILLed mid-run. Hosts 1 and 2
  move the store to the successor (the survivor with the lower group rank in the last round),
  go on at world size 4 within the heartbeat timeout + FAILOVER_SLACK without spending a
  restart; the new round's master is the successor. Then host 3's agent starts with the same
  endpoint list (whose first entry is dead): it joins the moved store and the group trains at
  world size 6 again. Every survivor exits 0.
- b: the store host is partitioned away (its bridge port down: no FIN, no RST). Exactly one side
  goes on: hosts 1 and 2 (2 of 3 members, more than half) move the store and train at world size
  4; host 0 (1 of 3, less than half) exits 1 with one "lost quorum" line, its workers stopped.
- c: a host without the store (host 2) is partitioned away: hosts 0 and 1 (2 of 3, at least half,
  with the store) go on at world size 4; host 2 exits 1 with "lost quorum".
No process is left on any host after any scenario.

Skipped (exit 77) without torch; its tests skip without root/`ip netns`. Timings are printed.
"""
import json
import os
import subprocess
import time
import unittest

from netns_training import (  # the hosts, agents and checks; lib: ddprun_testlib
    CKPT_EVERY, HEARTBEAT_TIMEOUT, JOB_TIMEOUT, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT,
    NPROC, STEPS, NetnsTrainingTest, lib)

lib.exit_if_no_torch()

# Store host SIGKILLed -> first step of the new group: at most the heartbeat timeout + this.
# A killed store host closes its connections (FIN) and refuses new ones, so the loss is known at
# once; what remains is stopping the old workers, the failover, one round and the script's own
# start-up (torch import, init_process_group, DDP, one step: ~3 s for 4 workers on 2 cores).
FAILOVER_SLACK = 3.0
STEPS_A = 70  # scenario a trains in four groups (6, 4, 6, then 8 workers)
NNODES_A = "2:4"  # room for the restarted original store host
KILL_AT = 2 * CKPT_EVERY + 2  # mid-interval: the survivors redo the steps after 10
# Partition -> the losing side's agent exits: the sweep and the quorum (a few heartbeat timeouts),
# then, on the store's side, the wait for the job at a moved store (read_timeout, torchrun's 60 s
# default, + 2 heartbeat timeouts: docs/elastic.md, "A side that stops does not end the job").
LOSER_TIMEOUT = 60 + 2 * HEARTBEAT_TIMEOUT + 30


@unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
class FailoverNetnsTest(NetnsTrainingTest):

    RDZV_ID_PREFIX = "failover-netns"
    ENDPOINT_HOSTS = 3  # the endpoint list: hosts 0, 1, 2 (host 0 serves the store first)

    # -- agents --------------------------------------------------------------------------------

    def event_log(self, host):
        return self.path("events%d.jsonl" % host)

    def agent_args(self, host):
        return ["--event_log=%s" % self.event_log(host)]

    def partition(self, host):
        """Takes host's bridge port down: a cable pulled between it and every other host."""
        subprocess.run(["ip", "-n", self.hosts.bridge_namespace, "link", "set",
                        self.hosts.bridge_ports[host], "down"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)

    def exit_times(self, timeouts, on_exit=None):
        """Waits until every agent of {proc: timeout in s} exits; returns {host: wall-clock time
        its exit was seen} (all polled together, every 50 ms; on_exit(host) is called then).
        Kills them all and fails when one outlives its timeout."""
        start = time.monotonic()
        seen = {}
        while True:
            for proc in timeouts:
                if proc.host not in seen and proc.poll() is not None:
                    seen[proc.host] = time.time()
                    if on_exit is not None:
                        on_exit(proc.host)
            if len(seen) == len(timeouts):
                return seen
            late = [p for p, t in timeouts.items()
                    if p.host not in seen and time.monotonic() - start >= t]
            if late:
                description = self.describe_agents()
                for proc in timeouts:
                    lib.killpg_quietly(proc.pid)
                    lib.kill_quietly(proc.pid)
                self.fail("the agents of hosts %s did not exit within %s s\n%s" % (
                    [p.host for p in late], [timeouts[p] for p in late], description))
            time.sleep(0.05)

    def describe_host(self, host):
        events = [e.get("event") for e in self.events(host)]
        return ["--- host %d events: %s" % (host, " ".join(map(str, events)))]

    def assertLostQuorum(self, result, host):
        """Exit 1 with one stderr line naming the lost quorum, no traceback."""
        self.assertExit(result, 1)
        self.assertNoLauncherTraceback(result)
        lines = [line for line in result.stderr.splitlines() if "lost quorum" in line]
        self.assertEqual(len(lines), 1, "host %d: expected one 'lost quorum' line\n%s" % (
            host, result.describe()))
        finished = [e for e in self.events(host) if e.get("event") == "finished"]
        self.assertTrue(finished, "host %d logged no finished event" % host)
        self.assertEqual(finished[-1].get("exit_code"), 1, finished[-1])
        self.assertIn("lost quorum", str(finished[-1].get("error", "")), finished[-1])
        return lines[0]

    # -- what the agents and workers wrote -----------------------------------------------------

    def events(self, host):
        path = self.event_log(host)
        if not os.path.exists(path):
            return []
        entries = []
        for line in lib.read_file(path).splitlines():
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except ValueError:  # a line being written (each is a single write)
                    pass
        return entries

    def group_rank_before(self, host, when):
        """host's group rank in the last round it was in before `when` (wall clock)."""
        ranked = [e for e in self.events(host) if e.get("time", 0) < when and "group_rank" in e
                  and e.get("event") in ("round_formed", "workers_started")]
        self.assertTrue(ranked, "host %d logged no round before %.3f\n%s" % (
            host, when, self.describe_agents()))
        return ranked[-1]["group_rank"]

    def assertSegments(self, segments, world_sizes):
        self.assertEqual([s[0]["world_size"] for s in segments], world_sizes,
                         "groups (group, world size, first step): %s\n%s" % (
                             [(s[0]["group"], s[0]["world_size"], s[0]["step"])
                              for s in segments], self.describe_agents()))

    @staticmethod
    def on_address(endpoint, address):
        """Whether "addr:port" (or "addr") names `address`."""
        return endpoint == address or endpoint.startswith(address + ":")

    def check_store_moved(self, survivors, successor, since):
        """Every survivor logged store_lost, then store_moved to the successor (which alone
        serves it), then a round_formed whose master is on the successor. Returns the events
        {host: (store_lost, store_moved, round_formed)}."""
        address = self.hosts.addresses[successor]
        found = {}
        for host in survivors:
            events = [e for e in self.events(host) if e.get("time", 0) >= since]
            names = [e.get("event") for e in events]
            where = "host %d's events after the loss: %s\n%s" % (host, names,
                                                                  self.describe_agents())
            self.assertIn("store_lost", names, where)
            self.assertIn("store_moved", names, where)
            lost = events[names.index("store_lost")]
            moved_at = names.index("store_moved")
            moved = events[moved_at]
            self.assertLess(names.index("store_lost"), moved_at, where)
            self.assertTrue(self.on_address(str(moved.get("address", "")), address),
                            "store moved to %s, expected the successor, host %d (%s)\n%s" % (
                                moved.get("address"), successor, address, where))
            self.assertEqual(bool(moved.get("serving")), host == successor,
                             "host %d's store_moved: %s\n%s" % (host, moved, where))
            formed = next((e for e in events[moved_at + 1:] if e.get("event") == "round_formed"),
                          None)
            self.assertIsNotNone(formed, "no round_formed after store_moved\n" + where)
            self.assertEqual(formed.get("world_size"), NPROC * len(survivors), formed)
            self.assertEqual(formed.get("group_world_size"), len(survivors), formed)
            self.assertTrue(self.on_address(str(formed.get("master", "")), address),
                            "the new round's master is %s, expected the successor, host %d "
                            "(%s)\n%s" % (formed.get("master"), successor, address, where))
            found[host] = (lost, moved, formed)
        return found

    # -- scenarios -----------------------------------------------------------------------------

    def test_a_store_host_killed_survivors_move_the_store_and_a_late_node_joins(self):
        procs = self.start_hosts(nnodes=NNODES_A, steps=STEPS_A)
        before = self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= KILL_AT,
                                "step %d at world size 6" % KILL_AT)
        old_group = before["group"]
        # The successor: the survivor with the lower group rank in the round being killed.
        ranks = {h: self.group_rank_before(h, time.time()) for h in (1, 2)}
        successor = min(ranks, key=ranks.get)

        killed_at = self.kill_host(0)
        shrunk = self.wait_step(lambda e: e["world_size"] == 4 and e["t"] > killed_at,
                                "a step at world size 4 after the kill", allowed_exits=(0,))
        # The group trains at world size 4 for a few steps before the late node comes.
        self.wait_step(lambda e: e["group"] == shrunk["group"] and e["step"] >= shrunk["step"] + 3,
                       "3 steps at world size 4", allowed_exits=(0,))
        joined_at = time.time()
        procs.append(self.start_agent(3, nnodes=NNODES_A, steps=STEPS_A))
        grown = self.wait_step(lambda e: e["world_size"] == 6 and e["t"] > joined_at,
                               "a step at world size 6 with host 3", allowed_exits=(0,))
        # The original store host comes back with the same line: its machine is the first
        # endpoint's, but it must join the moved store (found at the other endpoints), not
        # serve a second, empty one beside it (where it would wait alone for MIN forever).
        killed_proc = procs[0]
        killed_proc.wait(timeout=10)
        back_at = time.time()
        procs.append(self.start_agent(0, nnodes=NNODES_A, steps=STEPS_A))
        full = self.wait_step(lambda e: e["world_size"] == 8 and e["t"] > back_at,
                              "a step at world size 8 with host 0 back", allowed_exits=(0,))
        print("[original store host back] agent restarted -> first step at world size 8: "
              "%.2f s" % (full["t"] - back_at))

        results = self.finish_all(procs[1:])
        entries = self.steps()
        records = self.started()
        second = [r for r in records if r["group"] == shrunk["group"]]
        third = [r for r in records if r["group"] == grown["group"]]
        first = [r for r in records if r["group"] == old_group]
        events = {h: self.events(h) for h in (1, 2, 3)}
        # Timings first (they go into the test log whatever the checks below say).
        resumed = shrunk["t"] - killed_at
        respawned = min(r["spawn"] for r in second) - killed_at if second else float("nan")
        moved = {h: next((e["time"] - killed_at for e in events[h] if e.get("event") ==
                          "store_moved" and e.get("time", 0) >= killed_at), None) for h in (1, 2)}
        # The figure is keep-alive timeout + 3 s; the part of the script's own start-up
        # (torch import on 2 shared cores) beyond those 3 s is not the launcher's, so it is
        # added; the launcher's own part is asserted strictly below (respawned).
        budget = HEARTBEAT_TIMEOUT + FAILOVER_SLACK + max(0.0, (self.startup(second) or 0.0)
                                                          - FAILOVER_SLACK)
        print("\n[store host killed] kill -> first step at world size 4: %.2f s (budget %.2f s "
              "= keep-alive %d x %d + %.1f); kill -> store_moved logged: %s; kill -> new "
              "workers spawned %.2f s; start-up spawn -> first step: first group (6 workers) "
              "%s s, new group (4 workers) %s s; successor host %d (group ranks before the "
              "kill %s); resumed at step %d after step %d" % (
                  resumed, budget, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, FAILOVER_SLACK,
                  ", ".join("host %d %s" % (h, "-" if t is None else "%.2f s" % t)
                            for h, t in sorted(moved.items())),
                  respawned, _fmt(self.startup(first)), _fmt(self.startup(second)), successor,
                  ranks, shrunk["step"],
                  max(e["step"] for e in entries if e["group"] == old_group)))
        print("[late node] agent of host 3 started (first endpoint dead) -> first step at world "
              "size 6: %.2f s (-> new workers spawned %.2f s; their start-up %s s); resumed at "
              "step %d; restart counts logged: %s" % (
                  grown["t"] - joined_at,
                  (min(r["spawn"] for r in third) - joined_at) if third else float("nan"),
                  _fmt(self.startup(third)), grown["step"],
                  sorted({e["restart_count"] for e in entries})))

        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.assertNoLeftovers()

        segments = self.check_history(entries, STEPS_A)
        self.assertSegments(segments, [6, 4, 6, 8])
        self.assertEqual(segments[3][0]["group"], full["group"])
        back = [e for e in self.events(0) if e.get("time", 0) >= back_at]
        back_names = [e.get("event") for e in back]
        self.assertNotIn("store_moved", back_names)
        self.assertEqual([e.get("world_size") for e in back if e.get("event") == "round_formed"],
                         [8], back_names)
        self.assertEqual(segments[1][0]["group"], shrunk["group"])
        self.assertEqual(segments[2][0]["group"], grown["group"])
        after_kill = [e for e in entries if e["group"] != old_group and e["t"] < joined_at]
        self.assertEqual({e["world_size"] for e in after_kill}, {4}, self.describe_agents())
        self.assertEqual(len(first), 3 * NPROC)
        self.assertEqual(sorted(r["host"] for r in second), sorted(["1", "2"] * NPROC))
        self.assertEqual(sorted(r["host"] for r in third), sorted(["1", "2", "3"] * NPROC))
        self.assertLessEqual(resumed, budget, self.describe_agents())
        # A killed store host refuses connections: the loss is known at once, not after the
        # heartbeat timeout, and the new group's workers start within it.
        self.assertLess(respawned, HEARTBEAT_TIMEOUT, self.describe_agents())

        # The store moved to the successor, and the new round's workers use its address.
        self.check_store_moved((1, 2), successor, killed_at)
        self.assertTrue(self.on_address(shrunk["group"], self.hosts.addresses[successor]),
                        "MASTER_ADDR:PORT of the world-size-4 group: %s" % shrunk["group"])
        # Host 3 joined through the endpoint list, without a loss of its own.
        names3 = [e.get("event") for e in events[3]]
        self.assertIn("round_formed", names3, self.describe_agents())
        self.assertNotIn("store_lost", names3)
        formed3 = [e for e in events[3] if e.get("event") == "round_formed"]
        self.assertEqual([e.get("world_size") for e in formed3], [6, 8], formed3)

        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a lost store host spent a failure restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})

    def run_partition(self, lost, survivors, store_moves):
        """Hosts 0..2 train at world size 6, then host `lost` is partitioned away: it must exit 1
        with "lost quorum" after stopping its workers, the `survivors` go on at world size 4
        (with the store moved to the successor when `store_moves`) and finish every step."""
        procs = self.start_hosts()
        before = self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= KILL_AT,
                                "step %d at world size 6" % KILL_AT)
        old_group = before["group"]
        ranks = {h: self.group_rank_before(h, time.time()) for h in survivors}
        partitioned_at = time.time()
        self.partition(lost)
        # Both sides at once: the losing one must stop within LOSER_TIMEOUT, the other finish.
        lost_workers = [p for p in self.pids_of_host(lost) if p != procs[lost].pid]
        timeouts = {procs[h]: JOB_TIMEOUT for h in survivors}
        timeouts[procs[lost]] = LOSER_TIMEOUT

        def check_workers_stopped(host):
            if host == lost:  # it stopped them before exiting (2 s of slack: reaping)
                self.wait_gone(lost_workers, 2, "host %d's workers after its exit" % lost)
        exits = self.exit_times(timeouts, check_workers_stopped)
        results = {h: self.result_of(procs[h]) for h in (0, 1, 2)}
        entries = self.steps()
        records = self.started()
        shrunk = next((e for e in entries if e["world_size"] == 4 and e["t"] > partitioned_at),
                      None)
        self.assertIsNotNone(shrunk, "no step at world size 4 after the partition\n%s\n%s" % (
            "\n".join(r.describe() for r in results.values()), self.describe_agents()))
        second = [r for r in records if r["group"] == shrunk["group"]]
        first = [r for r in records if r["group"] == old_group]
        tag = "store host" if lost == 0 else "host %d (no store)" % lost
        print("\n[partition of %s] partition -> first step at world size 4: %.2f s (new workers "
              "spawned %.2f s; their start-up %s s, first group's %s s); partition -> host %d "
              "exited (%s): %.2f s; survivors exited %s; group ranks before: %s; restart counts "
              "logged: %s" % (
                  tag, shrunk["t"] - partitioned_at,
                  (min(r["spawn"] for r in second) - partitioned_at) if second else float("nan"),
                  _fmt(self.startup(second)), _fmt(self.startup(first)), lost,
                  results[lost].returncode, exits[lost] - partitioned_at,
                  ", ".join("host %d %.2f s" % (h, exits[h] - partitioned_at)
                            for h in survivors), ranks,
                  sorted({e["restart_count"] for e in entries})))
        line = [ln for ln in results[lost].stderr.splitlines() if "lost quorum" in ln]
        print("[partition of %s] host %d's error: %s" % (tag, lost,
                                                         line[0] if line else "(none)"))

        for host in survivors:
            self.assertExit(results[host], 0)
            self.assertNoLauncherTraceback(results[host])
        self.assertLostQuorum(results[lost], lost)
        self.assertNoLeftovers()

        segments = self.check_history(entries, STEPS)
        self.assertSegments(segments, [6, 4])
        self.assertEqual(segments[1][0]["group"], shrunk["group"])
        # Exactly one side went on: no worker of the lost host started after the partition.
        self.assertEqual(len(first), 3 * NPROC)
        self.assertEqual(sorted(r["host"] for r in second),
                         sorted([str(h) for h in survivors] * NPROC))
        late = [r for r in records if r["host"] == str(lost) and r["spawn"] > partitioned_at]
        self.assertEqual(late, [], "host %d started workers after the partition" % lost)
        if store_moves:
            successor = min(ranks, key=ranks.get)
            self.check_store_moved(survivors, successor, partitioned_at)
            self.assertTrue(self.on_address(shrunk["group"], self.hosts.addresses[successor]),
                            "MASTER_ADDR:PORT of the world-size-4 group: %s" % shrunk["group"])
        else:
            for host in survivors:
                names = [e.get("event") for e in self.events(host)]
                self.assertNotIn("store_moved", names, "host %d: %s" % (host, names))
                self.assertNotIn("store_lost", names, "host %d: %s" % (host, names))
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a partition spent a failure restart\n" + self.describe_agents())

    def test_b_store_host_partitioned_only_the_majority_goes_on(self):
        self.run_partition(lost=0, survivors=(1, 2), store_moves=True)

    def test_c_other_host_partitioned_the_store_side_goes_on(self):
        self.run_partition(lost=2, survivors=(0, 1), store_moves=False)


def _fmt(seconds):
    return "-" if seconds is None else "%.2f" % seconds


if __name__ == "__main__":
    unittest.main()
