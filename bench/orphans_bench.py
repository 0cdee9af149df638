#!/usr/bin/env python3
"""No orphans (issue 12): SIGKILL of ddprun -> every descendant of its workers gone, N times.

Each repetition: `ddprun --standalone --nproc_per_node=4 --no_python <python>
tests/integration/orphan_tree.py wait` (each worker starts a child shell that starts a grandchild
`sleep`: 12 descendants, all in the workers' sessions; in every other repetition child and
grandchild run in a process group of their own, out of reach of killpg). Once all 12 run, ddprun
is SIGKILLed and the bench polls (every 0.5 ms) until the last of the 12 is gone; a zombie counts
as gone. Leftovers: processes of the launch (the session keeper included) still alive 1 s after
the kill; the bench then SIGKILLs them itself.

Printed: kills, leftovers (processes, and repetitions with any), kill -> last descendant gone
(median, p90, max, min, in ms). Exits 1 when a repetition left a process or a launch failed;
never on a timing.

Usage:
  DDPRUN_BUILD_DIR=build /usr/bin/python3 bench/orphans_bench.py            # 100 kills
  ... bench/orphans_bench.py -n 20 --nproc 8 --json samples.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
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
import orphan_tree as tree  # noqa: E402

BOUND_S = 1.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ddprun", default=lib.DDPRUN, help="the ddprun binary")
    p.add_argument("-n", "--kills", type=int, default=100, help="repetitions")
    p.add_argument("--nproc", type=int, default=4, help="workers per launch")
    p.add_argument("--json", help="write every sample to this file")
    return p.parse_args()


def kill_all(marker):
    for pid in lib.pids_with_marker(marker):
        lib.kill_quietly(pid)


def one_kill(args, rep, tmp):
    """One launch and kill: (seconds to the last descendant gone or None, leftover pids)."""
    marker = uuid.uuid4().hex
    env = lib.clean_env({lib.MARKER_VAR: marker})
    command = [args.ddprun] + tree.ddprun_args(args.nproc, "wait", own_group=rep % 2 == 1)
    with open(os.path.join(tmp, "ddprun_%d.out" % rep), "wb") as out:
        proc = subprocess.Popen(command, env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, start_new_session=True)
    try:
        pids = tree.wait_for_tree(marker, proc, args.nproc * tree.PER_WORKER)
        deadline = time.monotonic() + BOUND_S  # the kill follows at once
        took = tree.sigkill_and_time(proc, pids, BOUND_S)
        proc.wait(timeout=10)
        while lib.pids_with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.001)
        return took, lib.pids_with_marker(marker)
    finally:
        lib.kill_quietly(proc.pid)
        kill_all(marker)
        proc.wait()


def main() -> int:
    args = parse_args()
    if not os.access(args.ddprun, os.X_OK):
        print("orphans_bench: %s is missing: build it first" % args.ddprun, file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="orphans_bench_")
    samples, leftovers, failed = [], [], 0
    try:
        for rep in range(args.kills):
            try:
                took, left = one_kill(args, rep, tmp)
            except AssertionError as error:
                print("repetition %d: launch failed: %s" % (rep, error), file=sys.stderr)
                failed += 1
                continue
            samples.append(took)
            leftovers.append(len(left))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    gone = sorted(t * 1000 for t in samples if t is not None)
    print("machine: %s, %d CPUs, Linux %s" % (platform.node(), os.cpu_count(), platform.release()))
    print("launch: %d workers x %d processes, every other kill with own process groups" %
          (args.nproc, tree.PER_WORKER))
    print("kills: %d (launch failures: %d)" % (len(samples), failed))
    print("leftovers 1 s after the kill: %d processes in %d kills" %
          (sum(leftovers), sum(1 for n in leftovers if n)))
    if gone:
        p90 = gone[min(len(gone) - 1, int(round(0.9 * (len(gone) - 1))))]
        print("kill -> last descendant gone: median %.1f ms, p90 %.1f ms, max %.1f ms, min %.1f ms"
              % (statistics.median(gone), p90, gone[-1], gone[0]))
    if len(gone) < len(samples):
        print("descendants alive %.1f s after the kill in %d kills" %
              (BOUND_S, len(samples) - len(gone)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gone_s": samples, "leftovers": leftovers, "failures": failed}, f)
    return 1 if failed or any(leftovers) or len(gone) < len(samples) else 0


if __name__ == "__main__":
    sys.exit(main())
