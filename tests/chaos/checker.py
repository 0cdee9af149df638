"""The chaos harness's checker: invariants over one schedule's recorded history (pure: reads
the dict chaos.py writes as history.json, no I/O).

History: faults (kind, hosts, inject, heal, recovered, ...), agents (one record per agent
incarnation: host, start, exit, rc, error lines, its --event_log entries), samples ([t, host,
live worker pids] at each change of the process table), steps (every rank's line per step:
step, rank, world_size, restart_count, group, pid, t), leftovers, released_at, config.

Invariants (docs/reliability.md, "Network faults"), each a function returning Violations:
- split-brain: two groups train at the same time (the step intervals of two rank-0 processes
  overlap);
- steps-back: a group resumes before the latest checkpoint, or skips or repeats a step;
- restart-count: the nodes of one round disagree on the restart count, or it goes backwards (in
  one agent's events, or from one group's steps to the next);
- restart-spent: the restart count goes up with no worker killed since the group before (a
  lost node, a partition or a pause must cost no restart);
- stale-workers: a node keeps the workers of a round after it was declared lost, past the time
  its agent could act (the heal for a paused or cut-off agent, at most SELF_DETECT after the
  loss) plus STOP_GRACE;
- quorum: a host cut off from the others (alone: no quorum) forms a round or starts workers;
- leftovers: a process of the job outlives it;
- recovery: the job is not training at full size within RECOVERY_BOUND of a heal;
- job-ended: every agent gone for good (lost quorum, then the closed rendezvous) after a fault
  with no loss beside it (with loss on every host no side may be able to prove a majority: the
  documented end);
- exit: an agent exits 0 before the job is released, exits non-zero outside a fault on its
  host (a cut, a pause, a kill, or loss laid under another fault) or without an error line of
  its own, or writes anything but its log lines to stderr (a traceback, an abort; the workers'
  output goes to files); or the job does not finish;
- slow-network / etcd-minority: a delay episode (a slow network, every host still reachable) or
  the pause of one etcd member (a minority of the cluster) changes the group: a node is declared
  lost or a round forms between its injection and SLOW_SETTLE heartbeat timeouts after its
  heal.
"""
import re

RECOVERY_BOUND = 45.0  # heal -> a step at full size: agent restart + rendezvous + torch start-up
STOP_GRACE = 5.0       # the agent can act -> its stale workers gone (SIGTERM, reap, sampling)
SELF_DETECT = 4.0      # x heartbeat timeout: a cut-off agent finds its own loss within this
QUORUM_SETTLE = 1.0    # x heartbeat timeout after a cut before the minority must have stopped
EXIT_SLACK = 10.0      # an agent's exit counts as the fault's until this long after the heal
# An agent of the store's side that lost its quorum looks for the job at a moved store for
# read_timeout (the config's, else torchrun's 60 s) + 2 heartbeat timeouts before it exits
# (docs/elastic.md, "A side that stops does not end the job").
READ_TIMEOUT = 60.0
SLOW_SETTLE = 1.0      # x heartbeat timeout after the heal of a delay or etcd pause: still free
CUTS = ("partition", "oneway-in", "oneway-out")
CLOSED_LINE = "' is closed: "  # the job has finished, or a lost quorum closed it
FINISHED_LINE = "' is closed: the job has finished"


class Violation:
    def __init__(self, invariant, message, history, t0=None, t1=None):
        self.invariant, self.message = invariant, message
        self.slice = _slice(history, t0, t1) if t0 is not None else []

    def report(self, seed, index, without=()):
        lines = ["chaos: VIOLATION [%s] seed %s schedule %d: %s" % (
            self.invariant, seed, index, self.message),
            "  replay: make chaos SEED=%s FIRST=%d SCHEDULES=1%s" % (
                seed, index, " WITHOUT=%s" % ",".join(without) if without else "")]
        lines += ["  | " + line for line in self.slice]
        return "\n".join(lines)

    def __repr__(self):
        return "Violation(%s: %s)" % (self.invariant, self.message)


def check(history):
    found = []
    for invariant in (split_brain, steps_back, restart_count, restart_spent, stale_workers,
                      quorum, leftovers, recovery, job_ended, exits, slow_network):
        found += invariant(history)
    return found


