#!/usr/bin/env python3
"""A hung rank → the new attempt's first step, ddprun against torchrun 2.x (issue 24).

One job per case, side by side in one run: tests/interop/hang_train.py on 2 workers (gloo, torch
2.x from the venv of scripts/setup-torch2-venv.sh), --max_restarts=1; rank 1 sleeps 600 s inside
step 3 of attempt 0 (attempt 1 does not hang and resumes from the step-2 checkpoint). Cases:

  torchrun            torchrun 2.x as is: nothing watches for hangs
  torchrun+timer      torchrun 2.x, TORCHELASTIC_ENABLE_FILE_TIMER=1, each step in
                      timer.expires(after=--timeout, scope="train_step") (FileTimerClient)
  ddprun              ddprun --hang-timeout=--timeout
  ddprun+timer        ddprun, TORCHELASTIC_ENABLE_FILE_TIMER=1, the same scopes as torchrun+timer
  torchrun-1.13+timer Debian's torchrun 1.13 (/usr/bin/torchrun, its python) with the file timer,
                      for reference (--monitor_interval=0.1 -r 1 -t 1, see ddprun_testlib)

Times come from the script's step log (wall clock, one JSON line per event): hang = rank 1's
"hang_start" record; → restart = the first "start" record of attempt 1 (written before `import
torch`); → first step = the first "step" record of attempt 1. A case that has not resumed
--cap seconds after the hang is stopped by the bench (SIGKILL of its processes) and counts as
"no recovery". Also printed per case: the launcher's exit code, processes of the job still alive
1 s after the launcher exited (killed then), and the last lines the launcher itself printed
(ddprun's "[ddprun]" lines, torchrun's logging lines and tracebacks).

Benchmarks print; they never fail on a timing.

Usage:
  /usr/bin/python3 bench/hang_bench.py                        # every case once, cap 60 s
  ... bench/hang_bench.py --runs 3 --cases ddprun,ddprun+timer --timeout 3 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
import ddprun_testlib as lib  # noqa: E402

HANG_TRAIN = REPO / "tests" / "interop" / "hang_train.py"
CASES = ["torchrun", "torchrun+timer", "ddprun", "ddprun+timer", "torchrun-1.13+timer"]
HANG_STEP = 3
STEPS = 6
LAUNCHER_LINE = re.compile(
    r"^(\[ddprun\]|(INFO|WARNING|ERROR):torch|[IWEF]\d{4} \d\d:\d\d:\d\d|Traceback|"
    r"\S+Error\b|\S+Exception\b|torch\.distributed\S*: |\S+ FAILED|Root Cause|"
    r"  (rank|exitcode|time|error_file) +:|ranks? [\d, ]+ (stuck at|at|in|waiting) |stacks: )")


def job_bench_parser(description, cases, runs) -> argparse.ArgumentParser:
    """The options of the benches that run one job per case with torch 2.x (this one and
    warm_restart_bench.py): ddprun, build dir, the venv's python, cases, runs per case."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--ddprun", default=lib.DDPRUN, help="the ddprun binary")
    p.add_argument("--build-dir", type=Path, default=Path(lib.BUILD_DIR))
    p.add_argument("--torch2-python", help="python of a torch 2.x venv")
    p.add_argument("--cases", default=",".join(cases), help="comma-separated, of: " +
                   ", ".join(cases))
    p.add_argument("--runs", type=int, default=runs, help="runs per case")
    return p


def parse_args() -> argparse.Namespace:
    p = job_bench_parser(__doc__.split("\n")[0], CASES, runs=1)
    p.add_argument("--timeout", type=float, default=3.0,
                   help="--hang-timeout and the file timer's `after` (s)")
    p.add_argument("--cap", type=float, default=60.0,
                   help="give up on a case this long after the hang (s)")
    p.add_argument("--json", help="write every sample to this file")
    return p.parse_args()


