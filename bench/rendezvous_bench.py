#!/usr/bin/env python3
"""Rendezvous benchmark: one round of the dynamic (elastic) rendezvous at scale, ddprun against
PyTorch, side by side in one run. Prints, per node count, the seconds from "every node is
connected and starts joining" to "every node has its place", and each store server's peak RSS.

  bench/rendezvous_bench.py [--build-dir build] [--nodes 64,256,1024,4096] [--nproc 8]
                            [--bound 120] [--repeat 3] [--torch-procs 4] [--torch-as-is] [--no-torch]

ddprun: build/tools/rendezvous_load runs N simulated nodes, each a thread with its own TCP
connection to one `ddprun-store serve` and its own ddprun::rendezvous::DynamicRendezvous
(min = max = N, so the round seals when the N-th node arrives), and checks the ranks it got.

PyTorch: N threads spread over --torch-procs processes (default 4) of the PyTorch 2 venv
(scripts/setup-torch2-venv.sh, or $DDPRUN_TORCH2_PYTHON), each node with its own
torch.distributed.TCPStore client of one TCPStore server (libuv), its own C10dRendezvousBackend
and its own DynamicRendezvousHandler (create_handler, min = max = N, the same run id), all
calling next_rendezvous() at once. A size
that does not finish within --bound seconds is stopped, and the larger ones are skipped.
TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 keeps torch's rank 0 from opening a second store server
(on every interface) after the round: what remains is the MASTER_ADDR/PORT exchange, which
ddprun's round does not include (its agent publishes the master address after Join).

All of PyTorch's simulated nodes share this machine's cores, where real nodes would each have
their own, so whatever CPU a node spends is summed here. One cost is pure overhead: every state
sync of torch's handler names its log event with get_method_name(), two inspect.stack() calls
(about 0.6 ms of CPU, for a record the default NullHandler drops). Summed over hundreds of
threads it starves the compare-and-set loop until heartbeats expire and nodes are dropped from
the round faster than they join. By default the workers replace get_method_name with a constant
(the protocol is unchanged), which is the favourable case for PyTorch; --torch-as-is runs it
unmodified.

Every server listens on 127.0.0.1 only and every client connects there (but see torch_nodes on
the host name lookups torch's client makes). Nothing here asserts a timing: the targets of
the issue are printed next to the numbers.
"""
import argparse
import json
import os
import resource
import select
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (64, 256, 1024, 4096)
DDPRUN_TARGETS = {1024: 1.0, 4096: 3.0}  # seconds, on this 2-core machine
SPEEDUP_TARGET = 10.0
# PyTorch's TCPStore server (libuv) on a socket bound here to 127.0.0.1 only: left to itself it
# listens on every interface, and on "::" every peer is ::ffff:127.0.0.1, whose host name it
# then asks the DNS server for (see torch_nodes).
TORCH_SERVER = r"""
import datetime, socket, sys
import torch.distributed as d
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(4096)
port = listener.getsockname()[1]
s = d.TCPStore("127.0.0.1", port, None, True, datetime.timedelta(seconds=600),
               wait_for_workers=False, master_listen_fd=listener.fileno())
print(f"listening on 127.0.0.1:{s.port}", flush=True)
sys.stdin.read()
"""


# ---------------------------------------------------------------------------------------------
# The PyTorch side of one size, run by the venv's python: `--torch-nodes` mode.

def torch_nodes(args):
    """Connects args.count nodes, prints "ready", waits for "go" on stdin, joins, prints JSON."""
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    if args.light:  # not --torch-as-is: see the module docstring
        import torch.distributed.elastic.rendezvous.dynamic_rendezvous as dynamic_rendezvous
        dynamic_rendezvous.get_method_name = lambda depth=2: "bench"
    threading.stack_size(1 << 20)

    def node(_):
        store = dist.TCPStore("127.0.0.1", args.port, is_master=False,
                              timeout=timedelta(seconds=args.timeout))
        backend = C10dRendezvousBackend(store, args.run_id)
        params = RendezvousParameters("c10d", f"127.0.0.1:{args.port}", args.run_id,
                                      args.total, args.total, local_addr="127.0.0.1",
                                      join_timeout=int(args.timeout))
        return create_handler(store, backend, params)

    # Each TCPStore client looks up the host name of the address it connects to, ::ffff:127.0.0.1
    # (getnameinfo, for a log line; /etc/hosts does not answer it, so it goes to the DNS server):
    # a slow or rate-limiting resolver makes that 0.2 to 5 s a connection, hence 64 threads and,
    # from the bench, RES_OPTIONS="timeout:1 attempts:1". The round itself opens no connection.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(64) as pool:
        handlers = list(pool.map(node, range(args.count)))

    go = threading.Event()
    results = [None] * len(handlers)

    def join(index):
        go.wait()
        try:
            info = handlers[index].next_rendezvous()
            results[index] = {"rank": info.rank, "world": info.world_size,
                              "end": time.monotonic()}
        except Exception as error:  # reported, not raised: the bench counts failures
            results[index] = {"error": f"{type(error).__name__}: {error}", "end": time.monotonic()}

    threads = [threading.Thread(target=join, args=(i,), daemon=True) for i in range(len(handlers))]
    for thread in threads:
        thread.start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        os._exit(1)
    # Never outlive the bench (its pipe closes) or the bound.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(3)), daemon=True).start()
    threading.Timer(args.timeout, lambda: os._exit(4)).start()
    go.set()
    for thread in threads:
        thread.join()
    print(json.dumps(results), flush=True)
    os._exit(0)  # the handlers' keep-alive timers would keep the process up


