"""Worker of test_compat_vs_torchrun: with "fail", local rank 1 exits 3 and the others wait to
be stopped; with "allreduce", a gloo all_reduce over env:// (whoever serves the store) whose sum
and TORCHELASTIC_USE_AGENT_STORE are written to <dir>/rank_<rank>.json."""
import json
import os
import sys
import time

mode = sys.argv[1]
if mode == "fail":
    if os.environ["LOCAL_RANK"] == "1":
        sys.exit(3)
    time.sleep(60)
    sys.exit(0)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
with open(os.path.join(sys.argv[2], "rank_%d.json" % dist.get_rank()), "w") as out:
    json.dump({"sum": t.item(), "use_agent_store": os.environ["TORCHELASTIC_USE_AGENT_STORE"],
               "master_port": os.environ["MASTER_PORT"]}, out)
dist.destroy_process_group()