def summary(history):
    agents = history.get("agents", [])
    rounds = {(e.get("master"), e.get("round")) for a in agents for e in a["events"]
              if e.get("event") == "round_formed"}
    rank0 = [s for s in history.get("steps", []) if s.get("rank") == 0]
    recovered = ["%.1f" % (f["recovered"] - f["heal"]) for f in history.get("faults", [])
                 if f.get("recovered") is not None]
    counts = sorted({s["restart_count"] for s in rank0})
    delayed = sum(_delayed_packets(line) for f in history.get("faults", [])
                  for line in f.get("delayer", {}).values())
    return ("%d rounds, %d groups, %d steps, restart counts %s, %d agent exits (%s), "
            "heal -> full size %s s%s" % (
                len(rounds), len({s["pid"] for s in rank0}),
                max([s["step"] for s in rank0] or [-1]) + 1, counts, len(agents),
                ",".join(str(a["rc"]) for a in agents), "/".join(recovered) or "-",
                ", %d packets delayed" % delayed if delayed else ""))


def _delayed_packets(line):
    """The packet count of a delayer's summary line ("delayer: queue 0: 87 packets, ...")."""
    match = re.search(r"(\d+) packets", line)
    return int(match.group(1)) if match else 0


# -- helpers -----------------------------------------------------------------------------------

def _events(history):
    """Every agent event with its agent's host and incarnation, in time order."""
    found = []
    for agent in history.get("agents", []):
        for event in agent["events"]:
            found.append(dict(event, _host=agent["host"], _inc=agent["incarnation"]))
    return sorted(found, key=lambda e: e.get("time", 0))


def _segments(history):
    """Rank 0's step lines, split by rank-0 process (one per group), in time order."""
    by_pid = {}
    for step in history.get("steps", []):
        if step.get("rank") == 0:
            by_pid.setdefault(step["pid"], []).append(step)
    segments = [sorted(lines, key=lambda s: s["t"]) for lines in by_pid.values()]
    return sorted(segments, key=lambda seg: seg[0]["t"])


def _slice(history, t0, t1, margin=2.0, limit=14):
    lo, hi = t0 - margin, (t1 if t1 is not None else t0) + margin
    lines = []
    for fault in history.get("faults", []):
        if fault.get("inject", 0) <= hi and fault.get("heal", fault.get("inject", 0)) >= lo:
            lines.append("fault %s hosts %s inject %.2f heal %.2f" % (
                fault["kind"], fault["hosts"], fault["inject"], fault.get("heal", 0)))
    events = [e for e in _events(history) if lo <= e.get("time", 0) <= hi]
    for e in events[:limit]:
        lines.append("%.2f host %d#%d %s round %s rank %s restart %s %s" % (
            e["time"], e["_host"], e["_inc"], e.get("event"), e.get("round"),
            e.get("group_rank"), e.get("restart_count"),
            {k: e[k] for k in ("node", "reason", "world_size", "pids", "exit_code", "error")
             if k in e}))
    if len(events) > limit:
        lines.append("... %d more events" % (len(events) - limit))
    steps = [s for s in history.get("steps", []) if s.get("rank") == 0 and lo <= s["t"] <= hi]
    for s in steps[:limit]:
        lines.append("%.2f step %d world %d restart %d group %s pid %d host %s" % (
            s["t"], s["step"], s["world_size"], s["restart_count"], s["group"], s["pid"],
            s.get("host")))
    if len(steps) > limit:
        lines.append("... %d more steps" % (len(steps) - limit))
    return lines


def _fault_on(history, host, t, kinds, slack=0.0):
    """The latest fault of `kinds` on `host` active at wall-clock t (inject <= t <= heal +
    slack)."""
    for fault in reversed(history.get("faults", [])):
        window = fault["inject"] <= t <= fault.get("heal", fault["inject"]) + slack
        if window and fault["kind"] in kinds and host in fault["hosts"]:
            return fault
        noise = fault.get("background")
        if window and noise and noise["kind"] in kinds and host in noise["hosts"]:
            return dict(noise, inject=fault["inject"], heal=fault.get("heal"))
    return None


# -- invariants ------------------------------------------------------------------------------

def split_brain(history):
    found = []
    segments = _segments(history)
    for a, b in zip(segments, segments[1:]):
        if b[0]["t"] < a[-1]["t"]:
            found.append(Violation(
                "split-brain", "group %s (rank 0 pid %d, world size %d) trained steps %d-%d "
                "until %.2f while group %s (rank 0 pid %d, world size %d) trained from %.2f" % (
                    a[0]["group"], a[0]["pid"], a[0]["world_size"], a[0]["step"], a[-1]["step"],
                    a[-1]["t"], b[0]["group"], b[0]["pid"], b[0]["world_size"], b[0]["t"]),
                history, b[0]["t"], a[-1]["t"]))
    return found


