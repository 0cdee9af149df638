#!/usr/bin/env python3
"""Store benchmark: the same load (bench/store_load: N clients mixing set/get/add/wait) against
ddprun's server and PyTorch's own servers, in one run. Prints ops/s and p50/p99 latency of each
and the ratio to ddprun.

  bench/store_bench.py [--build-dir build] [--clients 64] [--threads 1] [--server-threads 1,4]
                       [--seconds 5]

The load generator drives its clients from one epoll loop (--threads), each client with one
request in flight, so that on a small machine it does not take the CPU the server needs; the
"CPU us/op" column is the server process's own CPU time per operation, which does not depend
on how fast the load generator is. --server-threads runs ddprun's server with that many io
threads (ddprun-store serve --threads); more than one pays off only on a machine with cores to
spare beyond the load generator's, and PyTorch's servers are compared with the fastest row.

PyTorch 1.13 is Debian's /usr/bin/python3 (legacy protocol, legacy server); PyTorch 2.x is the
venv of scripts/setup-torch2-venv.sh (validated protocol, libuv server), when present.
"""
import argparse
import json
import os
import select
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_SERVER = r"""
import datetime, sys
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=120), wait_for_workers=False)
print(f"listening on 127.0.0.1:{s.port}", flush=True)
sys.stdin.read()
"""


def start(argv, preexec_fn=None, timeout=120):
    """Starts a server that prints "listening on HOST:PORT"; returns (process, port)."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               preexec_fn=preexec_fn)
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"{argv[0]} did not start: {line!r}")
    return process, int(line.strip().rsplit(":", 1)[1])


def stop(process):
    process.terminate()
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def has_torch(python, major):
    if not python or not os.access(python, os.X_OK):
        return False
    out = subprocess.run([python, "-c", "import torch.distributed, torch; print(torch.__version__)"],
                         capture_output=True, text=True, timeout=120)
    return out.returncode == 0 and out.stdout.startswith(f"{major}.")


def torch2_python():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("DDPRUN_TORCH2_PYTHON",
                          os.path.join(cache, "ddprun", "torch2-venv", "bin", "python"))


def cpu_seconds(pid):
    """User + system CPU time the process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(load_bin, server_argv, args, legacy):
    process, port = start(server_argv)
    try:
        argv = [load_bin, "--port", str(port), "--clients", str(args.clients),
                "--threads", str(args.threads), "--seconds", str(args.seconds)]
        argv += ["--legacy"] if legacy else []
        cpu_before = cpu_seconds(process.pid)
        out = subprocess.run(argv, capture_output=True, text=True, timeout=args.seconds + 120)
        server_cpu = cpu_seconds(process.pid) - cpu_before
        if out.returncode != 0:
            raise RuntimeError(f"store_load failed: {out.stderr}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["server_us_per_op"] = server_cpu * 1e6 / max(result["ops"], 1)
        result["server_cores"] = server_cpu / result["seconds"]
        return result
    finally:
        stop(process)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.environ.get("DDPRUN_BUILD_DIR",
                                                              os.path.join(HERE, "..", "build")))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1,
                        help="epoll loops of the load generator (1 leaves a core to the server)")
    parser.add_argument("--server-threads", default="1",
                        help="comma list of ddprun server thread counts to measure, e.g. 1,4")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs alternate between servers; the median round is reported")
    args = parser.parse_args()
    store_bin = os.path.join(args.build_dir, "tools", "ddprun-store")
    load_bin = os.path.join(args.build_dir, "tools", "store_load")
    server_threads = [int(t) for t in args.server_threads.split(",")]

    def ddprun_runs(protocol, legacy):
        return [(f"ddprun {protocol}" + (f" {t}thr" if len(server_threads) > 1 else ""),
                 [store_bin, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", str(t)],
                 legacy, None) for t in server_threads]

    runs = []  # (name, server argv, legacy protocol, protocol of the ddprun runs to compare with)
    runs += ddprun_runs("2.x", False)
    if has_torch("/usr/bin/python3", 1):
        runs += ddprun_runs("1.13", True)
        runs.append(("PyTorch 1.13 server", ["/usr/bin/python3", "-c", TORCH_SERVER], True,
                     "ddprun 1.13"))
    if has_torch(torch2_python(), 2):
        runs.append(("PyTorch 2.x libuv server", [torch2_python(), "-c", TORCH_SERVER], False,
                     "ddprun 2.x"))

    samples = {name: [] for name, *_ in runs}
    for _ in range(args.rounds):  # interleaved, so that a noisy machine hurts every server alike
        for name, argv, legacy, _reference in runs:
            samples[name].append(measure(load_bin, argv, args, legacy))
    results = {name: sorted(runs_of, key=lambda r: r["ops_per_s"])[len(runs_of) // 2]
               for name, runs_of in samples.items()}
    print(f"{args.clients} clients on {args.threads} load thread(s), {args.seconds:g} s per run, "
          f"median of {args.rounds} interleaved rounds, mix set/get/add/wait, "
          f"{os.cpu_count()} CPUs")
    print(f"{'server':26} {'ops/s':>8} {'p50 us':>7} {'p99 us':>7} {'CPU us/op':>9} "
          f"{'cores':>5}  best ddprun vs this")
    for name, _argv, _legacy, reference in runs:
        result = results[name]
        ratio = ""
        if reference:  # the fastest ddprun run of the same protocol
            ours = max((results[n] for n, *_ in runs if n.startswith(reference)),
                       key=lambda r: r["ops_per_s"])
            ratio = (f"{ours['ops_per_s'] / result['ops_per_s']:.2f}x ops/s, "
                     f"{result['server_us_per_op'] / ours['server_us_per_op']:.2f}x less CPU/op, "
                     f"p99 {ours['p99_us']:.0f} vs {result['p99_us']:.0f} us")
        print(f"{name:26} {result['ops_per_s']:8.0f} {result['p50_us']:7.0f} "
              f"{result['p99_us']:7.0f} {result['server_us_per_op']:9.2f} "
              f"{result['server_cores']:5.2f}  {ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
