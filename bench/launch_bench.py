#!/usr/bin/env python3
"""Launch overhead: ddprun against torchrun, on the same machine, in the same run.

Both launchers start 8 workers of /bin/true in standalone mode and wait for them; the
repetitions are interleaved (ddprun, torchrun, ddprun, ...) so that machine noise hits both.
Printed per launcher: median and min wall time, and peak RSS; then the ratios with the
project's targets next to them. It prints, it does not assert (except that every launch must
exit 0).

Command lines compared (N = --nproc, default 8):
  ddprun:   build/launcher/ddprun --standalone --nproc_per_node=N --no_python /bin/true
  torchrun: /usr/bin/python3 /usr/bin/torchrun --standalone --nproc_per_node=N
            --monitor_interval=0.1 -r 9:1 -t 9:1 --no_python /bin/true

Why the torchrun extras:
  * --monitor_interval=0.1: Debian's torchrun is 1.13, whose default is 5 s (the agent sleeps
    that long before it even looks at the workers); current torchrun's default is 0.1 s.
  * -r 9:1 -t 9:1: torchrun 1.13 crashes on Python 3.11 with its default --redirects/--tee 0
    (IntFlag iteration no longer yields the zero member, so "0" parses to None). A single value
    1 or 2 works but makes torchrun redirect and tail the logs; 3 crashes too. A per-rank map
    naming only a rank outside 0..N-1 gives every real worker "no redirect", which is exactly
    torchrun's default behaviour and also its cheapest: nothing redirected, no tail threads.
    With more than 9 workers no single-digit rank is out of range, so the default becomes 1.
    Override with --torchrun-redirects.

Peak RSS is the launcher's ru_maxrss as GNU time (/usr/bin/time -f %M) reports it from wait4:
the largest resident set of the launcher and of every descendant it waited for (the maximum of
one process, not the sum of the tree). For both launchers that is the launcher itself;
/bin/true is ~1 MB. GNU time sits in between because Linux folds the *parent's* memory into a
child's ru_maxrss when the child execs (exec_mmap records the old mm's high-water mark), so a
launcher spawned straight from this ~13 MB Python process would report at least 13 MB. Wall
time is taken here around the whole command; GNU time adds about 1 ms to both launchers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SPEEDUP = 100.0
TARGET_RSS_RATIO = 30.0
GNU_TIME = "/usr/bin/time"  # Debian package "time" (scripts/install-deps.sh installs it)


def parse_args() -> argparse.Namespace:
    build_dir = Path(os.environ.get("DDPRUN_BUILD_DIR", REPO / "build"))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ddprun", default=str(build_dir / "launcher" / "ddprun"),
                   help="ddprun binary (default: $DDPRUN_BUILD_DIR or build/, then launcher/ddprun)")
    p.add_argument("--torchrun", default="/usr/bin/torchrun", help="torchrun script")
    p.add_argument("--torchrun-python", default="/usr/bin/python3",
                   help="interpreter that runs torchrun (Debian's, which has torch 1.13)")
    p.add_argument("--torchrun-redirects",
                   help="value of torchrun's -r and -t (default 9:1 up to 9 workers, else 1; "
                        "see the module docstring)")
    p.add_argument("-n", "--repetitions", type=int, default=10, help="runs of each launcher")
    p.add_argument("--nproc", type=int, default=8, help="workers per launch")
    p.add_argument("--torchrun-only", action="store_true",
                   help="measure torchrun alone (while ddprun is not built yet)")
    p.add_argument("--json", metavar="PATH", help="also write the raw samples as JSON")
    args = p.parse_args()
    if args.torchrun_redirects is None:  # map keys are single digits: 9 is out of range up to 9
        args.torchrun_redirects = "9:1" if args.nproc <= 9 else "1"
    return args


def commands(args: argparse.Namespace) -> dict[str, list[str]]:
    n = f"--nproc_per_node={args.nproc}"
    cmds = {
        "ddprun": [args.ddprun, "--standalone", n, "--no_python", "/bin/true"],
        "torchrun": [args.torchrun_python, args.torchrun, "--standalone", n,
                     "--monitor_interval=0.1", "-r", args.torchrun_redirects,
                     "-t", args.torchrun_redirects, "--no_python", "/bin/true"],
    }
    if args.torchrun_only:
        del cmds["ddprun"]
    return cmds


def check_present(cmds: dict[str, list[str]]) -> None:
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"launch_bench: {GNU_TIME} not found: apt-get install time (or make deps)")
    for name, argv in cmds.items():
        path = argv[0] if name == "ddprun" else argv[1]
        if not (os.path.isfile(path) and os.access(argv[0], os.X_OK)):
            hint = " (build it: make build; or pass --ddprun PATH, or --torchrun-only)" \
                if name == "ddprun" else ""
            sys.exit(f"launch_bench: {name} not found or not executable: {path}{hint}")


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Runs argv under GNU time, output to a temp file; returns (wall s, peak RSS KiB, output)."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as rss_file:
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                   (os.POSIX_SPAWN_DUP2, out.fileno(), 2)]
        timed = [GNU_TIME, "-f", "%M", "-o", rss_file.name, "--", *argv]
        start = time.perf_counter()
        pid = os.posix_spawn(GNU_TIME, timed, env, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
        rss_lines = rss_file.read().split()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = "\n".join(text.splitlines()[-15:] + rss_lines[:-1])
        sys.exit(f"launch_bench: exit status {code} from: {' '.join(argv)}\n{tail}")
    return wall, int(rss_lines[-1]), text


def summarize(samples: list[tuple[float, int]]) -> dict[str, float]:
    walls = [w for w, _ in samples]
    rss = [r for _, r in samples]
    return {"median_s": statistics.median(walls), "min_s": min(walls),
            "median_rss_kib": statistics.median(rss), "max_rss_kib": max(rss)}


def main() -> int:
    args = parse_args()
    cmds = commands(args)
    check_present(cmds)
    env = dict(os.environ)
    env.pop("LOGLEVEL", None)  # both launchers at their default log level
    # torchrun leaves a torchelastic_* log directory in $TMPDIR per launch: give both launchers
    # a private TMPDIR, removed at the end.
    tmp = tempfile.TemporaryDirectory(prefix="launch_bench_")
    env["TMPDIR"] = tmp.name

    print(f"launch_bench: {args.nproc} workers of /bin/true, {args.repetitions} interleaved runs each")
    print(f"  machine: {platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}")
    for name, argv in cmds.items():
        print(f"  {name:8}: {' '.join(argv)}")

    for argv in cmds.values():  # warm-up (page cache, Python bytecode), not counted
        run_once(argv, env)
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in cmds}
    for _ in range(args.repetitions):
        for name, argv in cmds.items():
            wall, rss, _ = run_once(argv, env)
            samples[name].append((wall, rss))

    stats = {name: summarize(s) for name, s in samples.items()}
    print()
    print(f"  {'launcher':8}  {'median':>9}  {'min':>9}  {'peak RSS (median)':>18}")
    for name, s in stats.items():
        print(f"  {name:8}  {s['median_s'] * 1000:7.1f}ms  {s['min_s'] * 1000:7.1f}ms  "
              f"{s['median_rss_kib'] / 1024:15.1f} MiB")

    if "ddprun" in stats:
        d, t = stats["ddprun"], stats["torchrun"]
        speed_median = t["median_s"] / d["median_s"]
        speed_min = t["min_s"] / d["min_s"]
        rss_ratio = t["median_rss_kib"] / d["median_rss_kib"]
        print()
        print(f"  ddprun is {speed_median:.1f}x faster (median; min: {speed_min:.1f}x)  "
              f"target >= {TARGET_SPEEDUP:.0f}x  {'met' if speed_median >= TARGET_SPEEDUP else 'NOT met'}")
        print(f"  ddprun peak RSS is {rss_ratio:.1f}x smaller  "
              f"target >= {TARGET_RSS_RATIO:.0f}x  {'met' if rss_ratio >= TARGET_RSS_RATIO else 'NOT met'}")

    tmp.cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"commands": cmds, "samples": samples, "stats": stats}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
