"""The chaos checker on hand-made histories: a clean history passes, and each invariant fails
on a history that breaks it (and only that invariant's check fires). Also: a seed replays its
schedule. Stdlib only, no processes: `python3 -m unittest discover -s tests/chaos`."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import schedule  # noqa: E402

T0 = 1000.0


def steps(pid, group, first, last, t, world=3, restart=0, dt=0.1):
    return [{"step": s, "rank": 0, "world_size": world, "restart_count": restart,
             "group": group, "pid": pid, "host": "0", "t": t + (s - first) * dt}
            for s in range(first, last + 1)]


def agent(host, events, rc=0, exit_t=T0 + 60, inc=0, errors=(), foreign=()):
    return {"host": host, "incarnation": inc, "pid": 100 + host, "start": T0, "exit": exit_t,
            "rc": rc, "errors": list(errors), "foreign": list(foreign), "stderr_tail": [],
            "events": events}


def ev(t, event, rnd, rank, restart=0, **fields):
    return dict({"time": t, "event": event, "round": rnd, "group_rank": rank,
                 "restart_count": restart}, **fields)


def clean():
    """Three hosts train (round 0), host 2 is paused 5 s, declared lost at +4.5; hosts 0, 1
    go on (round 1) and host 2 rejoins after the heal (round 2); released at +40."""
    events = {h: [ev(T0, "round_formed", 0, h, master="m:1", world_size=3),
                  ev(T0, "workers_started", 0, h, pids=[200 + h])] for h in range(3)}
    for h in (0, 1):
        events[h] += [ev(T0 + 4.5, "node_lost", 0, h, node=2),
                      ev(T0 + 4.6, "round_formed", 1, h, master="m:2", world_size=2),
                      ev(T0 + 4.6, "workers_started", 1, h, pids=[210 + h])]
    for h in range(3):
        events[h] += [ev(T0 + 7.0, "round_formed", 2, h, master="m:3", world_size=3),
                      ev(T0 + 7.0, "workers_started", 2, h, pids=[220 + h])]
    return {
        "seed": "t", "index": 0, "started_at": T0, "released_at": T0 + 40, "ended_at": T0 + 61,
        "harness_error": None, "leftovers": [],
        "config": {"hosts": 3, "nproc": 1, "heartbeat_timeout": 3, "ckpt_every": 5},
        "faults": [{"kind": "pause", "hosts": [2], "hold": 5.0, "inject": T0 + 1.5,
                    "heal": T0 + 6.5, "recovered": T0 + 9.0}],
        "agents": [agent(h, events[h]) for h in range(3)],
        # round 0: steps 0-13 until +1.4; round 1 resumes at the checkpoint 10; round 2 at 20
        "steps": steps(200, "m:1", 0, 13, T0) + steps(210, "m:2", 10, 21, T0 + 5.0, world=2) +
        steps(220, "m:3", 20, 60, T0 + 9.0),
        "samples": [[T0, 0, [200]], [T0, 1, [201]], [T0, 2, [202]],
                    [T0 + 4.55, 0, []], [T0 + 4.55, 1, []], [T0 + 4.7, 0, [210]],
                    [T0 + 4.7, 1, [211]], [T0 + 6.6, 2, []], [T0 + 6.9, 0, []],
                    [T0 + 6.9, 1, []], [T0 + 7.1, 0, [220]], [T0 + 7.1, 1, [221]],
                    [T0 + 7.1, 2, [222]], [T0 + 60, 0, []], [T0 + 60, 1, []], [T0 + 60, 2, []]],
    }


class CheckerTest(unittest.TestCase):

    def assertOnly(self, history, invariant, fragment="", also=()):
        found = checker.check(history)
        self.assertTrue(found, "expected a %s violation" % invariant)
        self.assertIn(invariant, {v.invariant for v in found}, found)
        self.assertLessEqual({v.invariant for v in found}, {invariant} | set(also), found)
        self.assertIn(fragment, " ".join(v.message for v in found))
        report = found[0].report("s", 3)
        self.assertIn("seed s schedule 3", report)
        self.assertIn("make chaos SEED=s FIRST=3 SCHEDULES=1", report)
        return found

    def test_clean_history_passes(self):
        self.assertEqual(checker.check(clean()), [])
        self.assertIn("3 groups", checker.summary(clean()))

    def test_split_brain(self):
        h = clean()
        h["steps"] += steps(299, "other:9", 14, 16, T0 + 5.2, world=1)  # a second group at once
        # Its steps also break the sequence of steps.
        self.assertOnly(h, "split-brain", "other:9", also=("steps-back",))

    def test_steps_back_past_the_checkpoint(self):
        h = clean()
        h["steps"] = [s for s in h["steps"] if s["pid"] != 210]
        # 14 steps done: the latest checkpoint is 10 (or 5, if it was stopped between its log
        # line and its checkpoint), not 0.
        h["steps"] += steps(210, "m:2", 0, 21, T0 + 5.0, world=2)
        self.assertOnly(h, "steps-back", "resumed at step 0")

    def test_skipped_step(self):
        h = clean()
        h["steps"] = [s for s in h["steps"] if not (s["pid"] == 220 and s["step"] == 30)]
        self.assertOnly(h, "steps-back", "logged step 31 after step 29")

    def test_restart_count_differs_within_a_round(self):
        h = clean()
        h["agents"][1]["events"][-2]["restart_count"] = 1  # round 2 on host 1
        h["agents"][1]["events"][-1]["restart_count"] = 1
        self.assertOnly(h, "restart-count", "restart counts")

    def test_restart_spent_without_a_killed_worker(self):
        h = clean()
        for s in h["steps"]:
            if s["pid"] == 220:
                s["restart_count"] = 1
        for e in h["agents"][0]["events"] + h["agents"][1]["events"] + h["agents"][2]["events"]:
            if e.get("round") == 2:
                e["restart_count"] = 1
        self.assertOnly(h, "restart-spent", "a pause spent a restart")
        h["faults"].append({"kind": "kill-worker", "hosts": [0], "hold": 1.0,
                            "inject": T0 + 6.8, "heal": T0 + 7.8, "recovered": T0 + 9.0})
        self.assertEqual(checker.check(h), [])

    def test_restart_count_goes_back_between_groups(self):
        h = clean()
        for s in h["steps"]:
            if s["pid"] == 210:
                s["restart_count"] = 2
        # (going up to 2 with no worker killed is also a restart spent)
        self.assertOnly(h, "restart-count", "at restart count 0 after group m:2 at 2",
                        also=("restart-spent",))

    def test_lost_node_keeps_its_workers(self):
        h = clean()
        # pid 202 (round 0) lives on until +14, 7.5 s after the wake (the heal).
        h["samples"] = [s for s in h["samples"] if s[1] != 2 or s[0] in (T0, T0 + 60)]
        h["samples"] += [[T0 + 7.1, 2, [202, 222]], [T0 + 14.0, 2, [222]]]
        self.assertOnly(h, "stale-workers", "host 2 was declared lost")

    def test_cut_off_host_forms_a_round_alone(self):
        h = clean()
        h["faults"] = [{"kind": "partition", "hosts": [2], "hold": 8.0, "inject": T0 + 1.5,
                        "heal": T0 + 9.5, "recovered": T0 + 10.0}]
        h["agents"][2]["events"].insert(2, ev(T0 + 5.5, "round_formed", 1, 0, master="x:1"))
        self.assertOnly(h, "quorum", "host 2, cut off alone")

    def test_leftover_process(self):
        h = clean()
        h["leftovers"] = [{"pid": 4242, "state": "S", "cmd": "python3 chaos_train.py"}]
        self.assertOnly(h, "leftovers", "4242")

    def test_slow_recovery(self):
        h = clean()
        h["faults"][0]["recovered"] = T0 + 6.5 + checker.RECOVERY_BOUND + 1
        self.assertOnly(h, "recovery", "bound")
        h["faults"][0]["recovered"] = None
        self.assertOnly(h, "recovery", "never trained at full size again")

    def test_exit_outside_a_fault(self):
        h = clean()
        h["agents"][0].update(rc=1, exit_t=T0 + 20, errors=["[ddprun] E lost quorum: ..."])
        h["agents"][0]["exit"] = T0 + 20
        self.assertOnly(h, "exit", "with no fault on its host")

    def test_a_lost_quorum_exit_counts_as_the_fault_while_the_side_looks_for_the_job(self):
        # The store's side looks for a moved store for read_timeout + 2 heartbeat timeouts.
        h = clean()
        h["faults"] = [{"kind": "partition", "hosts": [0], "hold": 8.0, "inject": T0 + 1.5,
                        "heal": T0 + 9.5, "recovered": T0 + 12.0}]
        line = "ddprun: error: lost quorum: only 1 of the 3 nodes of round 0 came back"
        h["config"]["read_timeout"] = 10.0
        h["agents"][0].update(rc=1, exit=T0 + 9.5 + 10.0 + 10.0 + 5.0, errors=[line])
        self.assertEqual([v for v in checker.check(h) if v.invariant == "exit"], [])
        h["agents"][0]["exit"] = T0 + 9.5 + 10.0 + 10.0 + 6.0 + 1.0
        self.assertIn("with no fault on its host",
                      " ".join(v.message for v in checker.check(h) if v.invariant == "exit"))

    def test_exit_without_an_error_line_or_with_a_traceback(self):
        h = clean()
        h["agents"][2]["rc"], h["agents"][2]["exit"] = 1, T0 + 7.0
        self.assertOnly(h, "exit", "without an error line")
        h = clean()
        h["agents"][1]["foreign"] = ["terminate called after throwing an instance of 'x'"]
        self.assertOnly(h, "exit", "terminate called")

    def test_a_node_told_the_job_finished_after_the_release(self):
        # A hot spare (not in the last round) is told the job finished: that is its end.
        h = clean()
        told = "ddprun: error: the rendezvous 'j' is closed: the job has finished"
        h["agents"][1].update(rc=1, errors=[told])
        self.assertEqual(checker.check(h), [])
        h["agents"][1]["errors"] = ["ddprun: error: the rendezvous 'j' is closed: lost quorum"]
        self.assertOnly(h, "exit", "after the release")

    def test_exit_zero_before_the_release(self):
        h = clean()
        h["agents"][1]["exit"] = T0 + 30
        self.assertOnly(h, "exit", "exited 0 before the job was released")

    def ended(self, background):
        """Every agent ended with lost quorum during a cut of host 2 (no recovery, no release)."""
        h = clean()
        h["faults"] = [{"kind": "partition", "hosts": [2], "hold": 8.0, "inject": T0 + 1.5,
                        "heal": T0 + 9.5, "recovered": None}]
        if background:
            h["faults"][0]["background"] = {"kind": "loss", "hosts": [0, 1, 2], "percent": 10}
        h["steps"] = [s for s in h["steps"] if s["pid"] == 200]
        h["samples"] = [s for s in h["samples"] if s[0] <= T0 + 4.55]
        line = "ddprun: error: lost quorum: only 1 of the 3 nodes of round 0 came back"
        for i, a in enumerate(h["agents"]):
            a["events"] = a["events"][:2]
            a.update(rc=1, exit=T0 + 6.0 + i, errors=[line])
        h.update(released_at=None, job_ended=T0 + 9.0)
        return h

    def test_the_job_may_end_only_when_no_side_could_keep_a_quorum(self):
        self.assertEqual(checker.check(self.ended(background=True)), [])
        self.assertOnly(self.ended(background=False), "job-ended", "after a single fault",
                        also=("exit",))
        delayed = self.ended(background=True)  # a delay leaves every side able to prove itself
        delayed["faults"][0]["background"] = {"kind": "delay", "hosts": [0, 1, 2], "ms": 150,
                                              "jitter": 40}
        self.assertOnly(delayed, "job-ended", "after a single fault", also=("exit",))

    def delayed(self):
        """The clean history with a delay of every host's link 20 s after the pause healed."""
        h = clean()
        h["faults"].append({"kind": "delay", "hosts": [0, 1, 2], "hold": 5.0, "ms": 150,
                            "jitter": 40, "inject": T0 + 20, "heal": T0 + 25,
                            "recovered": T0 + 25})
        return h

    def test_a_slow_network_must_not_cost_the_group(self):
        self.assertEqual(checker.check(self.delayed()), [])
        h = self.delayed()
        h["agents"][0]["events"].append(ev(T0 + 24, "node_lost", 2, 0, node=1))
        self.assertOnly(h, "slow-network", "node_lost", also=("stale-workers",))
        h = self.delayed()  # a round formed just after the heal still counts as the delay's
        h["agents"][1]["events"].append(ev(T0 + 26, "round_formed", 3, 1, master="m:4",
                                           world_size=3))
        self.assertOnly(h, "slow-network", "round_formed", also=("restart-count",))

    def test_a_paused_etcd_member_must_not_cost_the_group(self):
        h = clean()
        h["faults"].append({"kind": "etcd-pause", "hosts": [1], "hold": 5.0, "inject": T0 + 20,
                            "heal": T0 + 25, "recovered": T0 + 25})
        self.assertEqual(checker.check(h), [])
        h["agents"][2]["events"].append(ev(T0 + 23, "node_lost", 2, 2, node=0))
        self.assertOnly(h, "etcd-minority", "etcd member of host 1", also=("stale-workers",))

    def test_a_paused_etcd_leader_answers_only_for_its_pause(self):
        """etcd 3.4.23 revokes leases as a leader frozen past the TTL resumes (its bug): a loss
        just after that heal is excused, one during the pause or after a follower's is not."""
        def paused(leader, hold=5.0):
            h = clean()
            h["faults"].append({"kind": "etcd-pause", "hosts": [1], "hold": hold,
                                "inject": T0 + 20, "heal": T0 + 20 + hold, "recovered": T0 + 26,
                                "effect": {"leader": leader}})
            return h
        h = paused(True)
        h["agents"][2]["events"].append(ev(T0 + 25.05, "node_lost", 2, 2, node=0))
        self.assertEqual([v for v in checker.check(h) if v.invariant == "etcd-minority"], [])
        h = paused(True)
        h["agents"][2]["events"].append(ev(T0 + 24, "node_lost", 2, 2, node=0))
        self.assertOnly(h, "etcd-minority", "etcd member of host 1", also=("stale-workers",))
        h = paused(False)
        h["agents"][2]["events"].append(ev(T0 + 25.05, "node_lost", 2, 2, node=0))
        self.assertOnly(h, "etcd-minority", "etcd member of host 1", also=("stale-workers",))
        h = paused(True, hold=2.0)  # within the TTL (3 s): nothing expired in its view
        h["agents"][2]["events"].append(ev(T0 + 22.05, "node_lost", 2, 2, node=0))
        self.assertOnly(h, "etcd-minority", "etcd member of host 1", also=("stale-workers",))

    def test_an_exit_under_a_delay_alone_is_not_excused(self):
        h = self.delayed()
        h["agents"][0].update(rc=1, exit=T0 + 22, errors=["[ddprun] E lost the store"])
        self.assertOnly(h, "exit", "with no fault on its host")

    def test_each_check_can_fail(self):
        # The clean history stays clean after the copies above (no shared state).
        h = clean()
        copy.deepcopy(h)
        self.assertEqual(checker.check(h), [])


