#!/usr/bin/env python3
"""Elastic recovery: ddprun against current torchrun (torch 2.x), side by side in one run.

Benches (b) and (c) of issue 10, on loopback, each launcher with its own agents (one process per
simulated node) and the same stdlib worker script run by the same interpreter (the torch 2.x
venv's python: torchrun runs its workers with its own interpreter, ddprun gets it as --python),
so interpreter start-up weighs the same on both sides. Printed, never asserted: the script exits
non-zero only when a launch itself goes wrong (a launcher that cannot start, a job of (b) that
does not finish with exit 0, a process left behind).

(b) worker failure -> first worker of the new attempt running. Two agents, each:
      --nnodes=2:2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:<free port>
      --rdzv_id=bench --max_restarts=1 --monitor_interval=0.1 --rdzv_conf=last_call_timeout=1
    In the first attempt global rank 0 waits until all 4 workers have started, writes the time
    and exits 1; the other workers wait to be stopped. The workers of the next attempt write
    their start time and exit 0. Measured: rank 0's exit -> the earliest start of a worker of the
    new attempt (and -> the last of the 4).
    The attempt is told by a file ("failed"), not by TORCHELASTIC_RESTART_COUNT: torchrun counts
    restarts per agent, and the agent whose workers were healthy restarts for a membership change
    (num_nodes_waiting > 0) without spending one, so its new workers still see 0.

(c) non-host node SIGKILLed -> training resumed at the smaller size. Three agents, each:
      --nnodes=2:3 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:<free port>
      --rdzv_id=bench --max_restarts=3 --monitor_interval=0.1
      --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=1
    The first agent is started alone and serves the rendezvous store (for both launchers: the
    endpoint is local to all of them and the first one to bind the port hosts it; the others find
    it taken and become clients); the other two follow once the port listens. Workers record
    (start time, WORLD_SIZE, TORCHELASTIC_RESTART_COUNT) and run until a release file appears.
    Once the three workers of a world-size-3 round run (plus 1 s to settle, plus a fraction of
    keep_alive_interval that moves with the repetition: (rep + 0.5) / reps, so that the kill
    lands at different phases of the heartbeat period), the third agent and its worker are
    SIGKILLed (every process carrying its tag in the environment: torchrun's
    workers run in sessions of their own). Measured: the kill -> the earliest start of a worker
    with WORLD_SIZE 2, waited for at most --resize-bound seconds (120). torchrun's survivors only
    notice a lost node when their own workers fail (in real training: a collective timing out;
    num_nodes_waiting() ignores dead participants), so with healthy workers it may never resume:
    reported as "did not resume", with what its survivors were doing. Further torchrun
    repetitions of (c) are then skipped (they would only wait out the bound again) unless
    --all-reps.

torchrun's defaults that matter, and what this passes to both launchers:
  * --monitor_interval: 0.1 s in torchrun >= 2.4 (5 s before); passed explicitly.
  * last_call_timeout: 30 s by default (a first round waits that long after MIN nodes for more);
    1 s here. (b) closes its rounds at MAX nodes anyway.
  * keep_alive_interval 5 s x keep_alive_max_attempt 3 = 15 s before a silent node counts as
    dead; (c) passes 1 s x 3 to both. torchrun parses both as integers.
  * torchrun's rendezvous polls the shared state once a second while it waits (_delay(1) in
    its join loop), and its agents poll the workers every monitor_interval.
Repetitions are interleaved (ddprun, torchrun, ddprun, ...); median per launcher.

Usage:
  DDPRUN_BUILD_DIR=build /usr/bin/python3 bench/elastic_bench.py
  ... bench/elastic_bench.py --only b --reps-b 5 --json samples.json
  ... bench/elastic_bench.py --only c --launcher ddprun --reps-c 5 --keep   # logs kept
The torch 2.x interpreter: --torch2-python, else $DDPRUN_TORCH2_PYTHON, else the path in
$DDPRUN_BUILD_DIR/torch2-python, else `make torch2-venv` is run (pip, may take minutes) and that
file read again.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER_VAR = "DDPRUN_BENCH_MARKER"  # every process this bench starts carries it
AGENT_VAR = "ELASTIC_BENCH_AGENT"  # which agent a process belongs to (inherited by its workers)
LAUNCHERS = ("ddprun", "torchrun")
CONF_B = "last_call_timeout=1"
KEEP_ALIVE_INTERVAL = 1
KEEP_ALIVE_MAX_ATTEMPT = 3
CONF_C = "keep_alive_interval=%d,keep_alive_max_attempt=%d,last_call_timeout=1" % (
    KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT)
TARGET_B = 5.0  # issue 10: ddprun >= 5x faster than torchrun 2.x
# issue 10's acceptance bound for (c): keep_alive_interval x keep_alive_max_attempt + 2 s + the
# worker's own start-up (its spawn -> first line, measured here).
TARGET_C_SLACK = 2.0
WORKER_BOUND = 180  # no worker of this bench lives longer than this, whatever happens
SETTLE_C = 1.0

WORKER_PY = r'''
import glob, json, os, sys, time
T0 = time.monotonic()
mode, d = sys.argv[1], sys.argv[2]
env = os.environ
rec = {"t": T0, "pid": os.getpid(), "rank": int(env["RANK"]), "world": int(env["WORLD_SIZE"]),
       "restart": int(env.get("TORCHELASTIC_RESTART_COUNT", "-1")),
       "agent": env.get("%(agent)s", "")}

def write(name, obj):
    tmp = os.path.join(d, ".%%s.%%d" %% (name, os.getpid()))
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(d, name))

def wait_for(cond, bound):
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            sys.exit(4)
        time.sleep(0.005)

if mode == "fail":
    attempt = 1 if os.path.exists(os.path.join(d, "failed")) else 0
    rec["attempt"] = attempt
    write("start_a%%d_%%d.json" %% (attempt, os.getpid()), rec)
    if attempt:
        sys.exit(0)
    if rec["rank"] == 0:
        wait_for(lambda: len(glob.glob(os.path.join(d, "start_a0_*.json"))) >= rec["world"], 60)
        write("failed", {"t": time.monotonic(), "pid": os.getpid()})
        sys.exit(1)
    wait_for(lambda: False, %(bound)d)  # stopped by the agent long before
else:  # "resize"
    write("start_w%%d_%%d.json" %% (rec["world"], os.getpid()), rec)
    wait_for(lambda: os.path.exists(os.path.join(d, "release")), %(bound)d)
''' % {"agent": AGENT_VAR, "bound": WORKER_BOUND}


# Reads torch's c10d rendezvous state (one pickled blob under torch.rendezvous.<run id>) from its
# store: what torchrun's agents agree on when they do not resume. argv: port, run id, pid=name...
TORCH_STATE_PY = r'''
import base64, pickle, sys
from datetime import datetime, timedelta, timezone
import torch.distributed as dist
port, run_id, names = int(sys.argv[1]), sys.argv[2], dict(a.split("=") for a in sys.argv[3:])
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
st = pickle.loads(base64.b64decode(store.get("torch.rendezvous." + run_id)))
now = datetime.now(timezone.utc)
name = lambda n: names.get(str(n.pid), "pid %d" % n.pid)
print("round %d, complete %s, closed %s; participants: %s; wait list: %s; heartbeats: %s" % (
    st.round, st.complete, st.closed, ", ".join(sorted(name(n) for n in st.participants)) or "none",
    ", ".join(sorted(name(n) for n in st.wait_list)) or "empty",
    ", ".join("%s %.1f s ago" % (name(n), (now - t).total_seconds())
              for n, t in sorted(st.last_heartbeats.items(), key=lambda i: name(i[0])))))
'''


# -- finding things --------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    build_dir = Path(os.environ.get("DDPRUN_BUILD_DIR", REPO / "build")).resolve()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ddprun", default=str(build_dir / "launcher" / "ddprun"),
                   help="ddprun binary (default: launcher/ddprun in $DDPRUN_BUILD_DIR or build/)")
    p.add_argument("--torch2-python", help="interpreter of the torch 2.x venv (see the docstring)")
    p.add_argument("--only", choices=("b", "c"), help="run one bench only")
    p.add_argument("--launcher", choices=LAUNCHERS, help="run one launcher only")
    p.add_argument("--reps-b", type=int, default=3, help="runs of (b) per launcher (default 3)")
    p.add_argument("--reps-c", type=int, default=3, help="runs of (c) per launcher (default 3)")
    p.add_argument("--resize-bound", type=float, default=120.0,
                   help="seconds (c) waits for the smaller round after the kill (default 120)")
    p.add_argument("--all-reps", action="store_true",
                   help="repeat (c) for torchrun even after it did not resume once")
    p.add_argument("--json", metavar="PATH", help="also write the raw samples as JSON")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory (agent logs, worker records); print its path")
    args = p.parse_args()
    args.build_dir = build_dir
    return args


def find_torch2_python(args: argparse.Namespace) -> str:
    if args.torch2_python:
        return args.torch2_python
    if os.environ.get("DDPRUN_TORCH2_PYTHON"):
        return os.environ["DDPRUN_TORCH2_PYTHON"]
    files = [args.build_dir / "torch2-python", REPO / "build" / "torch2-python"]

    def from_files() -> str | None:
        for f in files:
            try:
                path = f.read_text().strip()
            except OSError:
                continue
            if path and os.access(path, os.X_OK):
                return path
        return None

    found = from_files()
    if found:
        return found
    print("elastic_bench: no torch 2.x venv known; running `make torch2-venv` (pip, may take "
          "minutes)", flush=True)
    subprocess.run(["make", "-C", str(REPO), "torch2-venv", "BUILD_DIR=%s" % args.build_dir],
                   stdin=subprocess.DEVNULL, timeout=3600, check=False)
    found = from_files()
    if not found:
        sys.exit("elastic_bench: no torch 2.x interpreter (set DDPRUN_TORCH2_PYTHON or run "
                 "make torch2-venv)")
    return found


def torch_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys, torch; print(torch.__version__, "
                          "'Python %d.%d.%d' % sys.version_info[:3])"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit("elastic_bench: %s cannot import torch:\n%s" % (python, out.stderr[-2000:]))
    return out.stdout.strip()


# -- processes ---------------------------------------------------------------------------------

def clean_env() -> dict[str, str]:
    """This environment without launcher-influencing variables (as the integration tests do)."""
    env = {}
    for key, value in os.environ.items():
        if key.startswith(("PET_", "TORCHELASTIC_")) or key in (
                "OMP_NUM_THREADS", "LOGLEVEL", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "DDPRUN_PYTHON",
                "PYTHON_EXEC", "DDPRUN_EVENT_LOG", "MASTER_ADDR", "MASTER_PORT", "RANK",
                "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES"):
            continue
        env[key] = value
    return env


def pids_with(var: str, value: str) -> list[int]:
    needle = ("%s=%s" % (var, value)).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def proc_state(pid: int) -> str | None:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return data[data.rindex(")") + 2]


def alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z", "X")


def kill_pids(pids: list[int]) -> None:
    """SIGKILLs each pid and its process group (never our own group)."""
    own = os.getpgid(0)
    for pid in pids:
        try:
            pgid = os.getpgid(pid)
            if pgid > 1 and pgid != own:
                os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def wait_for(condition, timeout: float, interval: float = 0.005):
    """Polls condition() until it is truthy (returned) or the timeout passes (None)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def port_listening(port: int) -> bool:
    """A LISTEN socket on the port, from /proc/net (no connection made to the store)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: str, n: int) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return []
    return lines[-n:]


class Agent:
    """One launcher process (one simulated node), in its own session, output to a file."""

    def __init__(self, bench: "Bench", run_dir: str, index: int, argv: list[str]):
        self.tag = "%s-%d" % (os.path.basename(run_dir), index)
        self.index = index
        self.log = os.path.join(run_dir, "agent%d.log" % index)
        env = dict(bench.env)
        env[AGENT_VAR] = self.tag
        with open(self.log, "wb") as out:
            try:
                self.proc = subprocess.Popen(argv, env=env, cwd=run_dir, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            except OSError as e:  # e.g. a binary being rebuilt under us
                raise BenchError("cannot start %s: %s" % (argv[0], e)) from e
        self.argv = argv

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def kill_tree(self) -> None:
        kill_pids([self.proc.pid] + pids_with(AGENT_VAR, self.tag))


# -- the benches -------------------------------------------------------------------------------

class BenchError(Exception):
    pass


class Bench:
    def __init__(self, args: argparse.Namespace, python: str):
        self.args = args
        self.python = python
        self.marker = uuid.uuid4().hex
        self.tmp = tempfile.mkdtemp(prefix="elastic_bench_")
        self.worker = os.path.join(self.tmp, "elastic_worker.py")
        Path(self.worker).write_text(WORKER_PY)
        self.env = clean_env()
        self.env[MARKER_VAR] = self.marker
        # torchrun leaves torchelastic_* directories in $TMPDIR: a private one, removed at the end.
        self.env["TMPDIR"] = os.path.join(self.tmp, "tmpdir")
        os.mkdir(self.env["TMPDIR"])
        self.agents: list[Agent] = []

    def argv(self, launcher: str, flags: list[str], worker_args: list[str]) -> list[str]:
        if launcher == "ddprun":
            return [self.args.ddprun, *flags, "--python", self.python, self.worker, *worker_args]
        return [self.python, "-m", "torch.distributed.run", *flags, self.worker, *worker_args]

    @staticmethod
    def flags(nnodes: str, nproc: int, port: int, max_restarts: int, conf: str) -> list[str]:
        return ["--nnodes=%s" % nnodes, "--nproc_per_node=%d" % nproc, "--rdzv_backend=c10d",
                "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=bench",
                "--max_restarts=%d" % max_restarts, "--monitor_interval=0.1",
                "--rdzv_conf=%s" % conf]

    def start(self, run_dir: str, index: int, argv: list[str]) -> Agent:
        agent = Agent(self, run_dir, index, argv)
        self.agents.append(agent)
        return agent

    def start_host(self, run_dir: str, argv: list[str], port: int) -> Agent:
        host = self.start(run_dir, 0, argv)
        if not wait_for(lambda: port_listening(port) or host.exit_code() is not None, 120,
                        interval=0.01) or host.exit_code() is not None:
            raise BenchError("the first agent did not serve port %d within 120 s (exit %s):\n%s" % (
                port, host.exit_code(), "\n".join(tail(host.log, 20))))
        return host

    def cleanup_run(self) -> None:
        """Kills every agent of the run and everything carrying the marker; waits them gone."""
        for agent in self.agents:
            if agent.proc.poll() is None:
                kill_pids([agent.proc.pid])
        for _ in range(5):
            pids = pids_with(MARKER_VAR, self.marker)
            if not pids:
                break
            kill_pids(pids)
            time.sleep(0.05)
        for agent in self.agents:
            try:
                agent.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.agents = []
        wait_for(lambda: not [p for p in pids_with(MARKER_VAR, self.marker) if alive(p)], 10,
                 interval=0.05)

    def leftovers(self) -> list[int]:
        return [p for p in pids_with(MARKER_VAR, self.marker) if alive(p)]

    # (b) ---------------------------------------------------------------------------------------

    def run_failure(self, launcher: str, rep: int) -> dict:
        run_dir = os.path.join(self.tmp, "b_%s_%d" % (launcher, rep))
        os.mkdir(run_dir)
        port = free_port()
        argv = self.argv(launcher, self.flags("2:2", 2, port, 1, CONF_B), ["fail", run_dir])
        try:
            try:
                agents = [self.start_host(run_dir, argv, port)]
                agents.append(self.start(run_dir, 1, argv))
            except BenchError as e:
                return {"error": str(e).splitlines()[0], "logs": {0: str(e).splitlines()[1:]}}
            done = wait_for(lambda: all(a.exit_code() is not None for a in agents), 120, 0.05)
            codes = [a.exit_code() for a in agents]
            logs = {a.index: tail(a.log, 40) for a in agents}
        finally:
            self.cleanup_run()
        failed = os.path.join(run_dir, "failed")
        starts = [json.loads(Path(p).read_text())
                  for p in glob.glob(os.path.join(run_dir, "start_a1_*.json"))]
        result = {"codes": codes, "logs": logs, "new_attempt": starts}
        problems = []
        if not done:
            problems.append("the agents did not finish within 120 s (killed)")
        if codes != [0, 0]:
            problems.append("exit codes %s (expected 0, 0)" % codes)
        if not os.path.exists(failed):
            problems.append("rank 0 never failed")
        if len(starts) != 4:
            problems.append("%d workers of the new attempt started (expected 4)" % len(starts))
        if problems:
            result["error"] = "; ".join(problems)
            return result
        t_fail = json.loads(Path(failed).read_text())["t"]
        times = sorted(s["t"] - t_fail for s in starts)
        result.update(first=times[0], last=times[-1],
                      restart_counts=sorted(s["restart"] for s in starts))
        return result

    def torch_rdzv_state(self, port: int, agents: list[Agent]) -> str:
        names = ["%d=agent%d%s" % (a.proc.pid, a.index, " (killed)" if a.index == 2 else "")
                 for a in agents]
        try:
            out = subprocess.run([self.python, "-c", TORCH_STATE_PY, str(port), "bench", *names],
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=60, env=self.env)
        except subprocess.TimeoutExpired:
            return "(could not read it within 60 s)"
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[-1] if text else "(nothing read, exit %d)" % out.returncode

    # (c) ---------------------------------------------------------------------------------------

    def run_resize(self, launcher: str, rep: int) -> dict:
        run_dir = os.path.join(self.tmp, "c_%s_%d" % (launcher, rep))
        os.mkdir(run_dir)
        port = free_port()
        argv = self.argv(launcher, self.flags("2:3", 1, port, 3, CONF_C), ["resize", run_dir])
        bound = self.args.resize_bound

        def records(world: int) -> list[dict]:
            out = []
            for path in glob.glob(os.path.join(run_dir, "start_w%d_*.json" % world)):
                try:
                    out.append(json.loads(Path(path).read_text()))
                except (OSError, ValueError):
                    pass
            return out

        result: dict = {}
        try:
            agents = [self.start_host(run_dir, argv, port)]
            agents += [self.start(run_dir, i, argv) for i in (1, 2)]

            def three_running():
                if any(a.exit_code() is not None for a in agents):
                    raise BenchError("an agent exited before the world-size-3 round: %s\n%s" % (
                        [a.exit_code() for a in agents],
                        "\n".join("agent%d: %s" % (a.index, "\n  ".join(tail(a.log, 15)))
                                  for a in agents)))
                recs = records(3)
                return len({r["agent"] for r in recs}) == 3 and all(alive(r["pid"]) for r in recs)
            if not wait_for(three_running, 120, 0.02):
                raise BenchError("no world-size-3 round within 120 s")
            # The kill's phase within the heartbeat period moves with the repetition, so that a
            # few runs sample the whole detection window rather than one corner of it.
            settle = SETTLE_C + KEEP_ALIVE_INTERVAL * (rep + 0.5) / max(1, self.args.reps_c)
            result["settle"] = settle
            time.sleep(settle)
            victim, survivors = agents[2], agents[:2]
            doomed = [victim.proc.pid] + pids_with(AGENT_VAR, victim.tag)
            t_kill = time.monotonic()
            kill_pids(doomed)
            result["killed_pids"] = doomed

            def resumed():
                if all(a.exit_code() is not None for a in survivors):
                    return "exited"
                return [r for r in records(2) if r["t"] > t_kill] or None
            got = wait_for(resumed, bound, 0.01)
            t_waited = time.monotonic() - t_kill
            if got == "exited" or not got:
                state = []
                for a in survivors:
                    mine = [r for r in records(3) if r["agent"] == a.tag]
                    state.append({
                        "agent": a.index, "exit": a.exit_code(),
                        "world3_worker_alive": any(alive(r["pid"]) for r in mine),
                        "last_log_lines": tail(a.log, 4)})
                result.update(resumed=False, waited=t_waited, survivors=state,
                              why="both survivors exited" if got == "exited" else
                              "did not resume within %.0f s" % bound)
                if launcher == "torchrun" and agents[0].exit_code() is None:
                    result["rdzv_state"] = self.torch_rdzv_state(port, agents)
            else:
                wait_for(lambda: len([r for r in records(2) if r["t"] > t_kill]) >= 2, 30, 0.01)
                new = sorted(r["t"] - t_kill for r in records(2) if r["t"] > t_kill)
                result.update(resumed=True, first=new[0], last=new[-1],
                              restart_counts=sorted(r["restart"] for r in records(2)
                                                    if r["t"] > t_kill))
            Path(run_dir, "release").write_text("go")
            exited = wait_for(lambda: all(a.exit_code() is not None for a in survivors),
                              30 if result.get("resumed") else 10, 0.05)
            result["survivor_codes"] = [a.exit_code() for a in survivors]
            result["survivors_finished"] = bool(exited)
            result["logs"] = {a.index: tail(a.log, 40) for a in agents}
        finally:
            self.cleanup_run()
        return result


# -- report ------------------------------------------------------------------------------------

def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "%.0f ms" % (seconds * 1000) if seconds < 1 else "%.2f s" % seconds


def median_of(results: list[dict], key: str) -> float | None:
    values = [r[key] for r in results if key in r and r.get("resumed", True)]
    return statistics.median(values) if values else None


def measure_startup(python: str, tmp: str, runs: int = 5) -> float:
    """The worker's own start-up: spawn -> its first line, median of a few runs."""
    probe = os.path.join(tmp, "startup_probe.py")
    Path(probe).write_text("import time\nprint(repr(time.monotonic()))\n")
    samples = []
    for _ in range(runs):
        t0 = time.monotonic()
        out = subprocess.run([python, probe], capture_output=True, text=True, timeout=60)
        samples.append(float(out.stdout) - t0)
    return statistics.median(samples)


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still clean up (finally below)
    if not os.access(args.ddprun, os.X_OK):
        sys.exit("elastic_bench: ddprun not found: %s (build it: make build)" % args.ddprun)
    python = find_torch2_python(args)
    version = torch_version(python)
    bench = Bench(args, python)
    samples: dict[str, dict[str, list[dict]]] = {"b": {l: [] for l in LAUNCHERS},
                                                 "c": {l: [] for l in LAUNCHERS}}
    errors: list[str] = []
    launchers = (args.launcher,) if args.launcher else LAUNCHERS
    try:
        startup = measure_startup(python, bench.tmp)
        load = os.getloadavg()
        print("elastic_bench: ddprun vs torchrun (torch %s), loopback" % version)
        print("  machine: %s, %d CPUs, Linux %s, load avg %.2f %.2f %.2f" % (
            platform.node(), os.cpu_count(), platform.release(), *load))
        print("  ddprun  : %s ... --python %s <worker.py>" % (args.ddprun, python))
        print("  torchrun: %s -m torch.distributed.run ... <worker.py>" % python)
        print("  worker start-up (spawn -> first line of the script): %s" % fmt(startup))
        if args.only != "c":
            print("  (b) flags: %s" % " ".join(Bench.flags("2:2", 2, 0, 1, CONF_B)).replace(
                ":0 ", ":<port> "))
        if args.only != "b":
            print("  (c) flags: %s" % " ".join(Bench.flags("2:3", 1, 0, 3, CONF_C)).replace(
                ":0 ", ":<port> "))
        print(flush=True)

        if args.only != "c":
            for rep in range(args.reps_b):
                for launcher in launchers:
                    r = bench.run_failure(launcher, rep)
                    samples["b"][launcher].append(r)
                    if "error" in r:
                        msg = "(b) %s run %d: %s" % (launcher, rep + 1, r["error"])
                        errors.append(msg)
                        print("  " + msg)
                        for i, lines in r["logs"].items():
                            print("    agent%d: %s" % (i, "\n      ".join(lines[-15:])))
                    else:
                        print("  (b) %-8s run %d: first worker %s, all 4 %s after the failure "
                              "(restart counts %s)" % (launcher, rep + 1, fmt(r["first"]),
                                                       fmt(r["last"]), r["restart_counts"]),
                              flush=True)
        if args.only != "b":
            skip_torchrun = False
            for rep in range(args.reps_c):
                for launcher in launchers:
                    if launcher == "torchrun" and skip_torchrun:
                        continue
                    try:
                        r = bench.run_resize(launcher, rep)
                    except BenchError as e:
                        r = {"error": str(e), "resumed": False}
                        errors.append("(c) %s run %d: %s" % (launcher, rep + 1, e))
                        print("  (c) %s run %d: %s" % (launcher, rep + 1, e))
                        samples["c"][launcher].append(r)
                        continue
                    samples["c"][launcher].append(r)
                    if r["resumed"]:
                        print("  (c) %-8s run %d: first worker at world size 2 %s after the kill,"
                              " both %s (restart counts %s); survivors exited %s after release" % (
                                  launcher, rep + 1, fmt(r["first"]), fmt(r["last"]),
                                  r["restart_counts"], r["survivor_codes"]), flush=True)
                        if launcher == "ddprun" and r["survivor_codes"] != [0, 0]:
                            errors.append("(c) ddprun run %d: survivors exited %s after the "
                                          "release" % (rep + 1, r["survivor_codes"]))
                    else:
                        print("  (c) %-8s run %d: %s" % (launcher, rep + 1, r["why"]))
                        for s in r["survivors"]:
                            print("    survivor agent%d: exit %s, its world-size-3 worker %s; "
                                  "last log lines:" % (s["agent"], s["exit"],
                                                       "still running" if s["world3_worker_alive"]
                                                       else "gone"))
                            for line in s["last_log_lines"]:
                                print("      " + line[:220])
                            if not s["last_log_lines"]:
                                print("      (none: it logged nothing at its default level)")
                        if "rdzv_state" in r:
                            print("    torch's rendezvous state in the store %.0f s after the "
                                  "kill: %s" % (r["waited"], r["rdzv_state"]))
                        if launcher == "torchrun" and not args.all_reps:
                            skip_torchrun = True
                            print("    (further torchrun runs of (c) skipped: --all-reps to "
                                  "repeat them)")
                        if launcher == "ddprun":
                            errors.append("(c) ddprun run %d: %s" % (rep + 1, r["why"]))
                        sys.stdout.flush()
    finally:
        bench.cleanup_run()
        left = bench.leftovers()
        if args.keep:
            print("elastic_bench: logs and records kept in %s" % bench.tmp)
        else:
            shutil.rmtree(bench.tmp, ignore_errors=True)
    if left:
        errors.append("processes left behind: %s" % left)

    # Table.
    print()
    print("  %-46s %-9s %-26s %-9s %s" % ("bench", "ddprun", "torchrun", "ratio", "target"))
    if args.only != "c":
        for key, label in (("first", "(b) worker exit -> first new-attempt worker"),
                           ("last", "    ... -> all 4 new-attempt workers")):
            d = median_of(samples["b"]["ddprun"], key)
            t = median_of(samples["b"]["torchrun"], key)
            ratio = t / d if d and t else None
            target = ""
            if key == "first":
                target = "ddprun >= %.0fx faster: %s" % (TARGET_B, "-" if ratio is None else
                                           "met" if ratio >= TARGET_B else "NOT met")
            print("  %-46s %-9s %-26s %-9s %s" % (
                label, fmt(d), fmt(t), "-" if ratio is None else "%.1fx" % ratio, target))
    if args.only != "b":
        bound_c = KEEP_ALIVE_INTERVAL * KEEP_ALIVE_MAX_ATTEMPT + TARGET_C_SLACK + startup
        for key, label in (("first", "(c) SIGKILL -> first worker at world size 2"),
                           ("last", "    ... -> both workers at world size 2")):
            d = median_of(samples["c"]["ddprun"], key)
            t = median_of(samples["c"]["torchrun"], key)
            unresumed = [r for r in samples["c"]["torchrun"]
                         if not r.get("resumed") and "error" not in r]
            runs_c = [r for r in samples["c"]["torchrun"] if "error" not in r]
            t_text = fmt(t)
            if unresumed:
                t_text = ("no resume in %.0f s (%d/%d)" % (
                    args.resize_bound, len(unresumed), len(runs_c))
                          if t is None else "%s; %d run(s) never" % (fmt(t), len(unresumed)))
            if d and t:
                ratio = "%.1fx" % (t / d)
            elif d and unresumed:
                ratio = "> %.0fx" % (args.resize_bound / d)
            else:
                ratio = "-"
            target = ""
            if key == "first":
                target = "ddprun <= %d x %d + %.0f s + start-up = %.2f s: %s" % (
                    KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT, TARGET_C_SLACK, bound_c,
                    "-" if d is None else "met" if d <= bound_c else "NOT met")
            print("  %-46s %-9s %-26s %-9s %s" % (label, fmt(d), t_text, ratio, target))
    def ok_runs(bench_key: str, launcher: str) -> int:
        return len([r for r in samples[bench_key][launcher] if "error" not in r])
    runs = {l: " ".join(["(b) %d" % ok_runs("b", l)] * (args.only != "c") +
                        ["(c) %d" % ok_runs("c", l)] * (args.only != "b"))
            for l in LAUNCHERS}
    print("  medians; ratio = torchrun / ddprun; runs without error: ddprun %s, torchrun %s" % (
        runs["ddprun"], runs["torchrun"]))

    if args.json:
        Path(args.json).write_text(json.dumps({"torch": version, "startup_s": startup,
                                               "samples": samples}, indent=2) + "\n")
    if errors:
        print()
        for e in errors:
            print("elastic_bench: " + e.splitlines()[0])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
