"""Elastic data-parallel training with real PyTorch (gloo, env://, CPU) for ddprun's elastic tests.

Usage (under a torchrun-compatible elastic launcher):
    train_elastic.py DIR [--steps N] [--ckpt-every K] [--sleep S]
                         [--fail-rank R --fail-step F --fail-code C]

- A fixed number of global steps; a tiny MLP; every global batch (GLOBAL_BATCH samples, chosen by
  the step number) is sharded by RANK/WORLD_SIZE, so the step's averaged gradient does not depend
  on the world size (GLOBAL_BATCH divides by 2, 4, 6 and 8 workers).
- RANK 0 checkpoints to DIR/ckpt.pt every K steps (written to a temporary file, then
  os.replace'd) and, on start, every group resumes from the latest checkpoint (rank 0 reads it,
  broadcasts the step; DDP's constructor broadcasts rank 0's parameters).
- RANK 0 appends one JSON line per completed step to DIR/steps.log (a single O_APPEND write):
  {step, world_size, restart_count (TORCHELASTIC_RESTART_COUNT), group
  (MASTER_ADDR:MASTER_PORT), t (time.time() after the step's allreduce), loss}. The log line is
  written before the checkpoint, so a checkpoint never names a step the log lacks.
- Every worker writes DIR/started_<pid> (JSON) when it starts: its spawn time (the process's start
  from /proc, as wall-clock time), rank, world size, restart count, group, host
  ($DDPRUN_TEST_HOST, the test's host number); and again after its first step, with first_step
  (wall-clock time) added: first_step - spawn is the script's own start-up (interpreter, torch
  import, init_process_group, DDP, one step).
- --sleep S after each step (default 0.2 s) makes a run last long enough to kill nodes mid-run.
- --fail-rank R --fail-step F: RANK R exits with --fail-code (default 3) instead of running any
  step >= F, on every attempt (keep F below K so that no checkpoint gets past it).
"""
import argparse
import json
import os
import sys
import time


def spawn_time():
    """Wall-clock time at which this process was created (fork), to about 10 ms."""
    with open("/proc/self/stat") as f:
        data = f.read()
    start_ticks = int(data[data.rindex(")") + 2:].split()[19])  # field 22: starttime
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    now = time.time()
    return now - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


SPAWN = spawn_time()
SCRIPT_START = time.time()

SAMPLES, FEATURES, HIDDEN, GLOBAL_BATCH, LR = 480, 16, 32, 24, 0.05


def write_atomic(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def append_line(path, record):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--ckpt-every", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-step", type=int, default=0)
    parser.add_argument("--fail-code", type=int, default=3)
    args = parser.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    group = "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
    started_path = os.path.join(args.dir, "started_%d" % os.getpid())
    started = {"pid": os.getpid(), "rank": rank, "local_rank": int(os.environ["LOCAL_RANK"]),
               "world_size": world, "restart_count": restart_count, "group": group,
               "host": os.environ.get("DDPRUN_TEST_HOST"), "spawn": SPAWN,
               "script_start": SCRIPT_START}
    write_atomic(started_path, json.dumps(started).encode())

    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    # A rank waits here for the group's last one, which may still be importing torch: up to 8
    # workers on 2 shared cores, cold after a dropped page cache. A peer that is lost for good is
    # the agents' to handle (they stop this group), not this timeout's, so it is generous.
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=180))
    assert dist.get_rank() == rank and dist.get_world_size() == world

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
    start_step = int(start[0])
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's (resumed) parameters
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)  # no momentum: nothing else to checkpoint

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    log_path = os.path.join(args.dir, "steps.log")

    first = True
    for step in range(start_step, args.steps):
        if rank == args.fail_rank and step >= args.fail_step:
            sys.stdout.flush()
            sys.stderr.write("rank %d: failing on purpose at step %d (exit %d)\n" %
                             (rank, step, args.fail_code))
            sys.stderr.flush()
            os._exit(args.fail_code)
        base = (step * GLOBAL_BATCH) % SAMPLES
        batch = torch.arange(base, base + GLOBAL_BATCH)[rank::world]  # this rank's shard
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()  # gradients averaged over ranks (gloo allreduce)
        opt.step()
        now = time.time()
        if rank == 0:
            append_line(log_path, {"step": step, "world_size": world,
                                   "restart_count": restart_count, "group": group, "t": now,
                                   "loss": loss.item()})
            if (step + 1) % args.ckpt_every == 0:
                tmp = "%s.tmp.%d" % (ckpt_path, os.getpid())
                torch.save({"next_step": step + 1, "model": model.state_dict()}, tmp)
                os.replace(tmp, ckpt_path)
        if first:
            first = False
            started["first_step"] = now
            started["first_step_index"] = step
            write_atomic(started_path, json.dumps(started).encode())
        time.sleep(args.sleep)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
