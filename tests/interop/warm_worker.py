"""A worker for tests/interop/test_warm_restart.py: reports what it sees, then acts by attempt.

argv: REPORT_DIR [ACTION0 [ACTION1 [ACTION2]]], one action per attempt (TORCHELASTIC_RESTART_COUNT),
each "RANK:WHAT" or "all:WHAT" (comma-separated for several ranks), WHAT one of:
  ok           exit 0 (after a DataLoader with fork and spawn workers, with --dataloader)
  exit3        sys.exit(3)
  sigterm      kill itself with SIGTERM
  wait         block on REPORT_DIR/go_<attempt>_<rank> (a FIFO the test creates and writes to),
               then exit 3
  raise        raise ValueError("warm worker failed on purpose") inside torchelastic's @record
               (the error file, TORCHELASTIC_ERROR_FILE, gets the traceback)
  timer        sleep 60 s inside torchelastic's file timer, expires(after=1, scope="warm_step")
  hang         print a line (its first sign of progress), then sleep 300 s in hang_here()
  child        start `sleep 300` in its session, write its pid to REPORT_DIR/child_<rank>, then
               block forever on the FIFO go_<attempt>_<rank>
Ranks not named: ok. The report, REPORT_DIR/report_<attempt>_<rank>.json, is written after
`import torch` and holds the environment, argv, __main__'s names, sys.path[0], cwd, ids, tty-ness,
signal masks, the open-file limit, random draws and multiprocessing's start method.
"""
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time

import torch

RANK = int(os.environ.get("RANK", "-1"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


# Signals 32 and 33 are glibc's own: a warm worker has glibc's handler of 33 installed (its
# pool started a thread to preload at idle priority), as any process that ever started one.
LIBC_RESERVED = ~((1 << 31) | (1 << 32))


def signal_masks():
    masks = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("SigIgn", "SigBlk", "SigCgt"):
                masks[name] = "%016x" % (int(value, 16) & LIBC_RESERVED)
    return masks


def dataloader_sums():
    import torch.utils.data as data
    dataset = data.TensorDataset(torch.arange(8.0))
    sums = {}
    for method in ("fork", "spawn"):
        loader = data.DataLoader(dataset, batch_size=2, num_workers=2,
                                 multiprocessing_context=method)
        sums[method] = float(sum(batch[0].sum() for batch in loader))
    return sums


def report(report_dir, dataloader):
    import multiprocessing
    main = sys.modules["__main__"]
    record = {
        "env": dict(os.environ), "argv": sys.argv, "name": __name__,
        "file": getattr(main, "__file__", None), "path0": sys.path[0], "cwd": os.getcwd(),
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
        "tty": [os.isatty(fd) for fd in (0, 1, 2)], "signals": signal_masks(),
        "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "random": random.random(), "start_method": multiprocessing.get_start_method(True),
        "affinity": sorted(os.sched_getaffinity(0)),
        "dataloader": dataloader_sums() if dataloader else None,
    }
    path = os.path.join(report_dir, "report_%d_%d.json" % (ATTEMPT, RANK))
    with open(path + ".tmp", "w") as out:
        json.dump(record, out)
    os.replace(path + ".tmp", path)


def action(actions):
    if ATTEMPT >= len(actions):
        return "ok"
    for item in actions[ATTEMPT].split(","):
        who, _, what = item.partition(":")
        if who == "all" or who == str(RANK):
            return what
    return "ok"


def fail_on_purpose():
    raise ValueError("warm worker failed on purpose")


def hang_here():
    time.sleep(300)  # warm_worker: the hung rank sleeps here


def wait_for_go(report_dir):
    with open(os.path.join(report_dir, "go_%d_%d" % (ATTEMPT, RANK))) as fifo:
        fifo.read()


def main():
    report_dir, actions = sys.argv[1], sys.argv[2:]
    what = action(actions)
    report(report_dir, dataloader="--dataloader" in os.environ.get("WARM_WORKER_FLAGS", ""))
    print("rank %d attempt %d: %s" % (RANK, ATTEMPT, what), flush=True)
    if what == "exit3":
        sys.exit(3)
    if what == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if what == "wait":
        wait_for_go(report_dir)
        sys.exit(3)
    if what == "raise":
        from torch.distributed.elastic.multiprocessing.errors import record
        record(fail_on_purpose)()
    if what == "hang":
        hang_here()
    if what == "timer":
        import torch.distributed.elastic.timer as timer
        timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
        with timer.expires(after=1, scope="warm_step"):
            time.sleep(60)
    if what == "child":
        child = subprocess.Popen(["sleep", "300"])
        with open(os.path.join(report_dir, "child_%d" % RANK), "w") as out:
            out.write(str(child.pid))
        wait_for_go(report_dir)


if __name__ == "__main__":  # DataLoader's spawn workers import this file as __mp_main__
    main()
