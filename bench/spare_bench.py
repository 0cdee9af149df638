#!/usr/bin/env python3
"""Hot spare replaces a lost node: ddprun against current torchrun (torch 2.x), side by side.

Issue 22's bench, on loopback, with elastic_bench.py's machinery (one process per simulated node,
the same stdlib worker script run by the same torch 2.x interpreter on both sides). Three agents,
each:
    --nnodes=2:2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:<free port>
    --rdzv_id=bench --max_restarts=<R> --monitor_interval=0.1
    --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=1
Agents 0 (it serves the store) and 1 form the group; agent 2 starts once both workers run and
waits as a hot spare (1 s to queue). Then agent 1 and its worker are SIGKILLed, and at the same
moment the bench tells the survivor's worker that its peer is gone: it exits 1 at once, as a
gloo collective fails with "Connection closed by peer" within milliseconds of a peer's death.
Measured: the kill -> the first worker of the new group (world size 2, started after the kill),
the restart count (TORCHELASTIC_RESTART_COUNT) each new worker was given, and how the agents
ended once the new workers are released. A launcher that ends the job instead ("restarts are
spent") is reported as such. Printed, never asserted: the script exits non-zero only when a
ddprun run goes wrong or a process is left behind.

R is --max-restarts (default 0, the default of both launchers); 1 shows what each launcher
charges when it can afford it.

Usage:
  DDPRUN_BUILD_DIR=build /usr/bin/python3 bench/spare_bench.py [--reps 3] [--max-restarts 0]
The torch 2.x interpreter is found as elastic_bench.py finds it.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import elastic_bench as eb  # noqa: E402

CONF = eb.CONF_C  # keep-alive 1 s x 3, last call 1 s
QUEUE_SETTLE = 1.0  # the spare's start -> the kill (it queues within milliseconds)
RESUME_BOUND = 60.0

SPARE_WORKER_PY = r'''
import json, os, sys, time
T0 = time.time()
d = sys.argv[1]
env = os.environ
rec = {"t": T0, "pid": os.getpid(), "world": int(env["WORLD_SIZE"]),
       "restart": int(env.get("TORCHELASTIC_RESTART_COUNT", "-1")),
       "agent": env.get("%(agent)s", "")}
tmp = os.path.join(d, ".start.%%d" %% os.getpid())
with open(tmp, "w") as f:
    json.dump(rec, f)
os.rename(tmp, os.path.join(d, "start_%%d.json" %% os.getpid()))
deadline = time.monotonic() + %(bound)d
while time.monotonic() < deadline:
    if os.path.exists(os.path.join(d, "release")):
        sys.exit(0)
    lost = os.path.join(d, "peer_lost")
    if os.path.exists(lost) and float(open(lost).read() or 0) > T0:
        print("RuntimeError: Connection closed by peer (simulated)", flush=True)
        sys.exit(1)
    time.sleep(0.005)
sys.exit(4)
''' % {"agent": eb.AGENT_VAR, "bound": eb.WORKER_BOUND}


def records(run_dir: str) -> list[dict]:
    out = []
    for path in glob.glob(os.path.join(run_dir, "start_*.json")):
        try:
            out.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError):
            pass
    return out


def run_spare(bench: eb.Bench, worker: str, launcher: str, rep: int, max_restarts: int) -> dict:
    run_dir = os.path.join(bench.tmp, "d_%s_%d" % (launcher, rep))
    os.mkdir(run_dir)
    port = eb.free_port()
    flags = eb.Bench.flags("2:2", 1, port, max_restarts, CONF)
    if launcher == "ddprun":
        argv = [bench.args.ddprun, *flags, "--python", bench.python, worker, run_dir]
    else:
        argv = [bench.python, "-m", "torch.distributed.run", *flags, worker, run_dir]
    result: dict = {}
    try:
        agents = [bench.start_host(run_dir, argv, port), None, None]
        agents[1] = bench.start(run_dir, 1, argv)
        if not eb.wait_for(lambda: len({r["agent"] for r in records(run_dir)}) == 2, 120, 0.02):
            raise eb.BenchError("no world-size-2 group within 120 s")
        agents[2] = bench.start(run_dir, 2, argv)
        time.sleep(QUEUE_SETTLE)  # the spare queues (a bench pause, not a synchronisation)
        victim = agents[1]
        doomed = [victim.proc.pid] + eb.pids_with(eb.AGENT_VAR, victim.tag)
        t_kill = time.time()
        eb.kill_pids(doomed)
        Path(run_dir, "peer_lost").write_text(repr(t_kill))
        survivors = [agents[0], agents[2]]

        def resumed():
            if all(a.exit_code() is not None for a in survivors):
                return "exited"
            new = [r for r in records(run_dir) if r["t"] > t_kill]
            return new if len(new) >= 2 else None
        got = eb.wait_for(resumed, RESUME_BOUND, 0.01)
        if got in (None, "exited"):
            codes = [a.exit_code() for a in survivors]
            result.update(resumed=False, why=(
                "the job ended (agents 0 and 2 exited %s)" % codes if got == "exited" else
                "no new group within %.0f s (agent 0 %s, the spare %s)" % (
                    RESUME_BOUND, "exited %s" % codes[0] if codes[0] is not None else "running",
                    "exited %s" % codes[1] if codes[1] is not None else "still waiting")))
        else:
            new = sorted(got, key=lambda r: r["t"])
            result.update(resumed=True, first=new[0]["t"] - t_kill,
                          world=sorted({r["world"] for r in new}),
                          agents=sorted(r["agent"].rsplit("-", 1)[1] for r in new),
                          restart_counts=sorted(r["restart"] for r in new))
        Path(run_dir, "release").write_text("go")
        eb.wait_for(lambda: all(a.exit_code() is not None for a in survivors), 30, 0.05)
        result["codes"] = [a.exit_code() for a in survivors]
        result["logs"] = {a.index: eb.tail(a.log, 30) for a in agents if a}
    finally:
        bench.cleanup_run()
    return result


def main() -> int:
    # This bench's own flags; the rest (--ddprun, --torch2-python, --launcher) are
    # elastic_bench.py's, parsed by it.
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--reps", type=int, default=3, help="runs per launcher (default 3)")
    own.add_argument("--max-restarts", type=int, default=0,
                     help="--max_restarts of every agent (default 0)")
    mine, rest = own.parse_known_args()
    reps, max_restarts = mine.reps, mine.max_restarts
    sys.argv = [sys.argv[0]] + rest
    args = eb.parse_args()
    python = eb.find_torch2_python(args)
    version = eb.torch_version(python)
    bench = eb.Bench(args, python)
    worker = os.path.join(bench.tmp, "spare_worker.py")
    Path(worker).write_text(SPARE_WORKER_PY)
    samples: dict[str, list[dict]] = {launcher: [] for launcher in eb.LAUNCHERS}
    errors: list[str] = []
    launchers = (args.launcher,) if args.launcher else eb.LAUNCHERS
    try:
        print("spare_bench: ddprun vs torchrun (torch %s), loopback, %s, %d CPUs, load %.2f" % (
            version, platform.node(), os.cpu_count(), os.getloadavg()[0]))
        print("  flags: %s" % " ".join(eb.Bench.flags("2:2", 1, 0, max_restarts, CONF)).replace(
            ":0 ", ":<port> "))
        skip_torchrun = False
        for rep in range(reps):
            for launcher in launchers:
                if launcher == "torchrun" and skip_torchrun:
                    continue
                try:
                    r = run_spare(bench, worker, launcher, rep, max_restarts)
                except eb.BenchError as e:
                    r = {"resumed": False, "why": str(e).splitlines()[0], "codes": None}
                samples[launcher].append(r)
                if r["resumed"]:
                    print("  %-8s run %d: kill -> first worker of the new group %s (world %s, "
                          "agents %s, restart counts %s); agents exited %s after release" % (
                              launcher, rep + 1, eb.fmt(r["first"]), r["world"], r["agents"],
                              r["restart_counts"], r["codes"]), flush=True)
                else:
                    print("  %-8s run %d: %s" % (launcher, rep + 1, r["why"]), flush=True)
                    for index, lines in r.get("logs", {}).items():
                        if index != 1 and lines:  # agent 1 was killed
                            print("    agent%d's last line: %s" % (index, lines[-1][:220]))
                    if launcher == "torchrun":
                        skip_torchrun = True  # each such run waits out the bound again
                        print("    (further torchrun runs skipped)")
                if launcher == "ddprun" and (not r["resumed"] or r["restart_counts"] !=
                                             [0, 0] or r["codes"] != [0, 0]):
                    errors.append("ddprun run %d: %s" % (rep + 1, r.get("why", r)))
    finally:
        bench.cleanup_run()
        left = bench.leftovers()
        shutil.rmtree(bench.tmp, ignore_errors=True)
    if left:
        errors.append("processes left behind: %s" % left)

    print()
    print("  %-44s %-22s %-30s" % ("--max_restarts=%d" % max_restarts, "ddprun", "torchrun"))
    cells = {}
    for launcher in eb.LAUNCHERS:
        ok = [r for r in samples[launcher] if r["resumed"]]
        lost = len(samples[launcher]) - len(ok)
        first = statistics.median(r["first"] for r in ok) if ok else None
        counts = sorted({c for r in ok for c in r["restart_counts"]})
        if not samples[launcher]:  # not run (--launcher)
            cells[launcher] = ("-", "-")
            continue
        cells[launcher] = (
            ("%s" % eb.fmt(first) if ok else "no resume in %.0f s (%d/%d)" % (
                RESUME_BOUND, lost, len(samples[launcher]))) +
            (" (%d/%d lost)" % (lost, len(samples[launcher])) if ok and lost else ""),
            ("%s" % counts if ok else "-"))
    print("  %-44s %-22s %-30s" % ("spare replaces a lost node -> first worker",
                                   cells["ddprun"][0], cells["torchrun"][0]))
    print("  %-44s %-22s %-30s" % ("restart count of the new workers",
                                   cells["ddprun"][1], cells["torchrun"][1]))
    print("  medians; runs: ddprun %d, torchrun %d" % (len(samples["ddprun"]),
                                                    len(samples["torchrun"])))
    for error in errors:
        print("spare_bench: " + error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
