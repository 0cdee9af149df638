#!/usr/bin/env python3
"""Rendezvous on etcd against the c10d store: one round of ddprun's dynamic rendezvous for N
simulated nodes, on a real etcd cluster and on `ddprun-store serve`, side by side in one run
(issue 14).

  bench/etcd_bench.py [--build-dir build] [--nodes 64,256] [--members 3[,1]] [--repeat 3]
                      [--bound 120] [--nproc 8] [--spread]

Both sides run build/tools/rendezvous_load (bench/rendezvous_load.cc): N threads, each a node
with its own store connection and its own ddprun::rendezvous::DynamicRendezvous (min = max = N,
the round seals when the N-th node arrives), all released at once from a start line; the clock
runs until the last node's Join returned, and the ranks are checked.

- c10d: every node a TcpStoreClient of one fresh `ddprun-store serve` (rendezvous_bench.py's
  ddprun_round, unchanged).
- etcd: every node its own EtcdStore (store/etcd/etcd_store.h: etcd v3's JSON gateway, ADD and
  COMPARE_SET as transactions on the key's mod_revision, waits as watches) of a fresh etcd
  cluster (tests/integration/etcd_cluster.py: Debian's /usr/bin/etcd, --members of them on
  127.0.0.1, each round a new cluster). Every node lists the members in the same order, as
  agents given one --rdzv_endpoint list do, so all of them call the first (--spread: node i
  starts at member i % members).

The sizes run in order, the backends interleaved within each repetition (c10d, then each etcd
cluster size); the median of --repeat runs by time is shown. A round that does not finish in
--bound seconds is stopped (its processes killed) and that backend's larger sizes are skipped.
Printed beside the times: the store operations each node's Join made (as rendezvous_load
counts them), etcd's own calls per node (gRPC calls served, from the members' /metrics, less the
one uncounted range each node makes to connect), and each server's peak RSS (VmHWM; etcd: the
largest member's) and CPU. Nothing here asserts a timing: it fails when a round fails or is
wrong, or a binary (ddprun-store, rendezvous_load, etcd) is missing.
"""
import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import rendezvous_bench as rb  # noqa: E402  (its process helpers and the c10d round)
from etcd_cluster import ETCD, EtcdCluster, etcd_available  # noqa: E402


def etcd_calls(endpoints):
    """gRPC calls each method has been started for, summed over the members' /metrics."""
    calls = {}
    for endpoint in endpoints:
        try:
            with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as reply:
                text = reply.read().decode()
        except (urllib.error.URLError, OSError):
            continue
        for line in text.splitlines():
            if not line.startswith("grpc_server_started_total{"):
                continue
            labels, value = line.rsplit(" ", 1)
            method = labels.split('grpc_method="', 1)[1].split('"', 1)[0]
            calls[method] = calls.get(method, 0) + int(float(value))
    return calls


def etcd_round(args, nodes, members):
    """Returns (result, None), or (None, why) when the round did not finish within args.bound."""
    load_bin = os.path.join(args.build_dir, "tools", "rendezvous_load")
    with EtcdCluster(members) as cluster:
        pids = [proc.pid for proc in cluster.procs]
        rss_before = max(rb.status_kib(pid, "VmRSS") for pid in pids)
        cpu_before = sum(rb.cpu_seconds(pid) for pid in pids)
        calls_before = etcd_calls(cluster.endpoints)
        # The tool's own timeouts lie beyond the bound: the bound stops it, not they.
        argv = [load_bin, "--etcd", ",".join(cluster.endpoints), "--nodes", str(nodes),
                "--nproc", str(args.nproc), "--run-id", args.run_id,
                "--timeout", str(args.bound + 60)] + (["--spread"] if args.spread else [])
        children_before = children_cpu()
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=args.bound,
                                 preexec_fn=rb.die_with_parent)  # killed on the timeout
        except subprocess.TimeoutExpired:
            return None, f"did not finish in {args.bound:g} s"
        nodes_cpu = children_cpu() - children_before  # the members are not reaped yet
        lines = out.stdout.strip().splitlines()
        if not lines:
            raise RuntimeError(f"rendezvous_load --etcd failed ({out.returncode}): "
                               f"{out.stderr.strip()[-2000:]}")
        result = json.loads(lines[-1])
        result["server_cpu_s"] = sum(rb.cpu_seconds(pid) for pid in pids) - cpu_before
        result["nodes_cpu_s"] = nodes_cpu
        result["server_hwm_kib"] = max(rb.status_kib(pid, "VmHWM") for pid in pids)
        result["server_rss_before_kib"] = rss_before
        after = etcd_calls(cluster.endpoints)
        calls = {m: after.get(m, 0) - calls_before.get(m, 0) for m in after}
        calls["Range"] = calls.get("Range", 0) - nodes  # each node's connecting CHECK
        result["etcd_calls"] = calls
        return result, None


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def c10d_round(args, nodes):
    children_before = children_cpu()
    result = rb.ddprun_round(args, nodes)
    # The load tool and the store server (reaped by the round): less the server's CPU.
    result["nodes_cpu_s"] = children_cpu() - children_before - result["server_cpu_s"]
    if not result["ok"] and "timeout" in result.get("error", "").lower():
        return None, f"did not finish in {args.bound:g} s ({result['error'][:120]})"
    return result, None