# ---------------------------------------------------------------------------------------------
# Process helpers.

def die_with_parent():
    """preexec_fn: SIGKILL the child when the bench dies, however it dies (Linux)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def start_server(argv, stderr=None):
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               stderr=stderr, preexec_fn=die_with_parent)
    ready, _, _ = select.select([process.stdout], [], [], 120)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        kill(process)
        raise RuntimeError(f"{argv[0]} did not start: {line!r}")
    return process, int(line.strip().rsplit(":", 1)[1])


def kill(process):
    if process.poll() is None:
        process.kill()
    try:
        process.communicate(timeout=30)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def stop(process):
    if process.poll() is None:
        process.terminate()
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        kill(process)


def status_kib(pid, field):
    """A /proc/<pid>/status field in KiB (VmHWM: peak RSS, VmRSS: now)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard == resource.RLIM_INFINITY else max(soft, min(hard, needed))
    if target != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if hard != resource.RLIM_INFINITY and hard < needed:
        print(f"warning: RLIMIT_NOFILE hard limit {hard} < {needed}: the largest sizes may fail",
              file=sys.stderr)


def torch2_python():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("DDPRUN_TORCH2_PYTHON",
                          os.path.join(cache, "ddprun", "torch2-venv", "bin", "python"))


def torch_version(python):
    if not python or not os.access(python, os.X_OK):
        return None
    try:
        out = subprocess.run([python, "-c", "import torch.distributed, torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    version = out.stdout.strip()
    return version if out.returncode == 0 and version.startswith("2.") else None


# ---------------------------------------------------------------------------------------------
# One round of each.

def ddprun_round(args, nodes):
    store_bin = os.path.join(args.build_dir, "tools", "ddprun-store")
    load_bin = os.path.join(args.build_dir, "tools", "rendezvous_load")
    server, port = start_server([store_bin, "serve", "--host", "127.0.0.1", "--port", "0"])
    try:
        rss_before = status_kib(server.pid, "VmRSS")
        cpu_before = cpu_seconds(server.pid)
        out = subprocess.run([load_bin, "--host", "127.0.0.1", "--port", str(port),
                              "--nodes", str(nodes), "--nproc", str(args.nproc),
                              "--run-id", args.run_id, "--timeout", str(args.bound)],
                             capture_output=True, text=True, timeout=args.bound + 60,
                             preexec_fn=die_with_parent)
        lines = out.stdout.strip().splitlines()
        if not lines:
            raise RuntimeError(f"rendezvous_load failed ({out.returncode}): {out.stderr.strip()}")
        result = json.loads(lines[-1])
        result["server_cpu_s"] = cpu_seconds(server.pid) - cpu_before
        result["server_hwm_kib"] = status_kib(server.pid, "VmHWM")
        result["server_rss_before_kib"] = rss_before
        return result
    finally:
        stop(server)


def torch_round(args, python, nodes):
    """Returns (result, None), or (None, why) when the round did not finish within args.bound."""
    # torch's c10d logs a warning for every failed host name lookup: kept out of the table.
    log = tempfile.TemporaryFile(mode="w+")
    server, port = start_server([python, "-c", TORCH_SERVER], stderr=log)
    workers = []
    try:
        rss_before = status_kib(server.pid, "VmRSS")
        procs = max(1, min(args.torch_procs, nodes))
        env = dict(os.environ, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
                   RES_OPTIONS="timeout:1 attempts:1")
        setup_began = time.monotonic()
        for p in range(procs):
            count = nodes // procs + (1 if p < nodes % procs else 0)
            workers.append(subprocess.Popen(
                [python, os.path.abspath(__file__), "--torch-nodes", "--port", str(port),
                 "--count", str(count), "--total", str(nodes), "--run-id", args.run_id,
                 "--timeout", str(args.bound + 60)] + ([] if args.torch_as_is else ["--light"]),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                preexec_fn=die_with_parent))
        for worker in workers:  # connecting the clients is not part of the round
            left = max(1.0, setup_began + args.setup_bound - time.monotonic())
            ready, _, _ = select.select([worker.stdout], [], [], left)
            line = worker.stdout.readline() if ready else ""
            if line.strip() != "ready":
                if worker.poll() is not None:
                    log.seek(0)
                    tail = [l for l in log.read().splitlines() if "cannot be retrieved" not in l]
                    raise RuntimeError("torch nodes failed: " + "\n".join(tail[-15:]))
                return None, f"its {nodes} nodes were not connected within {args.setup_bound:g} s"
        setup_seconds = time.monotonic() - setup_began
        cpu_before = cpu_seconds(server.pid)
        clients_cpu_before = sum(cpu_seconds(worker.pid) for worker in workers)
        began = time.monotonic()
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = []
        for worker in workers:
            left = began + args.bound - time.monotonic()
            ready, _, _ = select.select([worker.stdout], [], [], max(0.0, left))
            if not ready:
                return None, f"did not finish in {args.bound:g} s"
            line = worker.stdout.readline()
            if not line:
                raise RuntimeError("a torch node process died")
            results += json.loads(line)
        seconds = max(r["end"] for r in results) - began
        clients_cpu = sum(cpu_seconds(worker.pid) for worker in workers) - clients_cpu_before
        errors = [r["error"] for r in results if "error" in r]
        ranks = sorted(r["rank"] for r in results if "rank" in r)
        ok = (not errors and ranks == list(range(nodes)) and
              all(r["world"] == nodes for r in results))
        return {"nodes": nodes, "seconds": seconds, "ok": ok, "failed": len(errors),
                "error": errors[0] if errors else "",
                "server_cpu_s": cpu_seconds(server.pid) - cpu_before, "clients_cpu_s": clients_cpu,
                "setup_s": setup_seconds,
                "server_hwm_kib": status_kib(server.pid, "VmHWM"),
                "server_rss_before_kib": rss_before}, None
    finally:
        for worker in workers:
            kill(worker)
        stop(server)
        log.close()


# ---------------------------------------------------------------------------------------------

def mib(kib):
    return f"{kib / 1024:.0f}"


def main():
    if "--torch-nodes" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--torch-nodes", action="store_true")
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--count", type=int, required=True)
        parser.add_argument("--total", type=int, required=True)
        parser.add_argument("--run-id", required=True)
        parser.add_argument("--timeout", type=float, default=180)
        parser.add_argument("--light", action="store_true")
        return torch_nodes(parser.parse_args())

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.environ.get("DDPRUN_BUILD_DIR",
                                                              os.path.join(HERE, "..", "build")))
    parser.add_argument("--nodes", default=",".join(map(str, SIZES)),
                        help="comma list of node counts")
    parser.add_argument("--nproc", type=int, default=8, help="workers per node")
    parser.add_argument("--run-id", default="rdzv-bench")
    parser.add_argument("--bound", type=float, default=120,
                        help="seconds a round may take before it is stopped")
    parser.add_argument("--setup-bound", type=float, default=300,
                        help="seconds PyTorch's nodes may take to connect, before the round")
    parser.add_argument("--repeat", type=int, default=3,
                        help="ddprun rounds per size (fresh server each); the median is shown")
    parser.add_argument("--torch-procs", type=int, default=4,
                        help="processes the PyTorch nodes are spread over (threads in each)")
    parser.add_argument("--torch-as-is", action="store_true",
                        help="do not stub get_method_name in torch's dynamic_rendezvous (see the "
                             "module docstring)")
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    for binary in ("ddprun-store", "rendezvous_load"):
        path = os.path.join(args.build_dir, "tools", binary)
        if not os.access(path, os.X_OK):
            print(f"rendezvous_bench: {path} is missing (build the {binary} target)",
                  file=sys.stderr)
            return 1
    raise_fd_limit(max(sizes) * 2 + 512)

    python = None if args.no_torch else torch2_python()
    version = None if args.no_torch else torch_version(python)
    if not args.no_torch and not version:
        print(f"PyTorch 2 venv not found at {python} (make torch2-venv): ddprun only")

    print(f"one rendezvous round, min = max = N nodes x {args.nproc} workers, each node its own "
          f"TCP client of one store on 127.0.0.1, {os.cpu_count()} CPUs")
    print(f"ddprun: median of {args.repeat}; PyTorch {version or '-'}: DynamicRendezvousHandler "
          f"+ C10dRendezvousBackend, {args.torch_procs} process(es), once, bound {args.bound:g} s, "
          f"{'as is' if args.torch_as_is else 'get_method_name stubbed'}")
    rows = []
    torch_stopped_at, torch_why = None, ""
    for nodes in sizes:
        runs = sorted((ddprun_round(args, nodes) for _ in range(args.repeat)),
                      key=lambda r: r["seconds"])
        ours = runs[len(runs) // 2]
        ours["all_ok"] = all(r["ok"] for r in runs)
        theirs = None
        if version and torch_stopped_at is None:
            theirs, why = torch_round(args, python, nodes)
            if theirs is None:
                torch_stopped_at, torch_why = nodes, why
                print(f"PyTorch, {nodes} nodes: {why}; larger sizes skipped", flush=True)
        rows.append((nodes, ours, theirs))
        req = ours.get("requests_per_node", {})
        print(f"  {nodes} nodes: ddprun {ours['seconds']:.3f} s (runs "
              f"{', '.join('%.3f' % r['seconds'] for r in runs)}), ok={ours['all_ok']}, "
              f"{req.get('median', '?')} requests/node (max {req.get('max', '?')}), server "
              f"{ours['server_cpu_s']:.2f} s CPU"
              + (f"; PyTorch {theirs['seconds']:.2f} s, ok={theirs['ok']}, server "
                 f"{theirs['server_cpu_s']:.2f} s CPU, its nodes {theirs['clients_cpu_s']:.1f} s "
                 f"CPU (connecting them took {theirs['setup_s']:.1f} s)" if theirs else ""),
              flush=True)
        for result, name in ((ours, "ddprun"), (theirs, "PyTorch")):
            if result and not result["ok"]:
                print(f"    {name} round NOT ok: {result.get('failed', 0)} failed: "
                      f"{result.get('error', '')[:300]}")

    print()
    print(f"{'nodes':>6} {'ddprun s':>9} {'torch s':>9} {'torch/ddprun':>12} "
          f"{'ddprun srv MiB':>14} {'torch srv MiB':>13}  targets")
    for nodes, ours, theirs in rows:
        targets = []
        if nodes in DDPRUN_TARGETS:
            limit = DDPRUN_TARGETS[nodes]
            targets.append(f"ddprun < {limit:g} s: {'met' if ours['seconds'] < limit else 'MISSED'}")
        if theirs:
            ratio = theirs["seconds"] / ours["seconds"]
            torch_s, ratio_s = f"{theirs['seconds']:.2f}", f"{ratio:.0f}x"
            torch_mib = f"{mib(theirs['server_hwm_kib'])}"
            targets.append(f">= {SPEEDUP_TARGET:g}x: {'met' if ratio >= SPEEDUP_TARGET else 'MISSED'}")
        elif torch_stopped_at is not None and nodes >= torch_stopped_at:
            torch_s, ratio_s, torch_mib = f">{args.bound:g}", "-", "-"
            targets.append(f"torch: {torch_why}" if nodes == torch_stopped_at else
                           f"torch skipped (at {torch_stopped_at} nodes it {torch_why})")
        else:
            torch_s, ratio_s, torch_mib = "-", "-", "-"
        if not ours["all_ok"]:
            targets.append("ddprun round NOT ok")
        print(f"{nodes:>6} {ours['seconds']:>9.3f} {torch_s:>9} {ratio_s:>12} "
              f"{mib(ours['server_hwm_kib']):>14} {torch_mib:>13}  {'; '.join(targets)}")
    print("srv MiB: the store server's peak RSS (VmHWM) after the round; before it: ddprun "
          f"{mib(rows[0][1]['server_rss_before_kib'])} MiB"
          + (f", PyTorch (interpreter + torch) {mib(next(t for _, _, t in rows if t)['server_rss_before_kib'])} MiB"
             if any(t for _, _, t in rows) else ""))
    # A wrong ddprun round is a failure, as a failed launch is for the other benches.
    return 0 if all(ours["all_ok"] for _, ours, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
