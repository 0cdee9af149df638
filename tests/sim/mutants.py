#!/usr/bin/env python3
"""The mutation check of ddprun-sim (issue 41): each ddprun-sim-<mutant> (the rendezvous library
with tests/sim/mutants/<mutant>.patch, a deliberate protocol bug; tests/sim/CMakeLists.txt) runs
the CI set of schedules, which must catch it: some schedule's history breaks an invariant of the
chaos checker. A mutant none of them catches fails the check, unless it is listed in SURVIVORS
with the reason the schedules cannot reach it yet.

    mutants.py --bin-dir BUILD/tests/sim      # every mutant built there
Exit: 0 (every mutant caught, or a known survivor), 1 (a mutant survived), 77 (none built).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import checker  # noqa: E402
import sim  # noqa: E402

# (nodes, seed, first schedule, schedules): the schedules of the sim.* ctest entries that catch
# the mutants (each passes without them; see CMakeLists.txt), and the regression schedules.
CI_SET = [(64, 1, 0, 20), (64, 3, 0, 5)] + [
    (nodes, int(seed), schedule, 1)
    for nodes, seed, schedule, _ in sim.regression_cases(os.path.join(HERE, "regressions.txt"))]
# Mutants the CI set does not catch yet, and why (docs/reliability.md, "Simulation").
SURVIVORS = {
    "restart_count_from_counter":
        "the counters of a sealed round move only when a member is declared gone after the seal "
        "(the seal waits for the accounting); no schedule yet makes that late declaration",
}


def caught_by(binary, nodes, seed, first, schedules):
    """The (schedule, invariant) pairs of the violations `binary` shows on those schedules."""
    out = tempfile.mkdtemp(prefix="ddprun-mutant-")
    subprocess.run([binary, "--nodes", str(nodes), "--seed", str(seed), "--first", str(first),
                    "--schedules", str(schedules), "--history", out],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = []
    for index in range(first, first + schedules):
        path = os.path.join(out, "sim-%d-%d.json" % (seed, index))
        if not os.path.exists(path):
            found.append((index, "no history"))
            continue
        import json
        with open(path) as f:
            found += [(index, v.invariant) for v in checker.check(json.load(f))]
        os.remove(path)
    os.rmdir(out)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", required=True)
    args = parser.parse_args()
    binaries = sorted(glob.glob(os.path.join(args.bin_dir, "ddprun-sim-*")))
    if not binaries:
        print("mutants: no ddprun-sim-<mutant> in %s (cmake --build BUILD --target "
              "ddprun-sim-mutants); skipped" % args.bin_dir)
        return 77
    survived = []
    for binary in binaries:
        mutant = os.path.basename(binary)[len("ddprun-sim-"):]
        found = []
        for nodes, seed, first, schedules in CI_SET:
            found += ["%d nodes seed %d schedule %d: %s" % (nodes, seed, index, invariant)
                      for index, invariant in caught_by(binary, nodes, seed, first, schedules)]
        if found:
            print("mutants: %s caught (%d violations), first: %s" % (mutant, len(found), found[0]))
        elif mutant in SURVIVORS:
            print("mutants: %s survives, known: %s" % (mutant, SURVIVORS[mutant]))
        else:
            print("mutants: %s SURVIVED the CI set: no schedule broke an invariant" % mutant)
            survived.append(mutant)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