def steps_back(history):
    every = history["config"]["ckpt_every"]
    found, done = [], []
    for segment in _segments(history):
        latest = len(done) // every * every
        first = segment[0]["step"]
        # The log line precedes the checkpoint: a group stopped in between leaves the previous
        # checkpoint as the latest one.
        if first not in (latest, max(0, latest - every)):
            found.append(Violation(
                "steps-back", "group %s resumed at step %d; %d steps were done, the latest "
                "checkpoint is step %d" % (segment[0]["group"], first, len(done), latest),
                history, segment[0]["t"]))
        del done[first:]
        for line in segment:
            if line["step"] != len(done):
                found.append(Violation(
                    "steps-back", "group %s logged step %d after step %d" % (
                        line["group"], line["step"], len(done) - 1), history, line["t"]))
                break
            done.append(line)
    return found


def restart_count(history):
    found = []
    by_round = {}
    for event in _events(history):
        if event.get("event") == "round_formed":
            key = (event.get("master"), event.get("round"))
            by_round.setdefault(key, []).append(event)
    for (master, rnd), events in by_round.items():
        counts = {e.get("restart_count") for e in events}
        if len(counts) > 1:
            found.append(Violation(
                "restart-count", "round %s (master %s): the nodes logged restart counts %s" % (
                    rnd, master, {"host %d" % e["_host"]: e.get("restart_count")
                                  for e in events}), history, events[0]["time"]))
    for agent in history.get("agents", []):
        last = None
        for event in agent["events"]:
            count = event.get("restart_count")
            if count is not None and last is not None and count < last:
                found.append(Violation(
                    "restart-count", "host %d's agent #%d went from restart count %d to %d "
                    "(%s)" % (agent["host"], agent["incarnation"], last, count,
                              event.get("event")), history, event["time"]))
                break
            last = count if count is not None else last
    segments = _segments(history)
    for a, b in zip(segments, segments[1:]):
        if b[0]["restart_count"] < a[-1]["restart_count"]:
            found.append(Violation(
                "restart-count", "group %s trained at restart count %d after group %s at %d" % (
                    b[0]["group"], b[0]["restart_count"], a[0]["group"],
                    a[-1]["restart_count"]), history, b[0]["t"]))
    return found


def restart_spent(history):
    """A restart is spent only by a worker's own failure (a kill-worker fault): network faults,
    pauses and lost machines change the membership for free."""
    found = []
    kills = sorted(f["inject"] for f in history.get("faults", []) if f["kind"] == "kill-worker")
    segments = _segments(history)
    for a, b in zip(segments, segments[1:]):
        if b[0]["restart_count"] <= a[-1]["restart_count"]:
            continue
        cause = next((t for t in kills if a[0]["t"] - 1.0 <= t <= b[0]["t"]), None)
        if cause is None:
            found.append(Violation(
                "restart-spent", "group %s trained at restart count %d after group %s at %d, "
                "and no worker was killed in between: a %s spent a restart" % (
                    b[0]["group"], b[0]["restart_count"], a[0]["group"], a[-1]["restart_count"],
                    " and ".join(sorted({f["kind"] for f in history.get("faults", [])
                                         if f["inject"] <= b[0]["t"]})) or "fault"),
                history, a[-1]["t"], b[0]["t"]))
        else:
            kills.remove(cause)
    return found


def _pid_gone_times(history):
    """{pid: wall-clock time of the first sample of its host without it} (ended_at if never)."""
    alive, gone = {}, {}
    for t, host, pids in sorted(history.get("samples", []), key=lambda s: s[0]):
        for pid in alive.get(host, ()):
            if pid not in pids:
                gone.setdefault(pid, t)
        alive[host] = set(pids)
    for pids in alive.values():
        for pid in pids:
            gone.setdefault(pid, history.get("ended_at", float("inf")))
    return gone


