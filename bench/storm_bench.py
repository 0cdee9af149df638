#!/usr/bin/env python3
"""Store storm benchmark: a job's start (N clients connect and meet at one barrier) against
ddprun's store server and PyTorch 2's libuv TCPStore server, in one run; optionally a sustained
mixed load that watches the server's memory.

  bench/storm_bench.py [--build-dir build] [--clients 1000,4000,16000] [--rounds 3]
                       [--idle-clients 4096,16000]
                       [--ddprun-store LABEL=PATH ...] [--no-torch]
                       [--sustain-seconds 600] [--sustain-clients 1000] [--sustain-servers ddprun]

Storm: build/tools/storm_load (bench/storm_load.cc) opens N connections at once from one epoll
loop; every client does PyTorch 2's handshake (VALIDATE + PING) and then the store barrier of
torch.distributed.elastic.utils.store: ADD "storm/count" 1, the client that gets N SETs
"storm/done", every client WAITs on "storm/done". Each run gets a fresh server. Printed per
server: the time from the first connect to the last client released (and to the last handshake
answered, and the median release), the server's CPU time during the run, its peak RSS (VmHWM)
and the peak's growth over the idle server divided by N (RSS per connection), and its RSS with
the N clients connected and idle after the barrier. Rounds are interleaved between servers; the
median round (by release time) is shown, with every round's time and how many connections the
full accept queue dropped in it (the kernel's ListenOverflows; somaxconn bounds the queue, and
a dropped SYN is retransmitted 1 s later, so a run with drops takes a second more or so). Then,
for --idle-clients, the server's RSS with N clients that only connected and did the handshake
(no waiters), per connection.

Sustain (--sustain-seconds S > 0): --sustain-clients clients run a mixed load (storm_load
--sustain-seconds: set/get/add/append/check/compare_set/multi_get/delete on keys of their own, a
barrier round every 40 cycles, a reconnect every 25) while the server's VmRSS is sampled every
second; the largest sample of the last minute is compared with the largest of the first: flat
when within --flat-percent (a run shorter than 4 minutes compares its last quarter with its
second, the first being the ramp). 600 s is the issue's figure; 20 s is a bounded variant for
CI. --fail-on-growth makes a growth beyond --flat-percent the exit status (1).

Both servers get RLIMIT_NOFILE raised for N clients (up to the hard limit, or above it where the
bench is allowed to, as root). More than ~8,000 connections from 127.0.0.1 to one port can run
out of ephemeral ports, so the clients are spread over several loopback destination addresses
(the servers then listen on 0.0.0.0). Not source addresses: PyTorch's server asks for the host
name of every accepted peer (getnameinfo), which /etc/hosts answers for 127.0.0.1 at once and the
DNS server for 127.0.0.2 in 75-100 ms on the VM the figures in bench/README.md come from.

PyTorch 2.x is the venv of scripts/setup-torch2-venv.sh ($DDPRUN_TORCH2_PYTHON, or the path in
<build-dir>/torch2-python). Benchmarks print; they never fail on a timing.
"""
import argparse
import json
import os
import resource
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import store_bench  # noqa: E402
from rendezvous_bench import status_kib  # noqa: E402
from store_bench import cpu_seconds, has_torch, torch2_python  # noqa: E402

# PyTorch's server on a listening socket of our own: bound to the address we choose, so that
# every peer is 127.0.0.1 (see the docstring), and with the largest backlog the kernel allows
# (libuv asks for the same: somaxconn).
TORCH_SERVER = r"""
import datetime, socket, sys
import torch.distributed as d
host = sys.argv[1]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((host, 0))
listener.listen(65535)
port = listener.getsockname()[1]
s = d.TCPStore("127.0.0.1", port, None, True, datetime.timedelta(seconds=600),
               wait_for_workers=False, master_listen_fd=listener.fileno(), use_libuv=True)
assert s.libuvBackend, "not the libuv server"
print(f"listening on {host}:{s.port}", flush=True)
sys.stdin.read()
"""
CONNECTIONS_PER_ADDRESS = 8000
SPEEDUP_TARGET = 2.0


def listen_overflows():
    """The kernel's count of connections a full accept queue dropped (TcpExt ListenOverflows):
    each costs its client a SYN retransmission, 1 s later at first."""
    with open("/proc/net/netstat") as netstat:
        lines = [line.split() for line in netstat if line.startswith("TcpExt:")]
    return int(dict(zip(lines[0], lines[1])).get("ListenOverflows", 0)) if len(lines) == 2 else 0


def raise_nofile(wanted):
    """preexec_fn: RLIMIT_NOFILE up to `wanted`, above the hard limit where allowed."""
    def apply():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft >= wanted:
            return
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(wanted, hard)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return apply


def start(argv, clients):
    return store_bench.start(argv, preexec_fn=raise_nofile(clients + 1024), timeout=180)


stop = store_bench.stop


def read_json_line(process, timeout):
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("{"):
        process.kill()
        _, err = process.communicate()
        raise RuntimeError(f"storm_load failed: {line!r} {err.strip()}")
    return json.loads(line)


