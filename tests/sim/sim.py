#!/usr/bin/env python3
"""Runs ddprun-sim's seeded schedules and checks each history with the chaos checker
(tests/chaos/checker.py: the same invariants as the real-network chaos runs).

    sim.py --binary BUILD/tests/sim/ddprun-sim --nodes N --seed S [--first I] [--schedules K]
           [--out DIR]
    sim.py --binary BUILD/tests/sim/ddprun-sim --regressions tests/sim/regressions.txt

Each violation is printed with its replay command (make sim SEED=S NODES=N FIRST=I
SCHEDULES=1). Exit: 0 (no violation), 1 (violations, or a run that did not finish), 2 (usage).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import checker  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--seed", default="1", help="a seed, or a range FIRST-LAST")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--schedules", type=int, default=20)
    parser.add_argument("--out", help="keep the histories here (default: a temp dir)")
    parser.add_argument("--regressions", help="run the (nodes, seed, schedule) lines of this file")
    args = parser.parse_args()
    if args.regressions:
        return run_regressions(args)

    runs = [(args.nodes, seed, args.first, args.schedules) for seed in seed_list(args.seed)]
    return run_all(args, runs, "%d schedules of %d nodes, seed %s" % (
        args.schedules * len(runs), args.nodes, args.seed))


def run_all(args, runs, title):
    """Runs each (nodes, seed, first, schedules) and checks its histories; 1 on any violation or
    failed run (the histories are then kept), else 0."""
    out = args.out or tempfile.mkdtemp(prefix="ddprun-sim-")
    started = time.monotonic()
    violations, failed_runs = 0, 0
    for nodes, seed, first, schedules in runs:
        run = subprocess.run([args.binary, "--nodes", str(nodes), "--seed", seed, "--first",
                              str(first), "--schedules", str(schedules), "--history", out])
        failed_runs += run.returncode != 0
        args.nodes, args.first, args.schedules = nodes, first, schedules
        violations += check_seed(args, seed, out)
    print("sim: %s: %d violations (%.1f s real)" % (title, violations,
                                                    time.monotonic() - started))
    if violations or failed_runs:
        print("sim: histories kept in %s" % out)
        return 1
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0


def regression_cases(path):
    """(nodes, seed, schedule, what) per line of `path` (# comments)."""
    cases = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                nodes, seed, schedule, what = (line.split(None, 3) + [""])[:4]
                cases.append((int(nodes), seed, int(schedule), what))
    return cases


def run_regressions(args):
    """Each regression schedule, one run each."""
    cases = regression_cases(args.regressions)
    for nodes, seed, schedule, what in cases:
        print("sim: regression %d nodes seed %s schedule %d: %s" % (nodes, seed, schedule, what))
    return run_all(args, [(nodes, seed, schedule, 1) for nodes, seed, schedule, _ in cases],
                   "%d regression schedules" % len(cases))


def seed_list(text):
    """"7" is seed 7; "1-50" is seeds 1 to 50."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-", 1))
        return [str(seed) for seed in range(first, last + 1)]
    return [text]


def check_seed(args, seed, out):
    """Checks the histories of one seed's schedules; returns how many violations they hold."""
    violations = 0
    for index in range(args.first, args.first + args.schedules):
        path = os.path.join(out, "sim-%s-%d.json" % (seed, index))
        if not os.path.exists(path):
            print("sim: seed %s schedule %d: no history" % (seed, index))
            violations += 1
            continue
        with open(path) as f:
            history = json.load(f)
        found = checker.check(history)
        print("sim: seed %s schedule %d: %s; %d violations" % (
            seed, index, checker.summary(history)[:240], len(found)), flush=True)
        for violation in found:
            print("sim: VIOLATION [%s] seed %s schedule %d (%d nodes): %s" % (
                violation.invariant, seed, index, args.nodes, violation.message))
            print("  replay: make sim SEED=%s NODES=%d FIRST=%d SCHEDULES=1" % (
                seed, args.nodes, index))
            for line in violation.slice:
                print("  | " + line)
        violations += len(found)
        if not found and not args.out:
            os.remove(path)
    return violations


if __name__ == "__main__":
    sys.exit(main())
