#!/usr/bin/env python3
"""Store host lost mid-run: torchrun 2.x against ddprun's store failover, side by side.

The scenario of tests/interop/test_failover_netns.py's test_a, run once per launcher (torchrun
first, then ddprun) on three simulated hosts: network namespaces with one veth each into a Linux
bridge (NetnsHosts of tests/integration/ddprun_testlib.py, 10.213.8.0/24). Each host runs one
agent with 2 workers of tests/interop/train_elastic.py (real PyTorch gloo training on CPU,
checkpoints every 5 steps, resume from the latest one, rank 0 logs each step with its world size
to steps.log), GLOO_SOCKET_IFNAME set to the host's veth. Both launchers run the workers with the
same interpreter (the torch 2.x venv's python: torchrun is `<venv python> -m
torch.distributed.run`, ddprun gets it as --python). Host 0's agent serves the rendezvous store;
hosts 1 and 2 start once it listens. Once the group has trained at world size 6 up to step 12,
host 0's agent and its workers are SIGKILLed (agent first). Then the bench waits at most --bound
seconds (120) for a step at world size 4, or for both survivors to exit, then (if they
resumed) for them to finish the job; whatever still runs at the end of the bound is reported and
SIGKILLed.

Every agent, each:
  --nnodes=2:3 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_id=<id> --max_restarts=3
  --monitor_interval=0.1 --local_addr=<its address>
  --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=2,join_timeout=60
  torchrun: --rdzv_endpoint=10.213.8.1:29500 (its only form), and is_host=true in host 0's
            rdzv_conf: torchrun decides who serves the store by comparing the endpoint with the
            machine's host name and its addresses, and the namespaces share the host name, so
            without it no agent would serve;
  ddprun:   --rdzv_endpoint=10.213.8.1:29500,10.213.8.2:29500,10.213.8.3:29500 (the failover
            list) and --event_log (read back for the store's new address).

Printed per launcher: whether the survivors resumed training at world size 4, kill -> first
step at world size 4 (split into kill -> the new workers spawned and their own start-up, from
train_elastic.py's started_<pid> records), the survivors' exit codes (and kill -> exit), the
processes left behind on any host a few seconds after the survivors exited (or at the end of the
bound), and each survivor's last stderr line (ddprun: also its own last line, its events after
the kill, the store's new address and the new round's master). Printed, never asserted: the script exits non-zero only when a
launch itself goes wrong (no world-size-6 training to kill into) or when ddprun does not resume,
does not exit 0 or leaves a process. Without root or `ip netns` it prints "skipped" and exits 0.

Usage (as root):
  DDPRUN_BUILD_DIR=build /usr/bin/python3 bench/failover_bench.py
  ... bench/failover_bench.py --only torchrun          # or --only ddprun
  ... bench/failover_bench.py --bound 60 --keep --json out.json
The torch 2.x interpreter: --torch2-python, else $DDPRUN_TORCH2_PYTHON, else the path in
$DDPRUN_BUILD_DIR/torch2-python, else `make torch2-venv` is run (as bench/elastic_bench.py does).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import elastic_bench as eb  # noqa: E402  (torch 2.x venv lookup, process helpers)
import ddprun_testlib as lib  # noqa: E402  (NetnsHosts)

TRAIN = str(REPO / "tests" / "interop" / "train_elastic.py")
MARKER_VAR = eb.MARKER_VAR
HOST_VAR = "DDPRUN_TEST_HOST"  # the simulated host of a process (train_elastic.py records it)
LAUNCHERS = ("torchrun", "ddprun")  # run in this order
HOSTS = 3
NPROC = 2
RDZV_PORT = 29500
KEEP_ALIVE_INTERVAL = 1
KEEP_ALIVE_MAX_ATTEMPT = 3
RDZV_CONF = ("keep_alive_interval=%d,keep_alive_max_attempt=%d,last_call_timeout=2,"
             "join_timeout=60" % (KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT))
CKPT_EVERY = 5
KILL_AT = 2 * CKPT_EVERY + 2
STEP_SLEEP = 0.2
START_BOUND = 240  # start -> world-size-6 training at step KILL_AT (9 torch imports, 2 cores)
FINISH_BOUND = 180  # resumed -> the survivors finish the job
GRACE = 5.0  # survivors exited -> look for leftovers


def parse_args() -> argparse.Namespace:
    build_dir = Path(os.environ.get("DDPRUN_BUILD_DIR", REPO / "build")).resolve()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ddprun", default=str(build_dir / "launcher" / "ddprun"),
                   help="ddprun binary (default: launcher/ddprun in $DDPRUN_BUILD_DIR or build/)")
    p.add_argument("--torch2-python", help="interpreter of the torch 2.x venv (see the docstring)")
    p.add_argument("--only", choices=LAUNCHERS, help="run one launcher only")
    p.add_argument("--steps", type=int, default=60, help="training steps of the job (default 60)")
    p.add_argument("--bound", type=float, default=120.0,
                   help="seconds to wait after the kill for a step at world size 4 or the "
                        "survivors' exit (default 120)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory (agent logs, steps.log); print its path")
    args = p.parse_args()
    args.build_dir = build_dir
    return args


class BenchError(Exception):
    pass


def read_jsonl(path: str) -> list[dict]:
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def last_line(path: str) -> str:
    lines = eb.tail(path, 1)
    return lines[0] if lines else "(empty)"


def last_launcher_line(path: str) -> str:
    """The launcher's own last line (ddprun's start with "[ddprun]" or "ddprun:")."""
    lines = [ln for ln in eb.tail(path, 400) if ln.startswith(("[ddprun]", "ddprun:"))]
    return lines[-1] if lines else "(none)"


def startup(records: list[dict]) -> float | None:
    """The script's own start-up (spawn -> first step), worst worker of `records`."""
    times = [r["first_step"] - r["spawn"] for r in records if "first_step" in r]
    return max(times) if times else None