class ScheduleTest(unittest.TestCase):

    def test_a_seed_replays_its_schedule(self):
        def faults(index):
            backend, found = schedule.schedule("ci", index)
            return backend, [f.as_dict() for f in found]
        self.assertEqual(faults(4), faults(4))
        self.assertNotEqual(faults(4), faults(5))

    def test_every_kind_comes_up_and_kinds_are_honoured(self):
        kinds = {f.kind for i in range(80) for f in schedule.schedule("k", i)[1]}
        self.assertEqual(kinds, set(schedule.KINDS))
        self.assertEqual({schedule.schedule("k", i)[0] for i in range(20)},
                         set(schedule.BACKENDS))
        for i in range(40):  # etcd's faults only on the etcd backend
            backend, found = schedule.schedule("k", i)
            if backend == "c10d":
                self.assertFalse([f for f in found if f.kind.startswith("etcd-")])
        without = tuple(k for k in schedule.KINDS if k != "delay")
        for i in range(60):
            for f in schedule.schedule("k", i, kinds=without)[1]:
                self.assertNotEqual(f.kind, "delay")
                if f.background is not None:
                    self.assertNotEqual(f.background.kind, "delay")

    def test_disruptive_faults_mostly_outlast_the_heartbeat_timeout(self):
        holds = [f.hold for i in range(80)
                 for f in schedule.schedule("h", i, heartbeat_timeout=3)[1]
                 if f.kind in ("partition", "pause")]
        longer = [h for h in holds if h > 3]
        self.assertGreater(len(longer), len(holds) // 2)
        self.assertLess(len(longer), len(holds))  # and some blips below it


if __name__ == "__main__":
    unittest.main()