def find_torch2_python(args) -> str | None:
    candidates = [args.torch2_python, os.environ.get("DDPRUN_TORCH2_PYTHON")]
    for f in (args.build_dir / "torch2-python", REPO / "build" / "torch2-python"):
        try:
            candidates.append(f.read_text().strip())
        except OSError:
            pass
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append(os.path.join(cache, "ddprun", "torch2-venv", "bin", "python"))
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    return None


def records(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip().endswith("}")]
    except FileNotFoundError:
        return []


def first(recs, **match):
    times = [r["time"] for r in recs if all(r.get(k) == v for k, v in match.items())]
    return min(times) if times else None


def command(case, args, python, tmp):
    script = [str(HANG_TRAIN), "--steps", str(STEPS), "--hang-rank", "1", "--hang-step",
              str(HANG_STEP), "--ckpt-dir", tmp, "--step-log", os.path.join(tmp, "steps.jsonl")]
    env = {}
    if case.endswith("+timer"):
        script += ["--file-timer", "%g" % args.timeout]
        env["TORCHELASTIC_ENABLE_FILE_TIMER"] = "1"
    if case == "torchrun-1.13+timer":
        cmd = lib.torchrun_prefix() + lib.TORCHRUN_COMPAT_FLAGS + [
            "--nproc_per_node=2", "--max_restarts=1", "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % lib.free_port()] + script
    elif case.startswith("torchrun"):
        torchrun = os.path.join(os.path.dirname(python), "torchrun")
        cmd = [torchrun, "--nproc_per_node=2", "--max_restarts=1", "--rdzv_backend=c10d",
               "--rdzv_endpoint=127.0.0.1:%d" % lib.free_port()] + script
    else:
        cmd = [args.ddprun, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
               "--log-dir", os.path.join(tmp, "logs"), "--python", python]
        if case == "ddprun":
            cmd.append("--hang-timeout=%g" % args.timeout)
        cmd += script
    return cmd, env


def kill_job(marker):
    for _ in range(3):
        pids = [p for p in lib.pids_with_marker(marker) if lib.is_alive(p)]
        if not pids:
            return
        for pid in pids:
            lib.kill_quietly(pid)
        time.sleep(0.05)


def one_run(case, args, python):
    tmp = tempfile.mkdtemp(prefix="hang_bench_")
    marker = uuid.uuid4().hex
    cmd, extra = command(case, args, python, tmp)
    env = lib.clean_env(dict(extra, **{lib.MARKER_VAR: marker}))
    log = os.path.join(tmp, "steps.jsonl")
    with open(os.path.join(tmp, "stdout"), "w") as out, \
            open(os.path.join(tmp, "stderr"), "w") as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                cwd=tmp, start_new_session=True)
        stopped_by_bench = False
        while proc.poll() is None:
            recs = records(log)
            hang = first(recs, event="hang_start")
            limit = (hang + args.cap) if hang else None
            if (limit and time.time() > limit) or time.monotonic() - started > args.cap + 120:
                stopped_by_bench = True
                lib.killpg_quietly(proc.pid)
                kill_job(marker)
                break
            time.sleep(0.05)
        code = proc.wait()
        exited = time.time()
    # What the launcher left behind: processes of the job alive 1 s after it exited.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and [p for p in lib.pids_with_marker(marker)
                                           if lib.is_alive(p)]:
        time.sleep(0.05)
    leftovers = [] if stopped_by_bench else [p for p in lib.pids_with_marker(marker)
                                             if lib.is_alive(p)]
    kill_job(marker)
    recs = records(log)
    hang = first(recs, event="hang_start")
    restart = first(recs, event="start", attempt=1)
    step = first(recs, event="step", attempt=1)
    stderr = lib.read_file(os.path.join(tmp, "stderr"))
    lines = [ln.rstrip() for ln in stderr.splitlines() if LAUNCHER_LINE.match(ln)]
    sample = {
        "case": case,
        "exit": None if stopped_by_bench else code,
        "stopped_by_bench": stopped_by_bench,
        "hang_to_launcher_exit_s": None if stopped_by_bench or not hang else exited - hang,
        "hang_to_restart_s": (restart - hang) if hang and restart else None,
        "hang_to_first_step_s": (step - hang) if hang and step else None,
        "resumed_from": [r.get("from_step") for r in recs if r["event"] == "resume"][:1],
        "leftovers": len(leftovers),
        "last_launcher_lines": lines[-4:],
    }
    lib.DdprunTestCase._rmtree(tmp)
    return sample