def server_argv(server, host, clients):
    if server["kind"] == "libuv":
        return [server["python"], "-c", TORCH_SERVER, host]
    return [server["path"], "serve", "--host", host, "--port", "0",
            "--max-connections", str(max(16384, clients + 64))]


def storm(load_bin, server, clients, args, idle=False):
    addresses = args.addresses or -(-clients // CONNECTIONS_PER_ADDRESS)
    host = "0.0.0.0" if addresses > 1 else "127.0.0.1"
    process, port = start(server_argv(server, host, clients), clients)
    try:
        time.sleep(0.2)
        rss_idle_server = status_kib(process.pid, "VmRSS")
        cpu_before = cpu_seconds(process.pid)
        overflows_before = listen_overflows()
        load = subprocess.Popen([load_bin, "--port", str(port), "--clients", str(clients),
                                 "--addresses", str(addresses), "--timeout", str(args.timeout),
                                 "--hold"] + (["--idle"] if idle else []),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        result = read_json_line(load, args.timeout + 60)
        result["server_cpu_s"] = cpu_seconds(process.pid) - cpu_before
        result["listen_drops"] = listen_overflows() - overflows_before
        time.sleep(0.2)
        result["rss_connected_kib"] = status_kib(process.pid, "VmRSS")
        result["hwm_kib"] = status_kib(process.pid, "VmHWM")
        result["base_kib"] = rss_idle_server
        result["kib_per_conn"] = (result["hwm_kib"] - rss_idle_server) / clients
        load.stdin.close()
        load.wait(timeout=60)
        return result
    finally:
        stop(process)


def mib(kib):
    return f"{kib / 1024:.1f} MiB"


def print_storm(sizes, servers, results, args):
    print(f"storm: N clients connect at once, VALIDATE + PING, ADD + WAIT at one barrier "
          f"(PyTorch 2's store barrier); fresh server per run, median of {args.rounds} "
          f"interleaved rounds; {os.cpu_count()} CPUs")
    print(f"{'N':>6} {'server':16} {'released':>9} {'connected':>9} {'p50':>7} {'srv CPU':>7} "
          f"{'peak RSS':>10} {'RSS/conn':>9} {'RSS N idle':>11}")
    for clients in sizes:
        rows = {}
        for server in servers:
            runs = results[(server["label"], clients)]
            done = [r for r in runs if r["released"] == clients]
            if not done:
                print(f"{clients:6} {server['label']:16} did not finish in {args.timeout:g} s")
                continue
            r = sorted(done, key=lambda r: r["released_s"])[len(done) // 2]
            rows[server["label"]] = r
            print(f"{clients:6} {server['label']:16} {r['released_s']:8.3f}s "
                  f"{r['connected_s']:8.3f}s {r['release_p50_s']:6.3f}s {r['server_cpu_s']:6.2f}s "
                  f"{mib(r['hwm_kib']):>10} {r['kib_per_conn']:6.2f} KiB "
                  f"{mib(r['rss_connected_kib']):>11}"
                  f"  (all: {', '.join('%.3f' % x['released_s'] for x in runs)}; "
                  f"accept queue drops {', '.join(str(x['listen_drops']) for x in runs)})")
        ours, theirs = rows.get(servers[0]["label"]), rows.get("libuv")
        if ours and theirs:
            speedup = theirs["released_s"] / ours["released_s"]
            cpu = theirs["server_cpu_s"] / ours["server_cpu_s"]
            memory = ours["kib_per_conn"] / theirs["kib_per_conn"]
            verdict = ""
            if clients >= 16000:
                verdict = (f"; targets: >= {SPEEDUP_TARGET:g}x faster "
                           f"{'met' if speedup >= SPEEDUP_TARGET else 'NOT met'}, RSS/conn <= "
                           f"libuv's {'met' if memory <= 1.0 else 'NOT met'}")
            print(f"{'':6} {servers[0]['label']}/libuv: {speedup:.2f}x faster, "
                  f"{cpu:.2f}x less server CPU, "
                  f"RSS/conn {memory:.2f}x, peak RSS {ours['hwm_kib'] / theirs['hwm_kib']:.2f}x"
                  f"{verdict}", flush=True)


def print_idle(sizes, servers, results):
    print("idle: N clients connect at once and do the handshake only, then stay connected; "
          "the server's RSS then, less its RSS before")
    print(f"{'N':>6} {'server':16} {'connected':>9} {'RSS':>10} {'RSS/conn':>9} {'drops':>6}")
    for clients in sizes:
        for server in servers:
            r = results[(server["label"], clients)]
            per = (r["rss_connected_kib"] - r["base_kib"]) / clients
            print(f"{clients:6} {server['label']:16} {r['connected_s']:8.3f}s "
                  f"{mib(r['rss_connected_kib']):>10} {per:6.2f} KiB {r['listen_drops']:6}",
                  flush=True)


def sustain(load_bin, server, args):
    clients, seconds = args.sustain_clients, args.sustain_seconds
    process, port = start(server_argv(server, "127.0.0.1", clients), clients)
    samples = []
    try:
        load = subprocess.Popen([load_bin, "--port", str(port), "--clients", str(clients),
                                 "--sustain-seconds", str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        began = time.monotonic()
        cpu_before = cpu_seconds(process.pid)
        while load.poll() is None:
            samples.append(status_kib(process.pid, "VmRSS"))
            time.sleep(max(0.0, began + len(samples) - time.monotonic()))
        out, err = load.communicate()
        if load.returncode != 0:
            raise RuntimeError(f"storm_load --sustain-seconds failed: {err.strip()}")
        result = json.loads(out.strip().splitlines()[-1])
        result["server_us_per_op"] = (cpu_seconds(process.pid) - cpu_before) * 1e6 / result["ops"]
    finally:
        stop(process)
    if args.samples:
        with open(f"{args.samples}.{server['label']}", "w") as out:
            out.write("\n".join(str(kib) for kib in samples) + "\n")
    # A minute each; a short run compares its second quarter (the first is the ramp) with its last.
    window = max(1, int(min(60, seconds / 4)))
    skip = 0 if seconds >= 240 else window
    first, last = max(samples[skip:skip + window]), max(samples[-window:])
    growth = (last - first) * 100.0 / first
    flat = growth <= args.flat_percent
    print(f"sustain {server['label']}: {clients} clients, {result['seconds']:.0f} s, "
          f"{result['ops_per_s']:.0f} ops/s ({result['server_us_per_op']:.2f} us server CPU/op), "
          f"{result['barrier_rounds']} barrier rounds, "
          f"{result['reconnects']} reconnects; RSS max s {skip}-{skip + window} {mib(first)}, "
          f"last {window} s {mib(last)} ({growth:+.1f}%), overall {mib(min(samples))} to "
          f"{mib(max(samples))} in {len(samples)} samples: "
          f"{'flat' if flat else 'GROWING'} (within {args.flat_percent:g}%)", flush=True)
    return flat


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.environ.get("DDPRUN_BUILD_DIR",
                                                              os.path.join(HERE, "..", "build")))
    parser.add_argument("--clients", default="1000,4000,16000", help="comma list of N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds per storm at most")
    parser.add_argument("--addresses", type=int, default=0,
                        help="loopback destinations to spread over (0: one per 8,000 clients)")
    parser.add_argument("--ddprun-store", action="append", default=[], metavar="LABEL=PATH",
                        help="ddprun servers to compare "
                             "(default: ddprun=<build>/tools/ddprun-store)")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch's server out")
    parser.add_argument("--sustain-seconds", type=float, default=0)
    parser.add_argument("--sustain-clients", type=int, default=1000)
    parser.add_argument("--sustain-servers", default="ddprun",
                        help="comma list of server labels for the sustained load (or 'libuv')")
    parser.add_argument("--flat-percent", type=float, default=5.0)
    parser.add_argument("--samples", metavar="PREFIX",
                        help="write each sustained run's VmRSS samples (KiB, one a second) to "
                             "PREFIX.<server>")
    parser.add_argument("--fail-on-growth", action="store_true")
    parser.add_argument("--no-storm", action="store_true", help="only the sustained load")
    parser.add_argument("--idle-clients", default="4096,16000",
                        help="comma list of N for the idle-connection memory run ('' for none)")
    args = parser.parse_args()
    load_bin = os.path.join(args.build_dir, "tools", "storm_load")
    servers = [{"label": "ddprun", "kind": "ddprun",
                "path": os.path.join(args.build_dir, "tools", "ddprun-store")}]
    if args.ddprun_store:
        servers = [{"label": s.split("=", 1)[0], "kind": "ddprun", "path": s.split("=", 1)[1]}
                   for s in args.ddprun_store]
    python = os.environ.get("DDPRUN_TORCH2_PYTHON") or torch2_python()
    torch_file = os.path.join(args.build_dir, "torch2-python")
    if not has_torch(python, 2) and os.path.exists(torch_file):
        python = open(torch_file).read().strip()
    if not args.no_torch and has_torch(python, 2):
        servers.append({"label": "libuv", "kind": "libuv", "python": python})
    elif not args.no_torch:
        print("PyTorch 2.x not found: ddprun only (scripts/setup-torch2-venv.sh)")

    if not args.no_storm:
        sizes = [int(n) for n in args.clients.split(",")]
        results = {(s["label"], n): [] for s in servers for n in sizes}
        for clients in sizes:
            for _ in range(args.rounds):
                for server in servers:
                    results[(server["label"], clients)].append(
                        storm(load_bin, server, clients, args))
        print_storm(sizes, servers, results, args)
        idle_sizes = [int(n) for n in args.idle_clients.split(",") if n]
        idle = {(s["label"], n): storm(load_bin, s, n, args, idle=True)
                for n in idle_sizes for s in servers}
        if idle_sizes:
            print_idle(idle_sizes, servers, idle)
    flat = True
    if args.sustain_seconds > 0:
        labels = args.sustain_servers.split(",")
        for server in (s for s in servers if s["label"] in labels):
            flat = sustain(load_bin, server, args) and flat
    return 1 if args.fail_on_growth and not flat else 0


if __name__ == "__main__":
    sys.exit(main())
