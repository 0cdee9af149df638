"""A worker for the chaos test (test_chaos.py): records itself, starts a child shell with a
grandchild `sleep`, reaps whatever of them dies, and exits 0 when <dir>/release appears.

  chaos_worker.py DIR

Writes DIR/w_<pid>.json ({pid, rank, world_size, group_world_size, master, restart_count,
child}) once its child and grandchild run. Nothing here synchronises on time: the release is a
file the worker waits for with inotify-free polling of 20 ms (the test's own loop is bounded).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

out_dir = sys.argv[1]
release = os.path.join(out_dir, "release")
child = subprocess.Popen(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE,
                         text=True)
grandchild = int(child.stdout.readline())
threading.Thread(target=child.wait, daemon=True).start()  # no zombie when it is killed
record = {"pid": os.getpid(), "rank": int(os.environ["RANK"]),
          "world_size": int(os.environ["WORLD_SIZE"]),
          "group_world_size": int(os.environ["GROUP_WORLD_SIZE"]),
          "master": "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
          "restart_count": int(os.environ["TORCHELASTIC_RESTART_COUNT"]),
          "child": child.pid, "grandchild": grandchild}
path = os.path.join(out_dir, "w_%d.json" % os.getpid())
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
deadline = time.monotonic() + 600
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.02)
for pid in (grandchild, child.pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
sys.exit(0 if os.path.exists(release) else 1)
