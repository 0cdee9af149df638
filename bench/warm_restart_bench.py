#!/usr/bin/env python3
"""A killed worker → the new attempt's first step: ddprun cold, ddprun warm, torchrun 2.x (issue 40).

One job per case, side by side in one run (the cases interleaved, run after run):
tests/interop/hang_train.py on --nproc workers (gloo on CPUs; NCCL-free), torch 2.x from the venv
of scripts/setup-torch2-venv.sh, --max_restarts=1. When rank 1 has logged step --kill-step of
attempt 0, the bench SIGKILLs it (the "kill" time); attempt 1 resumes from rank 0's checkpoint.

  cold      ddprun --warm-restart=off: the new workers are exec'd (python -u script)
  warm      ddprun --warm-restart=on: forked from the interpreter that imported torch beside
            attempt 0
  torchrun  torchrun 2.x from the same venv

Also launch → attempt 0's first step: whether the pool, preloading beside attempt 0, delays it.
Phases, from the script's step log (wall clock): kill → fork (the first attempt-1 process's
creation, from /proc/self/stat, 10 ms ticks), fork → the script's first line (before `import
torch`), → first step (the first "step" record of attempt 1), and kill → first step, whose
medians give the ratios: warm / cold (target ≤ 0.6 here) and warm / torchrun. A case that has
not reached attempt 1's first step --cap seconds after the kill counts as "no recovery".
Benchmarks print; they never fail on a timing.

With a GPU (--nproc gpu) the same job runs with --nproc_per_node=gpu: hang_train.py still uses
gloo, so CUDA is never touched (see bench/README.md for the NCCL run).

Usage:
  /usr/bin/python3 bench/warm_restart_bench.py              # 5 runs of each case
  ... bench/warm_restart_bench.py --runs 3 --cases cold,warm --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))
import ddprun_testlib as lib  # noqa: E402
from hang_bench import find_torch2_python, first, job_bench_parser, kill_job, records  # noqa: E402

TRAIN = REPO / "tests" / "interop" / "hang_train.py"
CASES = ["cold", "warm", "torchrun"]
STEPS = 40  # enough for the pool, preloading at idle priority, to be ready before the kill


def parse_args() -> argparse.Namespace:
    p = job_bench_parser(__doc__.split("\n")[0], CASES, runs=5)
    p.add_argument("--nproc", default="2", help="--nproc_per_node (an integer, or gpu)")
    p.add_argument("--kill-step", type=int, default=3, help="rank 1 is killed after this step")
    p.add_argument("--step-time", type=float, default=0.3, help="seconds of 'compute' per step")
    p.add_argument("--cap", type=float, default=90.0, help="give up this long after the kill (s)")
    p.add_argument("--json", help="write every sample to this file")
    return p.parse_args()


def command(case, args, python, tmp):
    script = [str(TRAIN), "--steps", str(STEPS), "--step-time", "%g" % args.step_time,
              "--ckpt-dir", tmp, "--step-log", os.path.join(tmp, "steps.jsonl")]
    if case == "torchrun":
        torchrun = os.path.join(os.path.dirname(python), "torchrun")
        return [torchrun, "--nproc_per_node=%s" % args.nproc, "--max_restarts=1",
                "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % lib.free_port()] + script
    return [args.ddprun, "--standalone", "--nproc_per_node=%s" % args.nproc, "--max_restarts=1",
            "--warm-restart=%s" % ("on" if case == "warm" else "off"), "--python", python,
            "--event-log", os.path.join(tmp, "events.jsonl")] + script


def kill_rank1(log, args):
    """SIGKILLs rank 1 once its attempt-0 step --kill-step is logged; the kill's time, or None."""
    for rec in records(log):
        if rec["event"] == "step" and rec["attempt"] == 0 and rec["rank"] == 1 and \
                rec["step"] >= args.kill_step:
            killed = time.time()
            lib.kill_quietly(rec["pid"])
            return killed
    return None


def pool_is_ready(tmp):
    """ddprun's stderr says that the warm pool finished its preload."""
    try:
        with open(os.path.join(tmp, "stderr")) as f:
            return "warm pool ready" in f.read()
    except OSError:
        return False