def listening(pid: int, port: int) -> bool:
    """A LISTEN socket on `port` in pid's network namespace."""
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, StopIteration):
            continue
    return False


def describe_pid(pid: int) -> str:
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        host = env.get(HOST_VAR.encode(), b"?").decode()
        rank = env.get(b"RANK")
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "pid %d (gone)" % pid
    kind = "worker rank %s" % rank.decode() if rank is not None else "agent"
    return "pid %d host %s %s (%s)" % (pid, host, kind, os.path.basename(argv[0].decode(
        errors="replace")) if argv else "?")


class Run:
    """One launcher's run of the scenario: its hosts, agents, files."""

    def __init__(self, bench: "Bench", launcher: str):
        self.bench = bench
        self.launcher = launcher
        self.dir = os.path.join(bench.tmp, launcher)
        os.mkdir(self.dir)
        self.job = os.path.join(self.dir, "job")
        os.mkdir(self.job)
        self.steps_log = os.path.join(self.job, "steps.log")
        self.marker = uuid.uuid4().hex
        self.rdzv_id = "failover-bench-%s" % self.marker[:8]
        self.hosts = lib.NetnsHosts(HOSTS)
        self.agents: dict[int, subprocess.Popen] = {}

    def argv(self, host: int) -> list[str]:
        addresses = self.hosts.addresses
        common = ["--nnodes=2:3", "--nproc_per_node=%d" % NPROC, "--rdzv_backend=c10d",
                  "--rdzv_id=%s" % self.rdzv_id, "--max_restarts=3", "--monitor_interval=0.1",
                  "--local_addr=%s" % addresses[host]]
        script = [TRAIN, self.job, "--steps", str(self.bench.args.steps), "--ckpt-every",
                  str(CKPT_EVERY), "--sleep", str(STEP_SLEEP)]
        if self.launcher == "torchrun":
            conf = RDZV_CONF + (",is_host=true" if host == 0 else "")
            return [self.bench.python, "-m", "torch.distributed.run", *common,
                    "--rdzv_endpoint=%s:%d" % (addresses[0], RDZV_PORT),
                    "--rdzv_conf=%s" % conf, *script]
        endpoints = ",".join("%s:%d" % (a, RDZV_PORT) for a in addresses)
        return [self.bench.args.ddprun, *common, "--rdzv_endpoint=%s" % endpoints,
                "--rdzv_conf=%s" % RDZV_CONF, "--event_log=%s" % self.event_log(host),
                "--python", self.bench.python, *script]

    def event_log(self, host: int) -> str:
        return os.path.join(self.dir, "events%d.jsonl" % host)

    def err(self, host: int) -> str:
        return os.path.join(self.dir, "agent%d.err" % host)

    def start(self, host: int) -> subprocess.Popen:
        env = dict(self.bench.env)
        env.update({MARKER_VAR: self.marker, HOST_VAR: str(host),
                    "GLOO_SOCKET_IFNAME": self.hosts.devices[host]})
        argv = self.hosts.exec_prefix(host) + self.argv(host)
        with open(os.path.join(self.dir, "agent%d.out" % host), "wb") as out, \
                open(self.err(host), "wb") as err:
            try:
                proc = subprocess.Popen(argv, env=env, cwd=self.dir, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, start_new_session=True)
            except OSError as e:
                raise BenchError("cannot start %s: %s" % (argv, e)) from e
        self.agents[host] = proc
        return proc

    def steps(self) -> list[dict]:
        return read_jsonl(self.steps_log)

    def records(self) -> list[dict]:
        """train_elastic.py's started_<pid> records (spawn, first_step, group, host)."""
        out = []
        for path in glob.glob(os.path.join(self.job, "started_*")):
            if ".tmp." not in path:
                try:
                    out.append(json.loads(Path(path).read_text()))
                except (OSError, ValueError):
                    pass
        return out

    def pids_of_host(self, host: int) -> list[int]:
        return [p for p in eb.pids_with(HOST_VAR, str(host))
                if p in eb.pids_with(MARKER_VAR, self.marker)]

    def alive_pids(self) -> list[int]:
        return [p for p in eb.pids_with(MARKER_VAR, self.marker) if eb.alive(p)]

    def agent_tails(self, n: int = 12) -> str:
        return "\n".join("  agent of host %d (exit %s):\n    %s" % (
            h, p.poll(), "\n    ".join(eb.tail(self.err(h), n))) for h, p in self.agents.items())

    def cleanup(self) -> None:
        for proc in self.agents.values():
            if proc.poll() is None:
                eb.kill_pids([proc.pid])
        for _ in range(5):
            pids = eb.pids_with(MARKER_VAR, self.marker)
            if not pids:
                break
            eb.kill_pids(pids)
            time.sleep(0.05)
        for proc in self.agents.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        eb.wait_for(lambda: not self.alive_pids(), 10, 0.05)
        self.hosts.remove()

    # -- the scenario ------------------------------------------------------------------------

    def run(self) -> dict:
        args = self.bench.args
        result: dict = {"launcher": self.launcher}
        self.hosts.create()
        t0 = time.time()
        host0 = self.start(0)
        if not eb.wait_for(lambda: listening(host0.pid, RDZV_PORT) or host0.poll() is not None,
                           120, 0.02) or host0.poll() is not None:
            raise BenchError("host 0's agent did not serve port %d within 120 s (exit %s)\n%s" % (
                RDZV_PORT, host0.poll(), self.agent_tails()))
        for host in (1, 2):
            self.start(host)

        def six():
            if any(p.poll() is not None for p in self.agents.values()):
                raise BenchError("an agent exited before step %d at world size 6\n%s" % (
                    KILL_AT, self.agent_tails()))
            return next((e for e in self.steps()
                         if e["world_size"] == 6 and e["step"] >= KILL_AT), None)
        before = eb.wait_for(six, START_BOUND, 0.05)
        if not before:
            raise BenchError("no step %d at world size 6 within %d s (steps: %s)\n%s" % (
                KILL_AT, START_BOUND, [(e["step"], e["world_size"]) for e in self.steps()][-5:],
                self.agent_tails()))
        result["start_to_step"] = before["t"] - t0

        victims = self.pids_of_host(0)
        result["killed"] = [describe_pid(p) for p in victims]
        killed_at = time.time()
        eb.kill_pids([host0.pid])  # the agent first, so that it cannot react; then its workers
        eb.kill_pids(victims)
        survivors = [self.agents[1], self.agents[2]]
        exited_at: dict[int, float] = {}

        def note_exits():
            for host in (1, 2):
                if host not in exited_at and self.agents[host].poll() is not None:
                    exited_at[host] = time.time()

        def resumed_or_exited():
            note_exits()
            four = next((e for e in self.steps()
                         if e["world_size"] == 4 and e["t"] > killed_at), None)
            if four:
                return four
            return "exited" if len(exited_at) == 2 else None
        got = eb.wait_for(resumed_or_exited, args.bound, 0.05)
        if isinstance(got, dict):
            result.update(resumed=True, resume_s=got["t"] - killed_at, resume_step=got["step"],
                          group=got["group"])
            eb.wait_for(lambda: (note_exits(), len(exited_at) == 2)[1], FINISH_BOUND, 0.05)
        else:
            result.update(resumed=False, why="both survivors exited" if got == "exited" else
                          "neither resumed nor exited within %.0f s" % args.bound)
        note_exits()
        result["still_running"] = [h for h in (1, 2) if h not in exited_at]
        if len(exited_at) == 2:
            time.sleep(GRACE)  # stragglers: let the launchers' own cleanup finish
        left = self.alive_pids()
        result["leftovers"] = [describe_pid(p) for p in left]
        result["exit"] = {h: self.agents[h].poll() for h in (1, 2)}
        result["exit_s"] = {h: exited_at[h] - killed_at for h in exited_at}
        result["last_stderr"] = {h: last_line(self.err(h)) for h in (1, 2)}
        result["stderr_tail"] = {h: eb.tail(self.err(h), 40) for h in (1, 2)}
        steps = self.steps()
        result["steps_done"] = max((e["step"] for e in steps), default=-1) + 1
        result["world_sizes"] = sorted({e["world_size"] for e in steps})
        result["restart_counts"] = sorted({e["restart_count"] for e in steps})
        records = self.records()
        first = [r for r in records if r["group"] == before["group"]]
        result["startup_first"] = startup(first)
        if result["resumed"]:
            new = [r for r in records if r["group"] == result["group"]]
            result["respawn_s"] = min(r["spawn"] for r in new) - killed_at if new else None
            result["startup_new"] = startup(new)
            result["new_hosts"] = sorted(str(r.get("host")) for r in new)
        result["last_launcher_line"] = {h: last_launcher_line(self.err(h)) for h in (1, 2)}
        if self.launcher == "ddprun":
            moved = {}
            for host in (1, 2):
                events = [e for e in read_jsonl(self.event_log(host))
                          if e.get("time", 0) >= killed_at]
                names = [e.get("event") for e in events]
                entry = {"events": names}
                for e in events:
                    if e.get("event") == "store_moved" and "store_moved" not in entry:
                        entry["store_moved"] = {k: e.get(k) for k in
                                                ("address", "epoch", "basis", "serving")}
                        entry["store_moved_s"] = e["time"] - killed_at
                    if e.get("event") == "round_formed" and "store_moved" in entry \
                            and "master" not in entry:
                        entry["master"] = e.get("master")
                moved[host] = entry
            result["events"] = moved
        return result