def stale_workers(history):
    found = []
    heartbeat = history["config"]["heartbeat_timeout"]
    gone = _pid_gone_times(history)
    events = _events(history)
    formed = {}
    started = {}
    for e in events:
        key = (e["_host"], e["_inc"], e.get("round"))
        if e.get("event") == "round_formed":
            formed[(e.get("master"), e.get("round"), e.get("group_rank"))] = e
            formed[key] = e
        elif e.get("event") == "workers_started":
            started[key] = e
    for e in events:
        if e.get("event") != "node_lost" or e.get("node", -1) < 0:
            continue
        mine = formed.get((e["_host"], e["_inc"], e.get("round")))
        if mine is None:
            continue
        lost = formed.get((mine.get("master"), e.get("round"), e.get("node")))
        if lost is None:
            continue
        workers = started.get((lost["_host"], lost["_inc"], e.get("round")))
        if workers is None:
            continue
        t, host = e["time"], lost["_host"]
        if host == e["_host"] and lost["_inc"] == e["_inc"]:
            can_act = t  # it found its own loss (a paused agent that woke up)
        else:
            fault = _fault_on(history, host, t, CUTS + ("pause", "kill-agent"))
            heal = fault["heal"] if fault else t
            can_act = t + SELF_DETECT * heartbeat
            if fault and fault["kind"] == "pause":
                can_act = max(t, heal)
            elif fault:
                can_act = min(max(t, heal), can_act)
        deadline = can_act + STOP_GRACE
        late = {pid: gone.get(pid, 0) for pid in workers.get("pids", [])
                if gone.get(pid, 0) > deadline}
        if late:
            found.append(Violation(
                "stale-workers", "host %d was declared lost at %.2f (round %s, by host %d) but "
                "its workers %s ran until %s, past %.2f (it could act at %.2f, + %.0f s)" % (
                    host, t, e.get("round"), e["_host"], sorted(late),
                    ", ".join("%.2f" % v for v in late.values()), deadline, can_act,
                    STOP_GRACE), history, t, max(late.values())))
    return found


def quorum(history):
    found = []
    heartbeat = history["config"]["heartbeat_timeout"]
    for fault in history.get("faults", []):
        if fault["kind"] not in CUTS or fault["hold"] < heartbeat * (1 + QUORUM_SETTLE):
            continue
        host = fault["hosts"][0]
        lo, hi = fault["inject"] + heartbeat * QUORUM_SETTLE, fault["heal"]
        for e in _events(history):
            if e["_host"] == host and lo < e.get("time", 0) < hi and \
                    e.get("event") in ("round_formed", "workers_started"):
                found.append(Violation(
                    "quorum", "host %d, cut off alone (%s %.2f-%.2f), logged %s at %.2f" % (
                        host, fault["kind"], fault["inject"], fault["heal"], e["event"],
                        e["time"]), history, e["time"]))
                break
    return found


def leftovers(history):
    if not history.get("leftovers"):
        return []
    return [Violation("leftovers", "%d processes outlived the job: %s" % (
        len(history["leftovers"]), history["leftovers"][:5]), history)]


def recovery(history):
    found = []
    ended = history.get("job_ended")
    for fault in history.get("faults", []):
        if ended is not None and fault.get("recovered") is None:
            continue  # job_ended says whether it could end so
        took = None if fault.get("recovered") is None else fault["recovered"] - fault["heal"]
        if took is None or took > RECOVERY_BOUND:
            found.append(Violation(
                "recovery", "after the heal of %s on hosts %s at %.2f the job %s" % (
                    fault["kind"], fault["hosts"], fault["heal"],
                    "never trained at full size again" if took is None else
                    "took %.1f s to train at full size (bound %.0f s)" % (took, RECOVERY_BOUND)),
                history, fault["heal"]))
    return found


def job_ended(history):
    """Every agent gone for good (lost quorum, then the closed rendezvous) is the documented end
    only when no side could keep a quorum: loss on every host beside a cut (no majority can
    prove itself); after a single fault it is a violation."""
    ended = history.get("job_ended")
    if ended is None:
        return []
    quorum_exits = [a for a in history.get("agents", [])
                    if any("lost quorum" in line for line in a["errors"])]
    first = min((a["exit"] for a in quorum_exits), default=ended)
    noise = [f for f in history.get("faults", []) if f["inject"] <= first <= f["heal"] +
             EXIT_SLACK and "loss" in (f["kind"], (f.get("background") or {}).get("kind"))]
    if noise:
        return []
    return [Violation("job-ended", "every agent ended (first at %.2f, %s) after a single fault "
                      "with no loss beside it: one side should have kept a quorum" % (
                          first, "; ".join(sorted({a["errors"][-1][:80]
                                                   for a in quorum_exits})) or "no error"),
                      history, first, ended)]


