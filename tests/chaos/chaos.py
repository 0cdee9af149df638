#!/usr/bin/env python3
"""Network-fault chaos for ddprun's elastic launch, checked over the recorded history
(docs/reliability.md, "Network faults").

    chaos.py --seed SEED --schedules N [--first I] [--regressions FILE] [--out DIR]

For each schedule (schedule.py: seeded, replayable), three simulated hosts (network namespaces
on a bridge) each run a ddprun agent with real PyTorch workers (chaos_train.py: gloo,
checkpoints). The harness (harness.py) waits until the job trains at full size, injects each
fault episode, holds it, heals it, and waits until the job trains at full size again; then it
releases the workers, which finish, and every agent must exit. An agent that exits during a
fault is restarted once the fault is healed, as a supervisor would restart it. The history
(event logs, steps, the process table's changes, fault times) is checked by checker.py; each
violation is printed with its seed, schedule index and the slice of the history that shows it.
Histories are kept under --out (default: a temp dir, removed when no violation was found).

Exit: 0 (no violation), 1 (violations), 77 (skipped: not root, no `ip netns`, no iptables or no
torch), 2 (usage).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checker  # noqa: E402
import harness  # noqa: E402
import schedule as schedules  # noqa: E402
from harness import lib  # noqa: E402

STARTUP_WAIT = 120      # agents started -> first step at full size
RECOVERY_WAIT = 120     # heal -> full size, before the schedule is abandoned (checked: BOUND)
FINISH_WAIT = 90        # release -> every agent exited
LEFTOVER_WAIT = 15      # last agent exited -> no process of the job
TICK = 0.05


class Runner:
    def __init__(self, hosts, network, python, out):
        self.hosts, self.network, self.python, self.out = hosts, network, python, out

    # -- one schedule --------------------------------------------------------------------------

    def run(self, seed, index, backend, faults, without=()):
        workdir = os.path.join(self.out, "%s-%03d" % (_safe(seed), index))
        if os.path.exists(workdir):
            shutil.rmtree(workdir)
        os.makedirs(workdir)
        job = harness.Job(self.hosts, workdir, "chaos-%s" % uuid.uuid4().hex[:8], self.python,
                          backend)
        self.job, self.active, self.pending, self.released = job, set(), set(), False
        self.closed_hosts, self.ended_at = set(), None
        fault_log, started_at, error = [], time.time(), None
        full = released_at = None
        leftovers = []
        try:
            if job.etcd:
                job.etcd.start()
                self.wait(job.etcd.listening, 30, "the etcd members' client ports")
            job.start_agent(0)
            if not job.etcd:  # host 0 serves the c10d store: the others join it
                self.wait(lambda: job.listening(0), 30, "host 0's store")
            for host in range(1, len(self.hosts.addresses)):
                job.start_agent(host)
            job.start_sampler()
            full = self.wait_full_size(started_at, STARTUP_WAIT)
            if full is None:
                error = "the job never trained at full size"
            for fault in faults if full is not None else []:
                entry = self.episode(fault)
                fault_log.append(entry)
                if self.ended_at is not None:  # the checker says whether it could end so
                    break
                if entry["recovered"] is None:
                    error = "no full-size training within %d s of the heal" % RECOVERY_WAIT
                    break
            ended = self.ended_at is not None
            released_at = self.release() if error is None and not ended else None
            finished = self.wait(lambda: not job.agents, FINISH_WAIT, None,
                                 restart=False) if error is None else False
            if error is None and not finished:
                error = "agents still running %d s after the release: hosts %s" % (
                    FINISH_WAIT, sorted(job.agents))
            if error is None:
                self.wait(lambda: not job.leftovers(), LEFTOVER_WAIT, None, restart=False)
                leftovers = _describe_pids(job.leftovers())
        finally:
            self.heal_everything()
            job.stop_sampler()
            job.kill_everything()
            if job.etcd:
                job.etcd.stop()
            for agent in list(job.agents.values()):
                try:
                    agent.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            job.reap()
        history = {
            "seed": seed, "index": index, "without": list(without), "backend": backend,
            "faults": fault_log,
            "schedule": [f.as_dict() for f in faults], "started_at": started_at,
            "first_full_size": full, "released_at": released_at, "ended_at": time.time(),
            "harness_error": error, "job_ended": self.ended_at,
            "agents": [a.record() for a in job.finished],
            "samples": job.samples, "steps": job.steps(), "started": job.started(),
            "leftovers": leftovers,
            "config": {"hosts": len(self.hosts.addresses), "nproc": harness.NPROC,
                       "heartbeat_timeout": harness.HEARTBEAT_TIMEOUT,
                       "ckpt_every": harness.CKPT_EVERY, "max_restarts": harness.MAX_RESTARTS}}
        with open(os.path.join(workdir, "history.json"), "w") as f:
            json.dump(history, f)
        return history

    def episode(self, fault):
        job = self.job
        self.wait(lambda: False, fault.lead, None)  # full-size training for `lead` s
        entry = fault.as_dict()
        entry["inject"] = time.time()
        self.active = set(fault.hosts) if fault.kind in schedules.DISRUPTIVE else set()
        if fault.background is not None:
            self.inject(fault.background)
        entry["effect"] = self.inject(fault)
        self.wait(lambda: False, fault.hold, None)
        entry["heal"] = time.time()
        delayed = self.heal(fault)
        if fault.background is not None:
            delayed.update(self.heal(fault.background))
        if delayed:
            entry["delayer"] = {str(h): line for h, line in sorted(delayed.items())}
        self.active = set()
        for host in sorted(self.pending):
            self.restart(host)
        self.pending = set()
        entry["recovered"] = self.wait_full_size(entry["heal"], RECOVERY_WAIT)
        entry["steps_at_heal"] = max([s["step"] for s in job.steps()] or [-1])
        return entry

    def inject(self, fault):
        job, host = self.job, fault.hosts[0]
        if fault.kind == "partition":
            self.network.cut(host, inbound=True, outbound=True)
        elif fault.kind == "oneway-in":
            self.network.cut(host, inbound=True, outbound=False)
        elif fault.kind == "oneway-out":
            self.network.cut(host, inbound=False, outbound=True)
        elif fault.kind == "pause":
            return {"agent": job.signal_agent(host, harness.signal.SIGSTOP)}
        elif fault.kind == "kill-agent":
            job.kill_host(host)
        elif fault.kind == "etcd-pause":
            leader = job.etcd.is_leader(host)  # the checker's etcd-minority reads it
            job.etcd.signal(host, harness.signal.SIGSTOP)
            return {"leader": leader}
        elif fault.kind == "kill-worker":
            return {"killed": job.kill_worker(host)}
        elif fault.kind == "loss":
            for h in fault.hosts:
                self.network.lose(h, fault.percent)
        elif fault.kind == "delay":
            for h in fault.hosts:
                self.network.delay(h, fault.ms, fault.jitter)
        return {}

    def heal(self, fault):
        """Heals `fault`; {host: delayer summary line} of the hosts it delayed."""
        delayed = {}
        if fault.kind == "pause":
            self.job.signal_agent(fault.hosts[0], harness.signal.SIGCONT)
        elif fault.kind == "etcd-pause":
            self.job.etcd.signal(fault.hosts[0], harness.signal.SIGCONT)
        elif fault.kind not in ("kill-agent", "kill-worker"):
            for h in fault.hosts:
                delayed.update(self.network.heal(h))
        return delayed

    def heal_everything(self):
        for host in range(len(self.hosts.addresses)):
            try:
                self.network.heal(host)
            except (RuntimeError, subprocess.SubprocessError) as e:
                print("chaos: healing host %d: %s" % (host, e), file=sys.stderr)
            self.job.signal_agent(host, harness.signal.SIGCONT)

    # -- supervising ---------------------------------------------------------------------------

    def supervise(self, restart=True):
        for agent in self.job.reap():
            if not restart or self.released:
                continue
            if any(harness.CLOSED in line for line in agent.record()["errors"]):
                self.closed_hosts.add(agent.host)  # the job is over there: no restart helps
            elif agent.host in self.active:
                self.pending.add(agent.host)  # restarted once the fault is healed
            else:
                self.restart(agent.host)
        job = self.job
        gone = {h for h, n in job.restarts.items() if h in self.closed_hosts or
                (n >= harness.AGENT_RESTARTS_PER_HOST and h not in job.agents)}
        if self.ended_at is None and not self.released and \
                len(gone) > len(self.hosts.addresses) - harness.MIN_NODES:
            # Too few hosts can ever come back for a round: the job ended. The operator cancels
            # what is left (an agent waiting alone for join_timeout): SIGTERM, exit 143.
            self.ended_at = time.time()
            for agent in job.agents.values():
                lib.kill_quietly(agent.proc.pid, signal.SIGTERM)

    def restart(self, host):
        job = self.job
        if host in job.agents or job.restarts[host] >= harness.AGENT_RESTARTS_PER_HOST:
            return
        job.restarts[host] += 1
        job.start_agent(host)

    def wait(self, condition, timeout, what, restart=True):
        """Supervises until condition() holds (True) or `timeout` s pass (False; an
        AssertionError naming `what` when given)."""
        deadline = time.monotonic() + timeout
        while True:
            self.supervise(restart)
            if condition():
                return True
            if time.monotonic() >= deadline:
                if what is not None:
                    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
                return False
            time.sleep(TICK)

    def wait_full_size(self, since, timeout):
        """Wall-clock time of the first step at full world size after `since`, or None."""
        full = len(self.hosts.addresses) * harness.NPROC
        found = []

        def trained():
            if self.ended_at is not None:
                return True
            for entry in self.job.steps():
                if entry["world_size"] == full and entry["t"] > since:
                    found.append(entry["t"])
                    return True
            return False
        self.wait(trained, timeout, None)
        return found[0] if found else None  # None also when the job ended

    def release(self):
        """Lets the workers finish 5 steps after the latest one."""
        target = max([s["step"] for s in self.job.steps()] or [0]) + 5
        path = os.path.join(self.job.job_dir, "release")
        with open(path + ".tmp", "w") as f:
            json.dump({"steps": target}, f)
        os.replace(path + ".tmp", path)
        self.released = True
        return time.time()


def _describe_pids(pids):
    described = []
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            cmd = "?"
        described.append({"pid": pid, "state": lib.proc_state(pid), "cmd": cmd})
    return described


def _safe(text):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(text))


def kind_list(text):
    """The fault kinds of "KIND,KIND,..." (empty text: none)."""
    return tuple(k for k in text.split(",") if k)


def read_regressions(path):
    """(seed, index, why, without) per non-comment line "SEED INDEX [without=KIND,...]  # why"
    of the regression file: `without` names the kinds the generator did not have when the
    schedule was found (a schedule is drawn from the kinds there are), so it replays as found."""
    found = []
    for line in open(path):
        body, _, why = line.partition("#")
        fields = body.split()
        if len(fields) in (2, 3):
            without = ()
            if len(fields) == 3:
                if not fields[2].startswith("without="):
                    raise ValueError("%s: %r: the third field is without=KIND,..." % (path, line))
                without = kind_list(fields[2][len("without="):])
            found.append((fields[0], int(fields[1]), why.strip(), without))
    return found


def check_recorded(paths):
    """Checks history.json files again (after a change to the checker); the agents' error lines
    are read again from the stderr files beside each history."""
    count = 0
    for path in paths:
        with open(path) as f:
            history = json.load(f)
        for agent in history["agents"]:
            err = os.path.join(os.path.dirname(path), "agent_h%d_%d.err" % (
                agent["host"], agent["incarnation"]))
            if os.path.exists(err):
                lines = lib.read_file(err).splitlines()
                agent["errors"] = [ln for ln in lines if harness.is_error(ln)]
                agent["foreign"] = [ln for ln in lines if not harness.is_launcher(ln)][:12]
        found = checker.check(history)
        print("chaos: %s: %s; %d violations" % (path, checker.summary(history), len(found)))
        for violation in found:
            print(violation.report(history["seed"], history["index"],
                                   history.get("without", ())))
        count += len(found)
    return 1 if count else 0


def skip_reason(python):
    if os.geteuid() != 0 or not lib.can_create_netns():
        return "needs root and `ip netns`"
    if shutil.which("iptables") is None:
        return "needs iptables (scripts/install-deps.sh installs it)"
    if not os.access(harness.ETCD, os.X_OK):
        return "needs %s (etcd-server; scripts/install-deps.sh installs it)" % harness.ETCD
    if not os.access(lib.DDPRUN, os.X_OK):
        return "%s is missing: build it first" % lib.DDPRUN
    probe = subprocess.run([python, "-c", "import torch.distributed"], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=120)
    if probe.returncode != 0:
        return "%s cannot import torch" % python
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", default="1")
    parser.add_argument("--schedules", type=int, default=10)
    parser.add_argument("--first", type=int, default=0, help="index of the first schedule")
    parser.add_argument("--episodes", type=int, default=None, help="faults per schedule")
    parser.add_argument("--backend", choices=schedules.BACKENDS,
                        help="every schedule on this backend (default: the schedule's own)")
    parser.add_argument("--without", metavar="KIND,...",
                        help="draw the schedules without these fault kinds (replays a schedule "
                             "found before a kind existed)")
    parser.add_argument("--regressions", help="also run the (seed, index) pairs in this file")
    parser.add_argument("--out", help="keep the histories here (default: a temp dir)")
    parser.add_argument("--python", default=lib.SYSTEM_PYTHON)
    parser.add_argument("--check", nargs="+", metavar="HISTORY",
                        help="only check recorded history.json files (no faults run)")
    args = parser.parse_args()

    if args.check:
        return check_recorded(args.check)
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C: every finally heals, kills and removes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    reason = skip_reason(args.python)
    if reason:
        print("chaos: skipped: %s" % reason)
        return 77
    without = kind_list(args.without or "")
    unknown = [k for k in without if k not in schedules.KINDS]
    if unknown:
        print("chaos: --without %s: no such fault kind (kinds: %s)" % (
            ",".join(unknown), ", ".join(schedules.KINDS)), file=sys.stderr)
        return 2
    runs = [(args.seed, i, "", without) for i in range(args.first, args.first + args.schedules)]
    if args.regressions:  # those not in the range already
        runs += [r for r in read_regressions(args.regressions)
                 if not (r[0] == args.seed and r[3] == without and
                         args.first <= r[1] < args.first + args.schedules)]
    out = args.out or tempfile.mkdtemp(prefix="ddprun-chaos-")
    os.makedirs(out, exist_ok=True)
    hosts = lib.NetnsHosts(schedules.HOSTS)
    totals, backends, violations, start = {}, {}, [], time.monotonic()
    try:
        hosts.create()
        runner = Runner(hosts, harness.Network(hosts), args.python, out)
        for seed, index, why, skipped in runs:
            kinds = tuple(k for k in schedules.KINDS if k not in skipped)
            backend, faults = schedules.schedule(seed, index, args.episodes,
                                                 harness.HEARTBEAT_TIMEOUT, kinds, args.backend)
            print("chaos: seed %s schedule %d%s%s, %s: %s" % (
                seed, index, " without %s" % ",".join(skipped) if skipped else "",
                " (regression: %s)" % why if why else "", backend,
                "; ".join(f.describe() for f in faults)), flush=True)
            began = time.monotonic()
            history = runner.run(seed, index, backend, faults, skipped)
            backends[backend] = backends.get(backend, 0) + 1
            found = checker.check(history)
            for fault in faults:
                for kind in [fault.kind] + ([fault.background.kind] if fault.background else []):
                    totals[kind] = totals.get(kind, 0) + 1
            print("chaos:   %.1f s; %s" % (time.monotonic() - began, checker.summary(history)),
                  flush=True)
            for violation in found:
                print(violation.report(seed, index, skipped), flush=True)
            violations += found
    finally:
        hosts.remove()
    print("chaos: %d schedules (%s) in %.0f s; faults injected: %s; violations: %d" % (
        len(runs), ", ".join("%s %d" % kv for kv in sorted(backends.items())),
        time.monotonic() - start,
        ", ".join("%s %d" % kv for kv in sorted(totals.items())) or "none", len(violations)))
    if violations:
        print("chaos: histories kept in %s" % out)
        return 1
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
