"""A small deterministic CPU DDP training run (gloo, env://) for launcher interop tests.

Usage (under a torchrun-compatible launcher): train_ddp.py OUT_PATH [STEPS]
Every rank trains a tiny MLP on its shard of a synthetic data set generated from a fixed seed;
rank 0 writes repr(final full-data loss) to OUT_PATH. The result depends only on the world size,
so two launchers that set up the same world must produce exactly the same number.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

SAMPLES, FEATURES, HIDDEN, BATCH, LR = 512, 16, 32, 8, 0.05


def make_data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    return x, y


def main():
    out_path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    x, y = make_data()
    shard = torch.arange(rank, SAMPLES, world)  # rank-sharded, like DistributedSampler(no shuffle)
    xs, ys = x[shard], y[shard]
    for step in range(steps):
        start = (step * BATCH) % len(xs)
        xb, yb = xs[start:start + BATCH], ys[start:start + BATCH]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(xb), yb)
        loss.backward()  # gradients are averaged over ranks by DDP (gloo allreduce)
        opt.step()

    with torch.no_grad():
        local = torch.nn.functional.mse_loss(model(xs), ys, reduction="sum").double()
    dist.all_reduce(local)  # the same on every rank
    final = local.item() / SAMPLES
    if rank == 0:
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(repr(final))
        os.replace(tmp, out_path)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
