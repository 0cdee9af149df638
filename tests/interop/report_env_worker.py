"""Worker for test_real_world_lines.py: usage report_env_worker.py OUTDIR.

1. Records the launcher-given environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...) and
   its arguments in OUTDIR/env_<RANK>.json (written atomically: tmp file, then rename).
2. Forms a gloo process group with init_method="env://" (GROUP_TIMEOUT), all_reduces a tensor
   holding its rank and checks the sum against world*(world-1)/2.
3. Rewrites the json with the result, destroys the group, and exits 0 (3 on a mismatch).
"""
import datetime
import json
import os
import sys

RECORDED = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS",
    "REPORT_ENV_NODE",  # set by the test per agent: which agent started this worker
)
MISMATCH_EXIT = 3
# How long a rank waits in init_process_group for the others: they import torch at the same time
# on 2 shared cores, cold after a dropped page cache and beside other tests, so the last one may
# arrive tens of seconds after the first. Generous, and below the test's RUN_TIMEOUT, so that a
# peer that never comes is reported by the workers before the test kills the agents.
GROUP_TIMEOUT = 150


def write_record(out_dir, rank, record):
    path = os.path.join(out_dir, "env_%s.json" % rank)
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(record, f, sort_keys=True, indent=1)
    os.replace(tmp, path)


def main(out_dir):
    rank = os.environ.get("RANK", "norank")
    record = {"env": {key: os.environ.get(key) for key in RECORDED},
              "argv": sys.argv[1:], "pid": os.getpid()}
    write_record(out_dir, rank, record)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT))
    world = dist.get_world_size()
    tensor = torch.tensor([dist.get_rank()], dtype=torch.int64)
    dist.all_reduce(tensor)
    expected = world * (world - 1) // 2
    record.update({"pg_rank": dist.get_rank(), "pg_world_size": world,
                   "allreduce_sum": int(tensor.item()), "allreduce_expected": expected,
                   "allreduce_ok": int(tensor.item()) == expected})
    write_record(out_dir, rank, record)
    dist.destroy_process_group()
    return 0 if record["allreduce_ok"] else MISMATCH_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
