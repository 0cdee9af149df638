"""Worker start time, warm against cold (issue 40): a fork request to the warm pool (torch
preloaded) until the script's first line arrives, against `python -u -c "import torch;
print(...)"` from spawn to its line. Medians of --runs runs per interpreter.

With --attempt0 N, the choice for attempt 0 instead: N workers started at once, each exec'd
(ddprun's choice: cold, the pool preloading beside them at idle priority), against the pool
started first and the N workers forked from it once it is ready (the alternative): from the
start until every worker printed its line after `import torch`.

    python3 bench/warm_pool_start.py [--runs 5] [--attempt0 N] PYTHON...
"""
import argparse
import array
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

POOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher", "process",
                    "warm_pool.py")
FIRST_LINE = "import torch\nprint('up')\n"
DEADLINE = 300.0


def read_line(fd):
    data = b""
    while not data.endswith(b"\n"):
        if not select.select([fd], [], [], DEADLINE)[0]:
            raise SystemExit("no line in %.0f s" % DEADLINE)
        chunk = os.read(fd, 4096)
        if not chunk:
            raise SystemExit("EOF before the first line")
        data += chunk
    return data


def cold(python):
    read_end, write_end = os.pipe()
    start = time.monotonic()
    proc = subprocess.Popen([python, "-u", "-c", FIRST_LINE], stdout=write_end)
    os.close(write_end)
    read_line(read_end)
    elapsed = time.monotonic() - start
    proc.wait()
    os.close(read_end)
    return elapsed


def start_pool(python, idle=True):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with open(POOL) as f:
        text = f.read()
    config = json.dumps({"fd": theirs.fileno(), "path0": os.getcwd(), "preload": ["torch"],
                         "idle": idle})
    proc = subprocess.Popen([python, "-u", "-c", text, config], pass_fds=[theirs.fileno()],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    theirs.close()
    ready = json.loads(ours.recv(1 << 16))
    if not ready.get("ready"):
        raise SystemExit("pool not ready: %s" % ready)
    return proc, ours, ready


def warm(sock, script, ident):
    read_end, write_end = os.pipe()
    request = {"fork": {"id": ident, "argv": [script], "env": dict(os.environ), "cwd": "",
                        "mode": "path", "target": script}}
    start = time.monotonic()
    sock.sendmsg([json.dumps(request).encode()],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, write_end, 2]))])
    os.close(write_end)
    read_line(read_end)
    elapsed = time.monotonic() - start
    while "exit" not in json.loads(sock.recv(1 << 16)):
        pass
    os.close(read_end)
    return elapsed


def cold_attempt(python, workers):
    """N exec'd workers at once: the start until the last one's line after `import torch`."""
    pipes = [os.pipe() for _ in range(workers)]
    start = time.monotonic()
    procs = [subprocess.Popen([python, "-u", "-c", FIRST_LINE], stdout=w) for _, w in pipes]
    for _, write_end in pipes:
        os.close(write_end)
    for read_end, _ in pipes:
        read_line(read_end)
    elapsed = time.monotonic() - start
    for proc in procs:
        proc.wait()
    for read_end, _ in pipes:
        os.close(read_end)
    return elapsed


def pool_attempt(python, workers, script):
    """The pool started, then N workers forked from it once ready: the start until the last
    worker's line (a script whose `import torch` is a dictionary lookup by then)."""
    start = time.monotonic()
    proc, sock, _ = start_pool(python, idle=False)  # attempt 0 waits for it: full priority
    try:
        pipes = []
        for ident in range(workers):
            read_end, write_end = os.pipe()
            request = {"fork": {"id": ident, "argv": [script], "env": dict(os.environ),
                                "cwd": "", "mode": "path", "target": script}}
            sock.sendmsg([json.dumps(request).encode()],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                           array.array("i", [0, write_end, 2]))])
            os.close(write_end)
            pipes.append(read_end)
        for read_end in pipes:
            read_line(read_end)
        elapsed = time.monotonic() - start
        for read_end in pipes:
            os.close(read_end)
    finally:
        sock.close()
        proc.wait(DEADLINE)
    return elapsed


def measure_attempt0(python, runs, workers):
    with tempfile.NamedTemporaryFile("w", suffix=".py") as script:
        script.write(FIRST_LINE)
        script.flush()
        cold_s, pool_s = [], []
        for _ in range(runs):  # interleaved
            cold_s.append(cold_attempt(python, workers))
            pool_s.append(pool_attempt(python, workers, script.name))
    print("%s: attempt 0 of %d workers to their line after import torch: exec'd %.2f s, forked "
          "from a pool started first %.2f s (medians of %d)" % (
              python, workers, statistics.median(cold_s), statistics.median(pool_s), runs))
    print("  exec'd: %s\n  pool:   %s" % (" ".join("%.2f" % s for s in cold_s),
                                         " ".join("%.2f" % s for s in pool_s)))


def measure(python, runs):
    with tempfile.NamedTemporaryFile("w", suffix=".py") as script:
        script.write(FIRST_LINE)
        script.flush()
        cold_s = [cold(python) for _ in range(runs)]
        proc, sock, ready = start_pool(python)
        try:
            warm_s = [warm(sock, script.name, i) for i in range(runs)]
        finally:
            sock.close()
            proc.wait(DEADLINE)
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    print("%s (torch %s, python %s): cold %.3f s, warm %.4f s (medians of %d; preload %.2f s)"
          % (python, version, ready["python"], statistics.median(cold_s),
             statistics.median(warm_s), runs, ready["preload_s"]))
    print("  cold: %s\n  warm: %s" % (" ".join("%.3f" % s for s in cold_s),
                                      " ".join("%.4f" % s for s in warm_s)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--attempt0", type=int, metavar="N",
                        help="measure attempt 0 of N workers: exec'd, or forked from the pool")
    parser.add_argument("pythons", nargs="+")
    args = parser.parse_args()
    for python in args.pythons:
        if args.attempt0:
            measure_attempt0(python, args.runs, args.attempt0)
        else:
            measure(python, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
