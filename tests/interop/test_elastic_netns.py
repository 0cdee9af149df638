"""GitHub issue 10's acceptance test: elastic training with real PyTorch (gloo, env://, CPU) on
simulated hosts. Each host is a network namespace with one veth into a Linux bridge
(lib.NetnsHosts, 10.213.8.0/24); each runs one ddprun agent (--rdzv_backend=c10d, 2 workers)
with --local_addr set to its own address and GLOO_SOCKET_IFNAME to its veth (gloo would
otherwise bind the address of the host name, loopback here). Host 0's agent serves the
rendezvous store. The workers run train_elastic.py: a fixed number of global steps, checkpoints
every CKPT_EVERY steps to a shared directory, resume from the latest one, and rank 0 logs one
JSON line per step to steps.log (world size, restart count, group). The hosts, the agents and
the reading and checking of what the workers wrote are netns_training.py's (NetnsTrainingTest).

Scenarios (hosts 0..2 start in each):
- a node lost: host 2's agent and workers are SIGKILLed mid-run; the two others go on at world
  size 4 from the last checkpoint, within the keep-alive timeout + last call + the script's own
  start-up (+ margin), without spending a restart;
- a node arriving: host 3's agent starts mid-run; the group grows to world size 8 (--nnodes=2:4
  there: with 2:3 a fourth 2-worker node could never join), without spending a restart;
- a worker failing on every attempt: the job ends after exactly --max_restarts restarts, every
  agent exits with the worker's code (3) and prints the root-cause summary;
- a hot spare (issue 22): --nnodes=2:2 --max_restarts=0 with a third agent waiting; host 1 is
  SIGKILLed with its workers; the spare takes its place at world size 4 within the heartbeat
  timeout + one interval + start-up (+ margin), no restart is charged, the job finishes.

Skipped (exit 77) without torch; its tests skip without root/`ip netns`. Timings are printed.
"""
import time
import unittest

from netns_training import (  # the hosts, agents and checks; lib: ddprun_testlib
    CKPT_EVERY, HEARTBEAT_TIMEOUT, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, LAST_CALL,
    MAX_RESTARTS, NPROC, NetnsTrainingTest, lib)

lib.exit_if_no_torch()

# What kill -> first step of the new group may take beyond heartbeat timeout + last call + the
# script's own start-up on this 2-core machine: stopping the survivors' old workers (SIGTERM),
# the rendezvous round trips, spawning 4 interpreters while the CPU is shared with the agents and
# the test itself, and the jitter of a start-up measured on another group (6 workers then).
MARGIN = 5.0


