"""The training the chaos harness runs under ddprun (real PyTorch: gloo, env://, CPU).

Usage (under a torchrun-compatible elastic launcher): chaos_train.py DIR [--ckpt-every K]
[--sleep S] [--max-steps N]

- A tiny MLP trained data-parallel; every global batch is chosen by the step number and sharded
  by RANK/WORLD_SIZE, so a step means the same at any world size.
- Every group resumes from DIR/ckpt.pt (rank 0 reads it and broadcasts the step; DDP's
  constructor broadcasts rank 0's parameters). Rank 0 checkpoints every K steps (temporary file,
  then os.replace), after the step's log line, so a checkpoint never names a step the log lacks.
- EVERY rank appends one JSON line per completed step to DIR/steps.log (one O_APPEND write):
  {step, rank, world_size, restart_count, group (MASTER_ADDR:MASTER_PORT), host
  ($DDPRUN_CHAOS_HOST), pid, t (time.time() after the step's allreduce)}. Two groups training at
  once leave interleaved lines of two groups: the checker's split-brain evidence.
- Open-ended: training goes on until DIR/release exists and names a step count {"steps": N};
  the ranks agree to stop through one more allreduce (the largest flag wins), then leave through
  a barrier. --max-steps bounds a run whose harness died.
- Every worker writes DIR/started_<pid> (JSON: pid, rank, world size, restart count, group,
  host, spawn time) when it starts.
"""
import argparse
import json
import os
import sys
import time


# The interop training's helpers: spawn time from /proc, atomic writes, single-write appends.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from train_elastic import (  # noqa: E402
    FEATURES, GLOBAL_BATCH, HIDDEN, LR, SAMPLES, append_line, spawn_time, write_atomic)

SPAWN = spawn_time()


def release_steps(directory):
    """The step count DIR/release names, or None before the harness writes it."""
    try:
        with open(os.path.join(directory, "release")) as f:
            return int(json.load(f)["steps"])
    except (OSError, ValueError, KeyError):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--ckpt-every", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--max-steps", type=int, default=100000)
    args = parser.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    group = "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
    host = os.environ.get("DDPRUN_CHAOS_HOST")
    write_atomic(os.path.join(args.dir, "started_%d" % os.getpid()), json.dumps(
        {"pid": os.getpid(), "rank": rank, "world_size": world, "restart_count": restart_count,
         "group": group, "host": host, "spawn": SPAWN}).encode())

    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=30))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    ckpt_path = os.path.join(args.dir, "ckpt.pt")
    start = torch.zeros(1, dtype=torch.int64)
    if rank == 0 and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        start[0] = ckpt["next_step"]
    dist.broadcast(start, 0)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    log_path = os.path.join(args.dir, "steps.log")

    step = int(start[0])
    while step < args.max_steps:
        base = (step * GLOBAL_BATCH) % SAMPLES
        batch = torch.arange(base, base + GLOBAL_BATCH)[rank::world]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()
        opt.step()
        append_line(log_path, {"step": step, "rank": rank, "world_size": world,
                               "restart_count": restart_count, "group": group, "host": host,
                               "pid": os.getpid(), "t": time.time()})
        if rank == 0 and (step + 1) % args.ckpt_every == 0:
            tmp = "%s.tmp.%d" % (ckpt_path, os.getpid())
            torch.save({"next_step": step + 1, "model": model.state_dict()}, tmp)
            os.replace(tmp, ckpt_path)
        step += 1
        target = release_steps(args.dir)
        done = torch.tensor([1 if target is not None and step >= target else 0])
        dist.all_reduce(done, op=dist.ReduceOp.MAX)
        if int(done[0]):
            break
        time.sleep(args.sleep)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
