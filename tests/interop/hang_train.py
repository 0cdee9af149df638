"""A small gloo "training" job that can hang, for hang detection tests and bench/hang_bench.py.

Every rank runs --steps steps; a step computes for --step-time seconds, then all_reduces a tensor.
After each step rank 0 saves a checkpoint (<ckpt-dir>/ckpt.pt: the next step and the running
sum); a new attempt (TORCHELASTIC_RESTART_COUNT > 0) resumes from it. Every event is one JSON
line appended (one write, O_APPEND) to the step log, with wall-clock time:
  {"event": "start" (with "process_start": when the process was forked)|"resume"|"step"|"hang_start"|"silent_start"|"silent_end"|"pulse_error"|"done",
   "rank", "local_rank", "attempt", "pid", "time", ...}
"start" is written before `import torch`, so a new attempt's first line is as early as can be.

Modes:
  --hang-rank R --hang-step S  rank R sleeps --hang-seconds (600) inside step S, attempt 0 only
  --hang-node N                instead of --hang-rank: local rank 0 of the agent whose $HANG_NODE
                               is N (its global rank is in the hang_start record)
  --print-thread               the other ranks print from a background thread every 0.3 s while
                               they wait in the step's all_reduce (they print but are stuck)
  --silent-pulse SECONDS       in step --silent-step (1) every rank prints nothing for SECONDS but
                               writes a line to $DDPRUN_PULSE_FILE every 0.3 s (--no-pulse:
                               without the pulses)
  --file-timer AFTER           each step runs inside timer.expires(after=AFTER, scope="train_step")
                               with torchelastic's FileTimerClient($TORCHELASTIC_TIMER_FILE)
  --sleep-first SECONDS        sleep before `import torch` and the first line, every attempt (a
                               slow import or dataset load); records "first_sleep"

Nothing is written to stdout, stderr or $DDPRUN_PULSE_FILE before the first step's line: while
torch is imported and the process group forms (seconds on a loaded machine, minutes on a cold
cache) ddprun's start-up timeout applies, not --hang-timeout. $HANG_NODE, when set, is copied
into every record ("node"). Paths: --ckpt-dir / $HANG_CKPT_DIR and --step-log / $HANG_STEP_LOG
(default: the cwd). After its last line ("finished") a rank leaves with os._exit(0): the
interpreter's own teardown is not what these tests measure (see the end of the file).
"""
import argparse
import errno
import json
import os
import sys
import threading
import time

PULSE_PERIOD = 0.3


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=3)
    p.add_argument("--hang-node", default=None,
                   help="instead of --hang-rank: local rank 0 of the node whose $HANG_NODE is this")
    p.add_argument("--hang-seconds", type=float, default=600.0)
    p.add_argument("--print-thread", action="store_true")
    p.add_argument("--silent-pulse", type=float, default=0.0)
    p.add_argument("--silent-step", type=int, default=1)
    p.add_argument("--no-pulse", action="store_true",
                   help="--silent-pulse without the pulses (a silent rank that is stuck)")
    p.add_argument("--file-timer", type=float, default=0.0)
    p.add_argument("--sleep-first", type=float, default=0.0)
    p.add_argument("--ckpt-dir", default=os.environ.get("HANG_CKPT_DIR", "."))
    p.add_argument("--step-log", default=os.environ.get("HANG_STEP_LOG", "hang_steps.jsonl"))
    return p.parse_args()


ARGS = parse_args()
RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def log(event, **fields):
    record = {"event": event, "rank": RANK, "local_rank": LOCAL_RANK, "attempt": ATTEMPT,
              "pid": os.getpid(), "node": os.environ.get("HANG_NODE"), "time": time.time()}
    record.update(fields)
    fd = os.open(ARGS.step_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def pulse():
    """One line to $DDPRUN_PULSE_FILE (a FIFO ddprun reads). Non-blocking: with no reader the
    open fails (ENXIO) instead of hanging; failures go to the step log, never to the output
    (output is progress too, and would hide a missing pulse)."""
    path = os.environ.get("DDPRUN_PULSE_FILE")
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
    except OSError as e:
        log("pulse_error", error=errno.errorcode.get(e.errno, str(e.errno)), path=path)


def process_start_time():
    """When this process was created (fork), wall clock, to the kernel's 10 ms tick: its age is
    CLOCK_BOOTTIME now minus field 22 of /proc/self/stat (ticks since boot); None if unreadable."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError):
        return None


log("start", argv=sys.argv[1:], process_start=process_start_time())
if ARGS.sleep_first > 0:
    log("first_sleep", seconds=ARGS.sleep_first)
    time.sleep(ARGS.sleep_first)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
WORLD = dist.get_world_size()

timer = None
if ARGS.file_timer > 0:
    import torch.distributed.elastic.timer as timer  # noqa: E402
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))

CKPT = os.path.join(ARGS.ckpt_dir, "ckpt.pt")
start_step, total = 0, torch.zeros(4)
if ATTEMPT > 0 and os.path.exists(CKPT):
    state = torch.load(CKPT)
    start_step, total = state["next_step"], state["total"]
    log("resume", from_step=start_step)

if ARGS.hang_node is not None:
    HANGS = os.environ.get("HANG_NODE") == ARGS.hang_node and LOCAL_RANK == 0
else:
    HANGS = RANK == ARGS.hang_rank

_waiting = threading.Event()  # set while this rank waits in the step's all_reduce


def _print_while_waiting():
    while True:
        _waiting.wait()
        print("rank %d (print thread): still in all_reduce" % RANK, flush=True)
        time.sleep(PULSE_PERIOD)


if ARGS.print_thread:
    threading.Thread(target=_print_while_waiting, daemon=True).start()


def silent_with_pulses(seconds):
    log("silent_start", seconds=seconds)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not ARGS.no_pulse:
            pulse()
        time.sleep(min(PULSE_PERIOD, max(0.0, end - time.monotonic())))
    log("silent_end")


def hang(step):
    log("hang_start", step=step)
    time.sleep(ARGS.hang_seconds)  # hang_train: the hung rank sleeps here


def train_step(step):
    global total
    time.sleep(ARGS.step_time)  # "compute"
    if step == ARGS.hang_step and HANGS and ATTEMPT == 0:
        hang(step)
    if ARGS.silent_pulse > 0 and step == ARGS.silent_step:
        silent_with_pulses(ARGS.silent_pulse)
    t = torch.full((4,), float(RANK + 1) * (step + 1))
    _waiting.set()
    dist.all_reduce(t)  # hang_train: the other ranks wait here
    _waiting.clear()
    total = total + t


for step in range(start_step, ARGS.steps):
    if timer is not None:
        with timer.expires(after=ARGS.file_timer, scope="train_step"):
            train_step(step)
    else:
        train_step(step)
    if RANK == 0:
        tmp = CKPT + ".tmp"
        torch.save({"next_step": step + 1, "total": total}, tmp)
        os.replace(tmp, CKPT)
    log("step", step=step, total=float(total[0]))
    print("rank %d attempt %d step %d done" % (RANK, ATTEMPT, step), flush=True)

dist.barrier()
log("done", total=float(total[0]))
dist.destroy_process_group()
# The last line after the group's teardown, then out at once: the interpreter's own teardown (torch
# 2's atexit handlers and module finalization) took over 2 s beside two burners, a silence the
# tests' short hang timeouts would call a hang (loop runs of issue 37). That silence is real in a
# job and is why a hang timeout should be far above it; these tests are about the training loop.
print("rank %d attempt %d finished: %s" % (RANK, ATTEMPT, float(total[0])), flush=True)
sys.stderr.flush()
os._exit(0)