def median(runs):
    runs = sorted(runs, key=lambda r: r["seconds"])
    return runs[len(runs) // 2]


def describe(result):
    req = result.get("requests_per_node", {})
    text = (f"{result['seconds']:.3f} s, ok={result['ok']}, "
            f"{req.get('median', '?')} store ops/node, "
            f"CPU: server {result['server_cpu_s']:.2f} s, nodes {result['nodes_cpu_s']:.2f} s; "
            f"server {rb.mib(result['server_hwm_kib'])} MiB")
    calls = result.get("etcd_calls")
    if calls:
        text += ", etcd calls/node " + ", ".join(
            f"{method} {count / result['nodes']:.1f}" for method, count in sorted(calls.items())
            if count)
    if not result["ok"]:
        text += f"; NOT ok: {result.get('failed', 0)} failed: {result.get('error', '')[:300]}"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.environ.get("DDPRUN_BUILD_DIR",
                                                              os.path.join(HERE, "..", "build")))
    parser.add_argument("--nodes", default="64,256", help="comma list of node counts")
    parser.add_argument("--members", default="3",
                        help="comma list of etcd cluster sizes, each its own column (e.g. 3,1)")
    parser.add_argument("--nproc", type=int, default=8, help="workers per node")
    parser.add_argument("--run-id", default="rdzv-etcd-bench")
    parser.add_argument("--bound", type=float, default=120,
                        help="seconds a round may take before it is stopped")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds per size and backend (fresh servers each); the median is "
                             "shown")
    parser.add_argument("--spread", action="store_true",
                        help="etcd: node i calls member i %% members first")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    clusters = [int(m) for m in args.members.split(",")]
    missing = [os.path.join(args.build_dir, "tools", b) for b in ("ddprun-store", "rendezvous_load")
               if not os.access(os.path.join(args.build_dir, "tools", b), os.X_OK)]
    if not etcd_available():
        missing.append(f"{ETCD} (Debian's etcd-server: make deps)")
    if missing:
        print(f"etcd_bench: missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    rb.raise_fd_limit(max(sizes) * 2 + 512)  # inherited by the servers and the load tool
    # SIGTERM unwinds like ^C: the clusters' and servers' cleanup runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    backends = ["c10d"] + [f"etcd{m}" for m in clusters]
    names = {"c10d": "c10d (ddprun-store)"}
    names.update({f"etcd{m}": f"etcd, {m} member{'s' if m > 1 else ''}" for m in clusters})
    version = subprocess.run([ETCD, "--version"], capture_output=True, text=True).stdout
    version = version.split("\n", 1)[0].replace("etcd Version:", "").strip() or "?"
    print(f"one rendezvous round, min = max = N nodes x {args.nproc} workers, each node its own "
          f"store client, everything on 127.0.0.1, {os.cpu_count()} CPUs; etcd {version}; "
          f"median of {args.repeat}, backends interleaved, bound {args.bound:g} s"
          + (", etcd nodes spread over the members" if args.spread else ""), flush=True)

    rows, stopped, failed = [], {}, False
    for nodes in sizes:
        runs = {backend: [] for backend in backends}
        for repetition in range(args.repeat):
            for backend in backends:
                if backend in stopped:
                    continue
                if backend == "c10d":
                    result, why = c10d_round(args, nodes)
                else:
                    result, why = etcd_round(args, nodes, int(backend[4:]))
                if result is None:
                    stopped[backend] = (nodes, why)
                    print(f"  {nodes} nodes, {names[backend]}: {why}; larger sizes skipped",
                          flush=True)
                    continue
                failed |= not result["ok"]
                runs[backend].append(result)
                print(f"  {nodes} nodes, run {repetition + 1}, {names[backend]}: "
                      f"{describe(result)}", flush=True)
        rows.append((nodes, {b: median(r) for b, r in runs.items() if r}))

    print()
    header = f"{'nodes':>6} {'c10d s':>8}"
    for backend in backends[1:]:
        header += f" {backend + ' s':>9} {backend + '/c10d':>10}"
    header += f"  {'store ops/node':>14}"
    header += "".join(f" {b + ' calls/node':>17}" for b in backends[1:])
    header += f"  {'c10d MiB':>8}" + "".join(f" {b + ' MiB':>9}" for b in backends[1:])
    print(header)
    def missing_time(backend, nodes):  # stopped at this size, or skipped after it
        return f">{args.bound:g}" if stopped.get(backend, (nodes,))[0] == nodes else "skipped"

    for nodes, best in rows:
        c10d = best.get("c10d")
        c10d_s = f"{c10d['seconds']:.3f}" if c10d else missing_time("c10d", nodes)
        line = f"{nodes:>6} {c10d_s:>8}"
        for backend in backends[1:]:
            theirs = best.get(backend)
            if theirs:
                ratio = f"{theirs['seconds'] / c10d['seconds']:.0f}x" if c10d else "-"
                line += f" {theirs['seconds']:>9.3f} {ratio:>10}"
            else:
                line += f" {missing_time(backend, nodes):>9} {'-':>10}"
        ops = "/".join(str(best[b]["requests_per_node"]["median"]) if b in best else "-"
                       for b in backends)
        line += f"  {ops:>14}"
        for backend in backends[1:]:
            calls = best[backend]["etcd_calls"] if backend in best else None
            line += f" {'%.1f' % (sum(calls.values()) / nodes) if calls else '-':>17}"
        line += "".join(f" {rb.mib(best[b]['server_hwm_kib']) if b in best else '-':>{w}}"
                        for b, w in [("c10d", 9)] + [(b, 9) for b in backends[1:]])
        print(line)
    print("store ops/node: the median node's store operations (" + "/".join(backends) + "; a GET "
          "counts 2); etcdN calls/node: gRPC calls the N members served per node (Range, Txn, "
          "Put, Watch streams); MiB: the server's peak RSS (etcd: its largest member's)")
    for backend, (nodes, why) in stopped.items():
        print(f"{names[backend]}: stopped at {nodes} nodes: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