class Bench:
    def __init__(self, args: argparse.Namespace, python: str):
        self.args = args
        self.python = python
        self.tmp = tempfile.mkdtemp(prefix="failover_bench_")
        self.env = eb.clean_env()
        self.env.pop("GLOO_SOCKET_IFNAME", None)
        # torchrun leaves torchelastic_* directories in $TMPDIR: a private one, removed at the end.
        self.env["TMPDIR"] = os.path.join(self.tmp, "tmpdir")
        os.mkdir(self.env["TMPDIR"])

    def run(self, launcher: str) -> dict:
        run = Run(self, launcher)
        try:
            return run.run()
        except BenchError as e:
            return {"launcher": launcher, "error": str(e)}
        finally:
            run.cleanup()


def yes_no(flag) -> str:
    return "-" if flag is None else "yes" if flag else "no"


def report(results: dict[str, dict], args: argparse.Namespace) -> None:
    cols = [l for l in LAUNCHERS if l in results]
    rows = []

    def row(label, fn):
        rows.append((label, [fn(results[l]) if "error" not in results[l] else "(error)"
                             for l in cols]))
    row("survivors resumed at world size 4", lambda r: yes_no(r.get("resumed")))
    row("kill -> first step at world size 4",
        lambda r: "%.2f s" % r["resume_s"] if r.get("resumed") else
        "none within %.0f s" % args.bound if r.get("still_running") else "none (%s)" % r["why"])
    row("kill -> new workers spawned",
        lambda r: "%.2f s" % r["respawn_s"] if r.get("respawn_s") is not None else "-")
    row("their start-up (spawn -> first step)",
        lambda r: "%.2f s (first group %.2f s)" % (r["startup_new"], r["startup_first"])
        if r.get("startup_new") is not None else "- (first group %s)" % (
            "%.2f s" % r["startup_first"] if r.get("startup_first") is not None else "-"))
    row("survivors' exit codes (host 1, host 2)",
        lambda r: ", ".join("still running" if r["exit"][h] is None else str(r["exit"][h])
                            for h in (1, 2)))
    row("kill -> survivors exited",
        lambda r: ", ".join("%.1f s" % r["exit_s"][h] if h in r["exit_s"] else "-"
                            for h in (1, 2)))
    row("processes left behind",
        lambda r: "n/a (%d running at the bound)" % len(r["leftovers"]) if r["still_running"]
        else str(len(r["leftovers"])) if r["leftovers"] else "none")
    row("steps done / world sizes logged",
        lambda r: "%d of %d / %s" % (r["steps_done"], args.steps, r["world_sizes"]))
    row("restart counts logged", lambda r: str(r["restart_counts"]))
    width = max(len(label) for label, _ in rows)
    print("  %-*s  %s" % (width, "", "".join("%-30s" % c for c in cols)))
    for label, values in rows:
        print("  %-*s  %s" % (width, label, "".join("%-30s" % v for v in values)))
    for launcher in cols:
        r = results[launcher]
        print("\n  %s:" % launcher)
        if "error" in r:
            print("    error: " + r["error"].replace("\n", "\n    "))
            continue
        for h in (1, 2):
            print("    host %d's last stderr line: %s" % (h, r["last_stderr"][h][:300]))
            if launcher == "ddprun":
                print("    host %d's last ddprun line: %s" % (h, r["last_launcher_line"][h][:300]))
        for p in r["leftovers"]:
            print("    %s: %s" % ("running at the bound" if r["still_running"] else
                                  "left behind", p))
        if "events" in r:
            for h, e in sorted(r["events"].items()):
                print("    host %d's events after the kill: %s; store_moved %s%s; new round's "
                      "master %s" % (h, " ".join(map(str, e["events"])), e.get("store_moved"),
                                     " (%.2f s after the kill)" % e["store_moved_s"]
                                     if "store_moved_s" in e else "", e.get("master")))