def one_run(case, args, python):
    tmp = tempfile.mkdtemp(prefix="warm_bench_")
    marker = uuid.uuid4().hex
    log = os.path.join(tmp, "steps.jsonl")
    # LOGLEVEL=INFO: ddprun says "warm pool ready", which the warm case waits for before the kill.
    env = lib.clean_env({lib.MARKER_VAR: marker, "LOGLEVEL": "INFO"})
    killed = None
    with open(os.path.join(tmp, "stdout"), "w") as out, \
            open(os.path.join(tmp, "stderr"), "w") as err:
        started = time.monotonic()
        launched = time.time()
        proc = subprocess.Popen(command(case, args, python, tmp), env=env, cwd=tmp,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        stopped_by_bench = False
        pool_ready = None
        while proc.poll() is None:  # the bench samples the step log: it is the observer here
            if case == "warm" and pool_ready is None and pool_is_ready(tmp):
                pool_ready = time.time()
            # A warm restart needs the pool ready: it preloads at idle priority beside attempt 0,
            # so on a busy machine that can be after the kill step (the restart is then cold).
            if killed is None and (case != "warm" or pool_ready is not None):
                killed = kill_rank1(log, args)
            limit = killed + args.cap if killed else None
            if (limit and time.time() > limit) or time.monotonic() - started > args.cap + 180:
                stopped_by_bench = True
                lib.killpg_quietly(proc.pid)
                kill_job(marker)
                break
            time.sleep(0.02)
        code = proc.wait()
    kill_job(marker)
    recs = records(log)
    fork = first(recs, event="start", attempt=1)
    starts = [r["process_start"] for r in recs
              if r["event"] == "start" and r["attempt"] == 1 and r.get("process_start")]
    step = first(recs, event="step", attempt=1)
    step0 = first(recs, event="step", attempt=0)
    sample = {
        "launch_to_first_step_0_s": (step0 - launched) if step0 else None,
        "launch_to_pool_ready_s": (pool_ready - launched) if pool_ready else None,
        "case": case, "exit": None if stopped_by_bench else code,
        "kill_to_fork_s": (min(starts) - killed) if killed and starts else None,
        "fork_to_first_line_s": (fork - min(starts)) if fork and starts else None,
        "first_line_to_step_s": (step - fork) if step and fork else None,
        "kill_to_first_step_s": (step - killed) if step and killed else None,
        "starts": starts_of(os.path.join(tmp, "events.jsonl")),
    }
    lib.DdprunTestCase._rmtree(tmp)
    return sample


def starts_of(event_log):
    """ddprun's event log: how each attempt's workers started ("warm"/"cold")."""
    kinds = []
    for rec in records(event_log):
        if rec.get("event") == "workers_started":
            kinds.append(",".join(rec.get("start", [])))
    return kinds


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cell(values):
    med = median(values)
    if med is None:
        return "—"
    shown = ", ".join("%.2f" % v for v in values if v is not None)
    return "%.2f s (%s)" % (med, shown)


def main():
    args = parse_args()
    python = find_torch2_python(args)
    if not python:
        print("warm_restart_bench: no torch 2.x venv (scripts/setup-torch2-venv.sh or "
              "--torch2-python)")
        return 1
    cases = [c for c in args.cases.split(",") if c]
    if any(c not in CASES for c in cases):
        print("warm_restart_bench: cases are %s" % ", ".join(CASES))
        return 2
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print("warm_restart_bench: torch %s (%s); ddprun %s; %s workers, rank 1 killed after step "
          "%d; %d runs; load avg %.2f" % (version, python, args.ddprun, args.nproc,
                                          args.kill_step, args.runs, os.getloadavg()[0]),
          flush=True)
    samples = []
    for run in range(args.runs):
        for case in cases:
            s = one_run(case, args, python)
            samples.append(s)
            print("  %-8s run %d: exit %s; kill → fork %s, → first line %s, → first step %s "
                  "(kill → first step %s) %s" % (
                      case, run + 1, s["exit"], fmt(s["kill_to_fork_s"]),
                      fmt(s["fork_to_first_line_s"]), fmt(s["first_line_to_step_s"]),
                      fmt(s["kill_to_first_step_s"]), " ".join(s["starts"])), flush=True)
    print()
    print("| case | launch → attempt 0's first step | launch → pool ready | kill → fork | "
          "fork → first line | first line → first step | kill → first step |")
    print("|---|---|---|---|---|---|---|")
    by_case = {c: [s for s in samples if s["case"] == c] for c in cases}
    for case in cases:
        runs = by_case[case]
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            case, cell([s["launch_to_first_step_0_s"] for s in runs]),
            cell([s["launch_to_pool_ready_s"] for s in runs]),
            cell([s["kill_to_fork_s"] for s in runs]),
            cell([s["fork_to_first_line_s"] for s in runs]),
            cell([s["first_line_to_step_s"] for s in runs]),
            cell([s["kill_to_first_step_s"] for s in runs])))
    total = {c: median([s["kill_to_first_step_s"] for s in by_case[c]]) for c in cases}
    print()
    first0 = {c: median([s["launch_to_first_step_0_s"] for s in by_case[c]]) for c in cases}
    if first0.get("warm") and first0.get("cold"):
        print("attempt 0, warm / cold (median launch → first step): %.2f  (the pool must not "
              "delay it: about 1)" % (first0["warm"] / first0["cold"]))
    for a, b, target in (("warm", "cold", 0.6), ("warm", "torchrun", None)):
        if a in total and b in total:
            if total[a] is None or total[b] is None:
                print("%s / %s: — (%s did not recover)" % (a, b, a if total[a] is None else b))
                continue
            ratio = total[a] / total[b]
            met = "" if target is None else "  target ≤ %.2f  %s" % (
                target, "met" if ratio <= target else "NOT met")
            print("%s / %s (median kill → first step): %.2f%s" % (a, b, ratio, met))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(samples, f, indent=1)
    return 0


def fmt(value):
    return "—" if value is None else "%.2f s" % value


if __name__ == "__main__":
    sys.exit(main())
