"""Seeded fault schedules for the chaos harness (pure: no I/O, no clock).

A schedule is a list of Fault episodes run one after the other on HOSTS simulated hosts (host 0
is the first rendezvous endpoint, where the store starts). Each episode starts once the job
trains at full size (plus `lead` seconds), holds for `hold` seconds, and is healed before the
next one starts. Background network trouble (loss, delay) may be laid under an episode of
another kind: Fault.background.

Kinds (what the harness does; docs/reliability.md, "Network faults"):
  partition     cut `hosts` from the others, both ways (iptables DROP in the hosts' namespaces)
  oneway-in     `hosts` drop what the others send them; what they send still leaves
  oneway-out    `hosts` drop what they send the others; what the others send still arrives
  pause         SIGSTOP the agent of `hosts[0]` (its workers run on) for `hold` s, then SIGCONT
  kill-agent    SIGKILL the agent and workers of `hosts[0]` (a lost machine); restarted at heal
  kill-worker   SIGKILL one worker of `hosts[0]` (spends one restart)
  loss          `percent` % packet loss on the hosts' links (iptables statistic match)
  delay         `ms` +- `jitter` ms on each packet in and out of the hosts' links (NFQUEUE and
                delayer.py: netem's delay, from userspace)
  etcd-pause    SIGSTOP the etcd member of `hosts[0]` for `hold` s (etcd backend only)

The backend is part of the schedule: c10d (the store in an agent, moved on its loss) in 3 of 5
schedules, etcd (a 3-member cluster, one member per host) in the others.

schedule(seed, index) is the same (backend, faults) for the same (seed, index) and `kinds`: a
seed and an index replay a schedule. Adding a kind changes what a seed draws; a schedule found
before is replayed with the kinds of its time (chaos.py --without, regressions.txt).
"""
import random

HOSTS = 3
KINDS = ("partition", "oneway-in", "oneway-out", "pause", "kill-agent", "kill-worker", "loss",
         "delay", "etcd-pause")
BACKENDS = ("c10d", "etcd")
# Kinds that take a node out of the group (the rest only slow it down).
DISRUPTIVE = ("partition", "oneway-in", "oneway-out", "pause", "kill-agent")


class Fault:
    """One episode. `hosts`: the hosts it hits (a cut's smaller side for a partition). `hold`:
    seconds between injection and heal. `lead`: seconds of full-size training before it.
    `background`: an optional loss/delay Fault on all hosts for the same window."""

    def __init__(self, kind, hosts, hold, lead, percent=0, ms=0, jitter=0, background=None):
        self.kind, self.hosts, self.hold, self.lead = kind, tuple(hosts), hold, lead
        self.percent, self.ms, self.jitter, self.background = percent, ms, jitter, background

    def describe(self):
        what = {"loss": " %d%%" % self.percent,
                "delay": " %d+-%d ms" % (self.ms, self.jitter)}.get(self.kind, "")
        text = "%s%s of host%s %s for %.1f s (after %.1f s at full size)" % (
            self.kind, what, "s" if len(self.hosts) > 1 else "",
            ",".join(map(str, self.hosts)), self.hold, self.lead)
        if self.background is not None:
            text += ", under " + self.background.describe_short()
        return text

    def describe_short(self):
        return {"loss": "%d%% loss" % self.percent,
                "delay": "%d+-%d ms delay" % (self.ms, self.jitter)}[self.kind]

    def as_dict(self):
        data = {"kind": self.kind, "hosts": list(self.hosts), "hold": self.hold,
                "lead": self.lead}
        if self.kind == "loss":
            data["percent"] = self.percent
        if self.kind == "delay":
            data.update(ms=self.ms, jitter=self.jitter)
        if self.background is not None:
            data["background"] = self.background.as_dict()
        return data


def _network(rng, kind, hosts, hold, lead):
    if kind == "loss":
        return Fault(kind, hosts, hold, lead, percent=rng.choice((2, 5, 10, 20)))
    return Fault(kind, hosts, hold, lead, ms=rng.choice((20, 50, 150)),
                 jitter=rng.choice((0, 10, 40)))


def schedule(seed, index, episodes=None, heartbeat_timeout=3.0, kinds=KINDS, backend=None):
    """(backend, faults) of schedule `index` of `seed`: 1 or 2 episodes (or `episodes`) of
    `kinds` (the same seed gives the same list for the same kinds), on `backend` if given. A
    disruptive fault holds past the heartbeat timeout (so that it is declared lost) in most
    episodes and below it in some (a blip that must cost nothing)."""
    rng = random.Random("%s/%d" % (seed, index))
    backend = backend or ("etcd" if rng.random() < 0.4 else "c10d")
    count = episodes if episodes is not None else rng.choice((1, 2, 2))
    faults = []
    kinds = [k for k in kinds if backend == "etcd" or not k.startswith("etcd-")]
    for _ in range(count):
        kind = rng.choice(kinds)
        lead = round(rng.uniform(0.5, 3.0), 1)
        if kind in ("partition", "oneway-in", "oneway-out"):
            # One host cut off: the store host (the minority holding the store), or another
            # (the majority holding the store); the other side is the rest.
            hosts = [rng.randrange(HOSTS)]
            hold = round(rng.uniform(heartbeat_timeout + 2, heartbeat_timeout + 8), 1)
            if rng.random() < 0.2:
                hold = round(rng.uniform(0.3, heartbeat_timeout * 0.5), 1)  # a blip
        elif kind in ("pause", "etcd-pause"):
            hosts = [rng.randrange(HOSTS)]
            hold = round(rng.uniform(heartbeat_timeout + 1, heartbeat_timeout + 6), 1)
            if rng.random() < 0.2:
                hold = round(rng.uniform(0.3, heartbeat_timeout * 0.5), 1)
        elif kind in ("kill-agent", "kill-worker"):
            hosts = [rng.randrange(HOSTS)]
            hold = round(rng.uniform(1.0, 6.0), 1)  # kill-agent: until the machine is back
        else:
            hosts = sorted(rng.sample(range(HOSTS), rng.choice((1, HOSTS))))
            hold = round(rng.uniform(3.0, 8.0), 1)
            faults.append(_network(rng, kind, hosts, hold, lead))
            continue
        fault = Fault(kind, hosts, hold, lead)
        if kind in DISRUPTIVE and rng.random() < 0.3:
            noise = rng.choice([k for k in ("loss", "delay") if k in kinds])
            fault.background = _network(rng, noise, range(HOSTS), hold, 0)
        faults.append(fault)
    return backend, faults
