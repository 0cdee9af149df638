"""A small ddprun demo worker: shows what the launcher gave it, then proves the ranks can talk.

Run with four workers:
    build/launcher/ddprun --standalone --nproc_per_node=4 --python /usr/bin/python3 --tee 3 \
        examples/demo_worker.py

Each worker prints its RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT. If PyTorch imports,
it joins a gloo process group through MASTER_ADDR:MASTER_PORT (init_method="env://") and
all-reduces its rank: every worker must get 0 + 1 + ... + (world - 1) = world * (world - 1) / 2.
Without PyTorch it only prints the environment.
"""
import os
import socket
import sys


def main() -> int:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    master = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    print(f"rank {rank}/{world} (local rank {local_rank}) pid {os.getpid()} on "
          f"{socket.gethostname()}, store at {master}, "
          f"restart {os.environ.get('TORCHELASTIC_RESTART_COUNT', '?')}", flush=True)

    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print(f"rank {rank}: torch is not importable by {sys.executable}; environment only "
              "(pass --python /usr/bin/python3 for Debian's PyTorch)", flush=True)
        return 0

    dist.init_process_group("gloo", init_method="env://")
    try:
        value = torch.tensor([rank], dtype=torch.int64)
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        expected = world * (world - 1) // 2
        ok = value.item() == expected
        print(f"rank {rank}: all_reduce(sum of ranks) = {value.item()}, expected {expected}: "
              f"{'OK' if ok else 'WRONG'} (torch {torch.__version__}, gloo)", flush=True)
        return 0 if ok else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
