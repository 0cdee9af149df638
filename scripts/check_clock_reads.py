#!/usr/bin/env python3
"""Fails on a direct clock read outside the allow-list (docs/architecture.md, "The seams": Clock).

Policy takes its time from the Clock seam (common/clock.h), so that its tests run on a fake clock;
only the loop owner reads the time, through it. This scans the C++ sources (not tests/, not build
trees) for `steady_clock::now(`, `system_clock::now(` and `high_resolution_clock::now(`, and for
`NAME::now(` where the file aliases one of them (`using NAME = std::chrono::steady_clock;`). A
read is allowed only in a file of ALLOWED below, each with its reason; an entry whose file no
longer reads a clock directly is reported too, so that the list stays the whole truth.

Usage: check_clock_reads.py [SOURCE_DIR]   (default: the tree this script is in)
Prints one line per problem, "file:line: what", and exits 1 if there is any; prints a one-line
summary and exits 0 otherwise.
"""
import os
import pathlib
import re
import sys

# Files that may read a clock directly, and why. Everything else takes a Clock.
ALLOWED = {
    "common/clock.cc": "RealClock itself: the one real Clock",
    "launcher/process/proc_table.cc": "ProcProcessTable::Now, the real ProcessTable's time",
    "launcher/process/local_process_context.cc": "timestamps: a worker's exit, its last output",
    "launcher/event_log_file.cc": "timestamps of the event log's lines",
    "launcher/process/warm_pool.cc": "I/O deadline: the pool answers a fork request within",
    "store/store_server_thread.cc": "I/O deadline: how long a stopped server lingers",
    "store/tcp_store_client.cc": "I/O deadlines of a socket's reads and writes",
    "store/tcp_store_server.cc": "I/O deadlines: idle clients of the server",
    "store/tcp_store_server_connection.h": "I/O: a connection's last activity",
    "store/tcp_store_server_connection.cc": "I/O: a connection's last activity",
    "store/etcd/etcd_client.cc": "I/O deadlines and reply times of HTTP requests",
    "store/etcd/etcd_store.cc": "I/O deadlines of a store call over etcd",
    "tools/ddprun_store.cc": "timestamps the tool prints",
    "worker/nccl_communicator.cc": "I/O deadlines of NCCL calls in the worker",
    "worker/allreduce_perf.cc": "benchmark: measures real time",
    "bench/rendezvous_load.cc": "benchmark: measures real time",
    "bench/store_load.cc": "benchmark: measures real time",
    "bench/storm_load.cc": "benchmark: measures real time",
}

SUFFIXES = {".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx"}
CLOCKS = r"(?:steady_clock|system_clock|high_resolution_clock)"
DIRECT = re.compile(r"\b%s\s*::\s*now\s*\(" % CLOCKS)
ALIAS = re.compile(r"\busing\s+(\w+)\s*=\s*(?:std\s*::\s*)?(?:chrono\s*::\s*)?%s\s*;" % CLOCKS)


def skipped_dir(root, path):
    """Trees that are not the project's C++ sources: tests, build trees, hidden folders."""
    rel = path.relative_to(root).as_posix()
    name = path.name
    return (rel == "tests" or name.startswith(".") or name.startswith("build")
            or (path / "CMakeCache.txt").exists())


def sources(root):
    for folder, dirs, files in os.walk(root):
        here = pathlib.Path(folder)
        dirs[:] = sorted(d for d in dirs if not skipped_dir(root, here / d))
        for name in sorted(files):
            if pathlib.Path(name).suffix in SUFFIXES:
                yield here / name


def code_of(line):
    """The line without its // comment (a comment may name a clock read)."""
    return line.split("//", 1)[0]


def reads(text):
    """(line number, text) of each direct clock read in `text`."""
    lines = [code_of(line) for line in text.splitlines()]
    aliases = {m.group(1) for line in lines for m in ALIAS.finditer(line)}
    by_alias = re.compile(r"\b(?:%s)\s*::\s*now\s*\(" % "|".join(map(re.escape, aliases))) \
        if aliases else None
    found = []
    for number, line in enumerate(lines, 1):
        if DIRECT.search(line) or (by_alias and by_alias.search(line)):
            found.append((number, line.strip()))
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    problems = []
    files = 0
    reading = set()
    for path in sources(root):
        rel = path.relative_to(root).as_posix()
        files += 1
        found = reads(path.read_text(errors="replace"))
        if found:
            reading.add(rel)
        if rel in ALLOWED:
            continue
        for number, line in found:
            problems.append("%s:%d: reads the clock directly (%s); take a Clock (common/clock.h), "
                            "or allow the file in scripts/check_clock_reads.py with a reason"
                            % (rel, number, line))
    for rel in sorted(set(ALLOWED) - reading):
        problems.append("%s: allowed in scripts/check_clock_reads.py but reads no clock "
                        "directly: remove the entry" % rel)
    for problem in problems:
        print(problem)
    if problems:
        print("check_clock_reads: %d problem%s (scripts/check_clock_reads.py, ALLOWED)" % (
            len(problems), "" if len(problems) == 1 else "s"), file=sys.stderr)
        return 1
    print("check_clock_reads: %d files, clock reads only in the %d allowed" % (files, len(ALLOWED)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
