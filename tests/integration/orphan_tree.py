"""The orphan tree of issue 12: a worker program, and how tests and benches find its processes.

As a worker (run by ddprun): starts a child shell that starts a grandchild `sleep 600`, so three
processes per worker, all in the worker's session (the grandchild's pid comes back on the
child's stdout, which tells the worker that the whole tree runs).

  orphan_tree.py MODE [--own-group]
    MODE wait:       the worker waits for its child (stays until killed)
    MODE exit:       the worker exits 0 once the grandchild runs, leaving child and grandchild
    MODE fail-first: in the first attempt (TORCHELASTIC_RESTART_COUNT=0) local rank 0 exits 1
                     once every rank's tree runs (ready_<rank> files in the working directory),
                     else as wait
    --own-group:     child and grandchild run in a process group of their own: out of reach of
                     ddprun's killpg, still in the worker's session

As a module: ddprun arguments for such a launch, the launch's descendants (every process with
the test marker in its environment but ddprun and its session keeper), and the kill timing.
"""
import os
import signal
import subprocess
import sys
import time

import ddprun_testlib as lib

WORKER = os.path.abspath(__file__)
KEEPER_NAME = b"ddprun-session-keeper"  # the keeper's argv[0] (launcher/process/session_keeper.h)
PER_WORKER = 3  # worker, child, grandchild


def ddprun_args(nproc, mode, own_group=False, flags=()):
    return (["--standalone", "--nproc_per_node=%d" % nproc] + list(flags) +
            ["--no_python", sys.executable, WORKER, mode] + (["--own-group"] if own_group else []))


def argv0(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0]
    except OSError:
        return None


def keepers(marker):
    return [pid for pid in lib.pids_with_marker(marker) if argv0(pid) == KEEPER_NAME]


def descendants(marker, launcher_pid):
    """The live processes of the launch but ddprun itself and its keeper."""
    return sorted(pid for pid in lib.pids_with_marker(marker)
                  if pid != launcher_pid and argv0(pid) != KEEPER_NAME)


def wait_for_tree(marker, proc, count, timeout=30.0):
    """Waits until `count` descendants run; fails early if ddprun exits. Returns their pids."""
    def ready():
        if proc.poll() is not None:
            raise AssertionError("ddprun exited (%s) before its %d descendants ran" %
                                 (proc.returncode, count))
        pids = descendants(marker, proc.pid)
        return pids if len(pids) >= count else None
    return lib.wait_for(ready, timeout, "%d descendants of ddprun" % count)


def sigkill_and_time(proc, pids, bound):
    """SIGKILLs ddprun; returns the seconds until every one of `pids` is gone (a zombie counts as
    gone), or None when some still live after `bound` seconds."""
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    while time.monotonic() - sent < bound:
        if not any(lib.is_alive(pid) for pid in pids):
            return time.monotonic() - sent
        time.sleep(0.0005)
    return None


def _fail_rank_0_when_all_ready():
    with open("ready_%s" % os.environ["LOCAL_RANK"], "w"):
        pass
    if os.environ["LOCAL_RANK"] != "0":
        return
    ranks = int(os.environ["LOCAL_WORLD_SIZE"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(os.path.exists("ready_%d" % rank) for rank in range(ranks)):
            break
        time.sleep(0.005)
    os._exit(1)


def _worker(mode, own_group):
    child = subprocess.Popen(["/bin/sh", "-c", "sleep 600 & echo $!; wait"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             preexec_fn=os.setpgrp if own_group else None)
    child.stdout.readline()  # the grandchild runs
    if mode == "fail-first" and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
        _fail_rank_0_when_all_ready()
    if mode == "exit":
        os._exit(0)
    return child.wait()


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], "--own-group" in sys.argv[2:]))