def main() -> int:
    args = parse_args()
    if not lib.can_create_netns():
        print("failover_bench: skipped (needs root and `ip netns`)")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still clean up (finally below)
    launchers = [args.only] if args.only else list(LAUNCHERS)
    if "ddprun" in launchers and not os.access(args.ddprun, os.X_OK):
        sys.exit("failover_bench: ddprun not found: %s (build it: make build)" % args.ddprun)
    python = eb.find_torch2_python(args)
    version = eb.torch_version(python)
    bench = Bench(args, python)
    results: dict[str, dict] = {}
    errors: list[str] = []
    try:
        load = os.getloadavg()
        print("failover_bench: store host SIGKILLed mid-run, torchrun vs ddprun (torch %s)" %
              version)
        print("  machine: %s, %d CPUs, Linux %s, load avg %.2f %.2f %.2f" % (
            platform.node(), os.cpu_count(), platform.release(), *load))
        print("  3 netns hosts x %d workers of train_elastic.py (gloo), %d steps; host 0 (the "
              "store host) killed at step %d at world size 6; bound after the kill %.0f s" % (
                  NPROC, args.steps, KILL_AT, args.bound))
        print("  rdzv_conf: %s (torchrun's host 0: plus is_host=true)" % RDZV_CONF, flush=True)
        for launcher in launchers:
            t = time.monotonic()
            r = bench.run(launcher)
            results[launcher] = r
            if "error" in r:
                errors.append("%s: %s" % (launcher, r["error"].splitlines()[0]))
                print("  %-8s error: %s" % (launcher, r["error"].splitlines()[0]), flush=True)
                continue
            print("  %-8s resumed at world size 4: %s%s; survivors exit %s; left behind %d "
                  "(run %.0f s)" % (
                      launcher, yes_no(r["resumed"]),
                      " after %.2f s" % r["resume_s"] if r["resumed"] else " (%s)" % r["why"],
                      [r["exit"][h] for h in (1, 2)], len(r["leftovers"]),
                      time.monotonic() - t), flush=True)
            if launcher == "ddprun":
                if not r["resumed"]:
                    errors.append("ddprun did not resume: %s" % r["why"])
                if [r["exit"][h] for h in (1, 2)] != [0, 0]:
                    errors.append("ddprun's survivors exited %s" % [r["exit"][h] for h in (1, 2)])
                if r["leftovers"]:
                    errors.append("ddprun left %d process(es) behind" % len(r["leftovers"]))
    finally:
        if args.keep:
            print("failover_bench: logs kept in %s" % bench.tmp)
        else:
            shutil.rmtree(bench.tmp, ignore_errors=True)
    print()
    report(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": version, "results": results},
                                              indent=2, default=str) + "\n")
    if errors:
        print()
        for e in errors:
            print("failover_bench: " + e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