def exits(history):
    found = []
    released = history.get("released_at")
    if history.get("harness_error"):
        found.append(Violation("exit", "the job did not finish: %s" % history["harness_error"],
                               history))
    for agent in history.get("agents", []):
        rc, t, host = agent["rc"], agent["exit"] or 0, agent["host"]
        where = "host %d's agent #%d" % (host, agent["incarnation"])
        if agent.get("foreign"):  # not the launcher's log: a traceback, an abort, a crash
            found.append(Violation("exit", "%s wrote to stderr: %s" % (
                where, " | ".join(agent["foreign"][:4])), history, t))
        if rc == 0:
            if released is None or t < released:
                found.append(Violation("exit", "%s exited 0 before the job was released" % where,
                                       history, t))
            continue
        closed = agent["errors"] and CLOSED_LINE in agent["errors"][-1]
        ended = history.get("job_ended")
        if ended is not None and (closed or (rc == 143 and t >= ended)):
            continue  # told the job is over, or cancelled after it ended (job_ended judges it)
        if closed and FINISHED_LINE in agent["errors"][-1] and released is not None and \
                t >= released:
            continue  # a node that was not in the last round (a hot spare): told it finished
        if released is not None and t >= released and history.get("harness_error") is None:
            found.append(Violation("exit", "%s exited %s after the release: %s" % (
                where, rc, agent["errors"][-1:] or agent["stderr_tail"][-1:]), history, t))
            continue
        # Loss on every host beside a cut can stall the majority's links past the heartbeat
        # timeout too: then no side has a quorum and every agent ends with "lost quorum" (a
        # documented end, docs/reliability.md).
        slack = EXIT_SLACK
        if agent["errors"] and "lost quorum" in agent["errors"][-1]:
            config = history.get("config", {})
            slack += config.get("read_timeout", READ_TIMEOUT) + \
                2 * config.get("heartbeat_timeout", 3.0)
        fault = _fault_on(history, host, t, CUTS + ("pause", "kill-agent", "loss", "leave"),
                          slack)
        if fault is None and history.get("harness_error") is None:
            found.append(Violation("exit", "%s exited %s with no fault on its host: %s" % (
                where, rc, agent["errors"][-1:] or agent["stderr_tail"][-1:]), history, t))
        elif fault is not None and fault["kind"] != "kill-agent" and not agent["errors"]:
            found.append(Violation("exit", "%s exited %s without an error line" % (where, rc),
                                   history, t))
    return found


def slow_network(history):
    """Faults that leave every agent able to work cost the group nothing: under a delay episode
    (every host reachable, each packet late by at most a few hundred ms, far below the heartbeat
    timeout: "slow-network") or the pause of one etcd member (a minority of the cluster, whose
    leader change renews every lease: "etcd-minority") no node is declared lost and no round
    forms, until SLOW_SETTLE heartbeat timeouts after the heal."""
    found = []
    heartbeat = history.get("config", {}).get("heartbeat_timeout", 3.0)
    settle = SLOW_SETTLE * heartbeat
    for fault in history.get("faults", []):
        if fault["kind"] not in ("delay", "etcd-pause") or fault.get("heal") is None:
            continue
        end = fault["heal"] + settle
        if fault["kind"] == "etcd-pause" and (fault.get("effect") or {}).get("leader") and \
                fault["heal"] - fault["inject"] > heartbeat:
            # etcd 3.4.23's own bug, not ddprun's: a leader frozen past the lease TTL revokes,
            # as it resumes, the leases that expired in its stale view (etcd-io/etcd#12528,
            # fixed in 3.4.28; docs/etcd.md). What follows the heal is etcd's; the pause is not.
            end = fault["heal"]
        changes = [e for e in _events(history) if e.get("event") in ("node_lost", "round_formed")
                   and fault["inject"] <= e.get("time", 0) <= end]
        if not changes:
            continue
        first = changes[0]
        if fault["kind"] == "delay":
            invariant, what = "slow-network", "under %s+-%s ms delay on hosts %s" % (
                fault.get("ms"), fault.get("jitter"), fault["hosts"])
        else:
            invariant, what = "etcd-minority", "while the etcd member of host %d was paused" % (
                fault["hosts"][0])
        found.append(Violation(
            invariant, "%s, host %d's agent saw %s (round %s) at %.2f: it cost the group" % (
                what, first["_host"], first["event"], first.get("round"), first["time"]),
            history, fault["inject"], fault["heal"]))
    return found