def describe_exit(sample, cap):
    if sample["stopped_by_bench"]:
        return "still running %g s after the hang (stopped by the bench)" % cap
    code = sample["exit"]
    if code is not None and code < 0:
        return "%d (killed by %s)" % (128 - code, signal.Signals(-code).name)
    return str(code)


def secs(value):
    return "-" if value is None else "%.2f s" % value


def fmt(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    med = statistics.median(values)
    runs = ", ".join("%.2f" % v for v in values)
    return "%.2f s (%s)" % (med, runs) if len(values) > 1 else "%.2f s" % med


def main():
    args = parse_args()
    python = find_torch2_python(args)
    if not python:
        print("hang_bench: no torch 2.x venv (scripts/setup-torch2-venv.sh or --torch2-python)")
        return 1
    cases = [c for c in args.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        print("hang_bench: unknown case(s) %s" % bad)
        return 2
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print("hang_bench: torch %s (%s); ddprun %s; 2 workers, rank 1 hangs in step %d; "
          "timeout %g s; cap %g s; load avg %.2f" % (version, python, args.ddprun, HANG_STEP,
                                                     args.timeout, args.cap, os.getloadavg()[0]),
          flush=True)
    samples = []
    for case in cases:
        for run in range(args.runs):
            sample = one_run(case, args, python)
            samples.append(sample)
            print("  %-19s run %d: exit %s; hang -> restart %s, -> first step %s, -> launcher"
                  " exit %s; resumed from %s; leftovers %d" % (
                      case, run + 1, describe_exit(sample, args.cap),
                      secs(sample["hang_to_restart_s"]), secs(sample["hang_to_first_step_s"]),
                      secs(sample["hang_to_launcher_exit_s"]), sample["resumed_from"],
                      sample["leftovers"]), flush=True)
    print()
    print("| case | exit (hang → launcher exit) | hang → new attempt started | hang → its first "
          "step | vs ddprun --hang-timeout | launcher's last lines |")
    print("|---|---|---|---|---|---|")
    by_case = {c: [s for s in samples if s["case"] == c] for c in cases}
    reference = None
    if by_case.get("ddprun"):
        vals = [s["hang_to_first_step_s"] for s in by_case["ddprun"] if s["hang_to_first_step_s"]]
        reference = statistics.median(vals) if vals else None
    for case in cases:
        runs = by_case[case]
        restart = fmt([s["hang_to_restart_s"] for s in runs])
        step = fmt([s["hang_to_first_step_s"] for s in runs])
        steps = [s["hang_to_first_step_s"] for s in runs if s["hang_to_first_step_s"]]
        if reference and steps:
            ratio = "%.2f×" % (statistics.median(steps) / reference)
        elif reference:
            ratio = "no recovery (> %.0f×)" % (args.cap / reference)
        else:
            ratio = "—"
        exits = "; ".join(sorted({describe_exit(s, args.cap) for s in runs}))
        exit_after = fmt([s["hang_to_launcher_exit_s"] for s in runs])
        if exit_after:
            exits += " (%s)" % exit_after
        lines = runs[-1]["last_launcher_lines"]
        shown = "<br>".join("`%s`" % ln.replace("|", "\\|")[:200] for ln in lines) or "(none)"
        print("| %s | %s | %s | %s | %s | %s |" % (case, exits, restart or "no new attempt",
                                                 step or "—", ratio, shown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(samples, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
