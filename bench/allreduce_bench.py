#!/usr/bin/env python3
"""CPU allreduce bus bandwidth: ddprun's bundled allreduce against PyTorch's gloo allreduce.

Both run 4 local workers under the same launcher, in the same run, at the same sizes
(1 KiB ... 64 MiB of float32, x2 steps by default), with the same iteration counts:

  ddprun: ddprun --standalone --nproc_per_node=4 --no_python \
            ddprun-allreduce-perf --backend cpu -b 1K -e 64M -f 2 -n N -w W --json
  torch:  ddprun --standalone --nproc_per_node=4 --python /usr/bin/python3 \
            allreduce_bench.py --torch-worker ...   (torch.distributed.all_reduce, gloo)

Timing is identical on both sides: a barrier, then N back-to-back in-place sum allreduces,
time per iteration averaged over ranks; busbw = size / time * 2 (n - 1) / n (nccl-tests).
The two launches alternate --repeat times (default 3: ddprun, torch, ddprun, torch, ...) and
each side keeps its best time per size, so that load from other processes on a small machine
hurts both sides alike and a single disturbed run does not decide the comparison.
Prints both columns and the ratio ddprun/torch; the project's target is >= 0.8 at every size
>= 1 MiB. It prints, it does not assert (except that every launch must exit 0). Run it with
Debian's /usr/bin/python3 (torch 1.13); the worker side must be that interpreter too.

--numa-binding MODE compares something else: the torch (gloo) side without the flag against
the same launch with --numa-binding=MODE, interleaved the same way, ratio bound/unbound.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_DIR = os.path.abspath(os.environ.get("DDPRUN_BUILD_DIR", os.path.join(REPO_ROOT, "build")))
TORCH_PYTHON = "/usr/bin/python3"
TARGET_RATIO = 0.8
TARGET_MIN_BYTES = 1 << 20


def sizes(min_bytes, max_bytes, factor):
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def torch_worker(args):
    """Runs inside each rank: the PyTorch side of the comparison, rank 0 prints JSON."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    rows = []
    for size in sizes(args.min_bytes, args.max_bytes, args.factor):
        tensor = torch.zeros(size // 4, dtype=torch.float32)
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(tensor)
        elapsed = torch.tensor([(time.perf_counter() - start) / args.iters])
        dist.all_reduce(elapsed)
        time_us = elapsed.item() / world * 1e6
        algbw = size / (time_us * 1e3)
        rows.append({"size": size, "time_us": time_us, "algbw_gbps": algbw,
                     "busbw_gbps": algbw * 2 * (world - 1) / world})
    if dist.get_rank() == 0:
        print("TORCH_JSON " + json.dumps({"rows": rows}), flush=True)
    dist.destroy_process_group()


def launch(cmd, timeout):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        sys.exit("launch failed (exit %d): %s\n%s" % (proc.returncode, " ".join(cmd),
                                                     proc.stderr[-4000:]))
    return proc.stdout


def run_ddprun(args, ddprun, nproc):
    perf = os.path.join(BUILD_DIR, "worker", "ddprun-allreduce-perf")
    out = launch([ddprun, "--standalone", "--nproc_per_node=%d" % nproc, "--no_python", perf,
                  "--backend", "cpu", "-b", str(args.min_bytes), "-e", str(args.max_bytes),
                  "-f", str(args.factor), "-n", str(args.iters), "-w", str(args.warmup),
                  "--json"], args.timeout)
    line = next(l for l in out.splitlines() if l.startswith("{"))
    return {row["size"]: row for row in json.loads(line)["rows"]}


def run_torch(args, ddprun, nproc, binding=()):
    out = launch([ddprun, "--standalone", "--nproc_per_node=%d" % nproc, *binding,
                  "--python", TORCH_PYTHON,
                  os.path.abspath(__file__), "--torch-worker", "--min-bytes", str(args.min_bytes),
                  "--max-bytes", str(args.max_bytes), "--factor", str(args.factor),
                  "--iters", str(args.iters), "--warmup", str(args.warmup)], args.timeout)
    line = next(l for l in out.splitlines() if l.startswith("TORCH_JSON "))
    return {row["size"]: row for row in json.loads(line[len("TORCH_JSON "):])["rows"]}


def keep_best(best, rows):
    """Merges one launch's rows into best, keeping the fastest time per size (#wrong adds)."""
    for size, row in rows.items():
        old = best.get(size)
        if old is not None:
            row = dict(row, wrong=row.get("wrong", 0) + old.get("wrong", 0))
            if old["time_us"] <= row["time_us"]:
                row = dict(old, wrong=row["wrong"])
        best[size] = row


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def report(ours, theirs, nproc, repeat, labels=("ddprun", "torch"), target=True):
    print("CPU allreduce (float32 sum, %d local workers), busbw in GB/s, best of %d launches"
          % (nproc, repeat))
    print("%10s  %12s  %12s  %12s  %12s  %6s" % (
        "size", labels[0] + " us", labels[0] + " busbw", labels[1] + " us", labels[1] + " busbw",
        "ratio"))
    misses = []
    for size in sorted(ours):
        a, b = ours[size], theirs[size]
        ratio = a["busbw_gbps"] / b["busbw_gbps"] if b["busbw_gbps"] > 0 else float("nan")
        flag = ""
        if target and size >= TARGET_MIN_BYTES and not ratio >= TARGET_RATIO:
            flag = "  < %.1f" % TARGET_RATIO
            misses.append(size)
        print("%10s  %12.1f  %12.3f  %12.1f  %12.3f  %6.2f%s" % (
            human(size), a["time_us"], a["busbw_gbps"], b["time_us"], b["busbw_gbps"], ratio,
            flag))
    if not target:
        return
    wrong = sum(row.get("wrong", 0) for row in ours.values())
    print("ddprun #wrong total: %d" % wrong)
    print("target busbw >= %.1fx torch at sizes >= 1 MiB: %s" % (
        TARGET_RATIO, "met" if not misses else "MISSED at " + ", ".join(map(human, misses))))


def compare_binding(args):
    bound, unbound = {}, {}
    flag = ["--numa-binding=" + args.numa_binding]
    for _ in range(args.repeat):
        keep_best(unbound, run_torch(args, args.ddprun, args.nproc))
        keep_best(bound, run_torch(args, args.ddprun, args.nproc, flag))
    print("gloo with %s against without it" % flag[0])
    report(bound, unbound, args.nproc, args.repeat, labels=("bound", "unbound"), target=False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bound": bound, "unbound": unbound}, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--min-bytes", type=int, default=1 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--factor", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved launches per side")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--ddprun", default=os.path.join(BUILD_DIR, "launcher", "ddprun"))
    parser.add_argument("--json", help="also write both result sets to this file")
    parser.add_argument("--numa-binding", metavar="MODE",
                        help="compare gloo with --numa-binding=MODE against gloo without it")
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if args.numa_binding:
        return compare_binding(args)
    ours, theirs = {}, {}
    for _ in range(args.repeat):
        keep_best(ours, run_ddprun(args, args.ddprun, args.nproc))
        keep_best(theirs, run_torch(args, args.ddprun, args.nproc))
    report(ours, theirs, args.nproc, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ddprun": ours, "torch": theirs}, f, indent=1)


if __name__ == "__main__":
    main()