@unittest.skipUnless(lib.can_create_netns(), "needs root and `ip netns`")
class ElasticNetnsTest(NetnsTrainingTest):

    RDZV_ID_PREFIX = "elastic-netns"

    # -- scenarios -----------------------------------------------------------------------------

    def test_a_lost_node_survivors_resume_at_world_size_4(self):
        procs = self.start_hosts(3)
        kill_at = 2 * CKPT_EVERY + 2  # mid-interval: the survivors redo the steps after 10
        before = self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= kill_at,
                                "step %d at world size 6" % kill_at)
        old_group = before["group"]
        killed_at = self.kill_host(2)

        results = self.finish_all(procs[:2])
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        procs[2].wait(timeout=10)
        self.assertNoLeftovers()

        entries = self.steps()
        records = self.started()
        after = [e for e in entries if e["group"] != old_group and e["t"] > killed_at]
        self.assertTrue(after, "no step after the kill\n" + self.describe_agents())
        new_group = after[0]["group"]
        first = [r for r in records if r["group"] == old_group]
        second = [r for r in records if r["group"] == new_group]
        # Timings first (they go into the test log whatever the checks below say).
        startup_first, startup_second = self.startup(first), self.startup(second)
        startup = max(startup_first, startup_second)
        resumed = after[0]["t"] - killed_at
        respawned = min(r["spawn"] for r in second) - killed_at
        budget = HEARTBEAT_TIMEOUT + LAST_CALL + startup + MARGIN
        print("\n[lost node] kill -> first step at world size %d: %.2f s (kill -> new workers "
              "spawned %.2f s; start-up spawn -> first step: first group (6 workers) %.2f s, "
              "new group (4 workers) %.2f s); budget %.2f s = keep-alive %d x %d + last call %d "
              "+ start-up %.2f + margin %.1f; resumed at step %d after step %d; restart counts "
              "logged: %s" % (
                  after[0]["world_size"], resumed, respawned, startup_first, startup_second,
                  budget, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, LAST_CALL, startup, MARGIN,
                  after[0]["step"], max(e["step"] for e in entries if e["group"] == old_group),
                  sorted({e["restart_count"] for e in entries})))

        segments = self.check_history(entries)
        self.assertEqual(len(segments), 2, "expected the first group and one after the kill: %s"
                         % [(s[0]["group"], s[0]["world_size"], s[0]["step"]) for s in segments])
        self.assertEqual(entries[-1]["world_size"], NPROC * 2, self.describe_agents())
        self.assertEqual(len(first), 3 * NPROC)
        self.assertEqual(len(second), 2 * NPROC)
        self.assertNotIn("2", {r["host"] for r in second})
        self.assertLessEqual(resumed, budget, self.describe_agents())
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a lost node spent a failure restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})

    def test_b_new_node_grows_the_group_to_world_size_8(self):
        nnodes = "2:4"  # a 4th node of 2 workers: world size 8
        procs = self.start_hosts(3, nnodes)
        self.wait_step(lambda e: e["world_size"] == 6 and e["step"] >= CKPT_EVERY + 2,
                       "step %d at world size 6" % (CKPT_EVERY + 2))
        joined_at = time.time()
        procs.append(self.start_agent(3, nnodes))
        grown = self.wait_step(lambda e: e["world_size"] == 8, "a step at world size 8")
        results = self.finish_all(procs)
        entries = self.steps()
        records = self.started()
        new = [r for r in records if r["group"] == grown["group"]]
        print("\n[new node] agent of host 3 started -> first step at world size 8: %.2f s "
              "(-> new workers spawned %.2f s; their start-up %.2f s); resumed at step %d; "
              "restart counts logged: %s" % (
                  grown["t"] - joined_at, min(r["spawn"] for r in new) - joined_at,
                  self.startup(new), grown["step"], sorted({e["restart_count"] for e in entries})))

        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
        self.assertNoLeftovers()
        self.check_history(entries)
        self.assertEqual(entries[-1]["world_size"], 8, self.describe_agents())
        self.assertEqual(sorted(r["host"] for r in new), sorted(["0", "1", "2", "3"] * NPROC))
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a new node spent a failure restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})

    def test_c_failing_worker_ends_the_job_after_max_restarts(self):
        fail_step = 3  # < CKPT_EVERY: no checkpoint gets past it, every attempt fails there
        started_at = time.monotonic()
        procs = self.start_hosts(3, script_args=("--fail-rank", "1", "--fail-step",
                                                 str(fail_step), "--fail-code", "3"))
        results = self.finish_all(procs)
        elapsed = time.monotonic() - started_at
        for result in results:
            self.assertExit(result, 3)
            self.assertIn("Root Cause", result.stderr, result.describe())
            self.assertNoLauncherTraceback(result)
        self.assertNoLeftovers()

        records = self.started()
        counts = sorted(r["restart_count"] for r in records if r["rank"] == 1)
        self.assertEqual(sorted(set(r["restart_count"] for r in records)),
                         list(range(MAX_RESTARTS + 1)),
                         "attempts: %s\n%s" % (counts, self.describe_agents()))
        self.assertEqual(sorted(set(counts)), list(range(MAX_RESTARTS + 1)))
        entries = self.steps()
        self.assertEqual(max(e["restart_count"] for e in entries), MAX_RESTARTS)
        self.assertTrue(all(e["step"] < fail_step for e in entries), self.describe_agents())
        print("\n[failing worker] %d attempts (restart counts of rank 1's workers: %s), "
              "all %d agents exited 3 after %.1f s" % (len(counts), counts, len(results),
                                                      elapsed))

    def test_d_a_hot_spare_replaces_a_lost_member_without_a_restart(self):
        """Issue 22: --nnodes=2:2 --max_restarts=0 with a third agent waiting as a hot spare;
        host 1 (not the store host) is SIGKILLed with its workers. The spare takes its place at
        the same world size, nothing is charged as a restart, and the job finishes."""
        nnodes = "2:2"
        procs = self.start_hosts(2, nnodes, max_restarts=0)
        self.wait_step(lambda e: e["world_size"] == 2 * NPROC, "a step at world size 4")
        procs.append(self.start_agent(2, nnodes, max_restarts=0))
        view = lib.wait_for(self._spare_listed, 30, "host 2 listed as a hot spare", interval=0.2)
        steps_now = max(e["step"] for e in self.steps())
        kill_at = max(2 * CKPT_EVERY + 2, steps_now + 2)
        before = self.wait_step(lambda e: e["step"] >= kill_at, "step %d" % kill_at)
        old_group = before["group"]
        killed_at = self.kill_host(1)

        results = self.finish_all([procs[0], procs[2]])
        procs[1].wait(timeout=10)
        for result in results:
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)
            self.assertNotIn("restart(s) are spent", result.stderr)
        self.assertIn("round 0 runs with the maximum of 2 node(s): this node waits as a hot spare",
                      results[1].stderr)
        self.assertNoLeftovers()

        entries = self.steps()
        records = self.started()
        after = [e for e in entries if e["group"] != old_group and e["t"] > killed_at]
        self.assertTrue(after, "no step after the kill\n" + self.describe_agents())
        second = [r for r in records if r["group"] == after[0]["group"]]
        startup = self.startup(second)
        resumed = after[0]["t"] - killed_at
        budget = HEARTBEAT_TIMEOUT + KEEP_ALIVE_INTERVAL + startup + MARGIN
        print("\n[hot spare] kill -> first step at world size %d: %.2f s (kill -> new workers "
              "spawned %.2f s; their start-up %.2f s); budget %.2f s = heartbeat timeout %d + one "
              "interval %d + start-up + margin %.1f; spare listed as %s; restart counts logged: "
              "%s" % (after[0]["world_size"], resumed, min(r["spawn"] for r in second) - killed_at,
                      startup, budget, HEARTBEAT_TIMEOUT, KEEP_ALIVE_INTERVAL, MARGIN,
                      [(n["host"], n["ticket"]) for n in view["forming"]["nodes"]],
                      sorted({e["restart_count"] for e in entries})))

        self.check_history(entries)
        self.assertEqual({e["world_size"] for e in entries}, {2 * NPROC}, self.describe_agents())
        self.assertEqual(sorted(r["host"] for r in second), sorted(["0", "2"] * NPROC))
        self.assertEqual({e["restart_count"] for e in entries}, {0},
                         "a lost node spent a restart\n" + self.describe_agents())
        self.assertEqual({r["restart_count"] for r in records}, {0})
        self.assertLessEqual(resumed, budget, self.describe_agents())

    def _spare_listed(self):
        self._fail_if_exited()
        view = self.rdzv_view()
        forming = view.get("forming") or {}
        if not forming.get("hot_spares"):
            return None
        if [n.get("addr") for n in forming["nodes"]] != [self.hosts.addresses[2]]:
            return None
        return view


if __name__ == "__main__":
    unittest.main()
