"""--health_port: the agent's /healthz and /metrics over real HTTP (urllib, stdlib only).

Each worker (fake_worker) writes its environment to <tmp>/envs/env_<pid>.json when it starts,
then waits for <tmp>/release: the test observes a running job and ends it by creating the file.
The endpoint's address comes from the event log's `health_endpoint` line (port 0: ephemeral).
"""
import glob
import json
import os
import re
import signal
import socket
import time
import unittest
import urllib.error
import urllib.request

import ddprun_testlib as lib

INTERVAL = 0.5
ATTEMPTS = 2
HEARTBEAT_TIMEOUT = INTERVAL * ATTEMPTS

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})?'
                    r' (-?[0-9.e+-]+|NaN|\+Inf|-Inf)( -?[0-9]+)?$')
EXPECTED_SERIES = (
    "ddprun_rounds_joined_total", 'ddprun_restarts_total{cause="failure"}',
    'ddprun_restarts_total{cause="membership"}', "ddprun_node_losses_total",
    "ddprun_worker_failures_total", "ddprun_hangs_total", "ddprun_workers_running",
    "ddprun_round", "ddprun_world_size", "ddprun_restart_budget_remaining",
    "ddprun_last_progress_timestamp_seconds", "ddprun_healthy", "ddprun_uptime_seconds",
    "ddprun_store_connections", "ddprun_store_requests_total")


def parse_metrics(text):
    """The Prometheus text format (0.0.4): {"name{labels}": value}; fails on a malformed line or
    a sample without a # TYPE for its family."""
    types, samples = {}, {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, "not a sample line: %r" % line
        name = match.group(1)
        assert name in types, "no # TYPE for %s" % name
        samples[name + (match.group(2) or "")] = float(match.group(3))
    return samples


def get(address, path, timeout=5.0):
    """(status, body) of GET http://address/path; raises on a connection failure or timeout."""
    try:
        with urllib.request.urlopen("http://%s%s" % (address, path), timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def events_of(log):
    try:
        return [json.loads(line) for line in lib.read_file(log).splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


class HealthTest(lib.DdprunTestCase):

    def setUp(self):
        super().setUp()
        self.envs = self.path("envs")
        os.mkdir(self.envs)
        self.release = self.path("release")

    def worker(self):
        return [lib.FAKE_WORKER, "--env-json-dir", self.envs, "--wait-for-file", self.release]

    def endpoint(self, proc, log):
        """The address the agent logged, once it did."""
        def logged():
            if proc.poll() is not None:
                raise AssertionError("ddprun exited early\n" + self.finish(proc).describe())
            found = [e for e in events_of(log) if e["event"] == "health_endpoint"]
            return found[0]["address"] if found else None
        return lib.wait_for(logged, 30, "the health_endpoint event in " + log)

    def wait_health(self, address, what, condition, timeout=30):
        def ready():
            status, body = get(address, "/healthz")
            health = json.loads(body)
            return health if condition(status, health) else None
        return lib.wait_for(ready, timeout, what)

    def wait_workers(self, count):
        lib.wait_for(lambda: len(glob.glob(os.path.join(self.envs, "env_*.json"))) >= count, 30,
                     "%d workers started" % count)

    def finish_released(self, procs):
        with open(self.release, "w") as f:
            f.write("go")
        for proc in procs:
            result = self.finish(proc, timeout=60)
            self.assertExit(result, 0)
            self.assertNoLauncherTraceback(result)

    def test_worker_output_is_progress(self):
        # The worker's start is progress; the age grows while it is silent and falls back when
        # it writes a line on stderr (which the launcher relays).
        log = self.path("events.jsonl")
        speak, said = self.path("speak"), self.path("said")
        proc = self.start_ddprun("--health_port=0", "--event_log=" + log, lib.FAKE_WORKER,
                                 "--wait-for-file", speak, "--print-err", "step 1",
                                 "--write", said, "1", "--wait-for-file", self.release)
        address = self.endpoint(proc, log)
        silent = self.wait_health(address, "a silent second",
                                  lambda status, h: (h["last_progress_age_s"] or 0) >= 1.0)
        with open(speak, "w"):
            pass
        self.wait_for_files([said], timeout=30, proc=proc)
        health = self.wait_health(address, "the line counted as progress",
                                  lambda status, h: h["last_progress_age_s"] < 1.0)
        self.assertLess(health["last_progress_age_s"], silent["last_progress_age_s"])
        self.finish_released([proc])

    def test_the_learned_hang_timeout_is_shown(self):
        # --hang-timeout=auto (issue 37): null while it is being learned, the learned value once
        # a rank showed its warm-up of intervals (lines every 0.1 s: the floor of 1 s wins).
        log = self.path("events.jsonl")
        script = ("i=0; while [ $i -lt 10 ]; do echo step; sleep 0.1; i=$((i+1)); done; "
                  "while [ ! -e %s ]; do sleep 0.1; echo waiting; done" % self.release)
        proc = self.start_ddprun("--health_port=0", "--event_log=" + log, "--hang-timeout=auto",
                                 "--hang-timeout-warmup=3", "--hang-timeout-floor=1",
                                 "--no_python", "/bin/sh", "-c", script)
        address = self.endpoint(proc, log)
        health = self.wait_health(address, "the learned hang timeout",
                                  lambda status, h: h["hang_timeout_s"] is not None)
        self.assertTrue(health["hang_timeout_learned"])
        self.assertGreaterEqual(health["hang_timeout_s"], 1.0)
        self.assertEqual(health["hang_startup_timeout_s"], 600.0)
        status, metrics = get(address, "/metrics")
        self.assertEqual(parse_metrics(metrics)["ddprun_hang_timeout_seconds"],
                         health["hang_timeout_s"])
        learned = [e for e in events_of(log) if e["event"] == "hang_timeout_learned"]
        self.assertTrue(learned)
        self.assertEqual(learned[-1]["timeout_s"], health["hang_timeout_s"])
        self.finish_released([proc])

    # (a) and (e)
    def test_running_job_is_healthy_and_its_metrics_parse(self):
        log = self.path("events.jsonl")
        proc = self.start_ddprun("--nproc_per_node=2", "--max_restarts=3", "--health_port=0",
                                 "--event_log=" + log, *self.worker())
        address = self.endpoint(proc, log)
        host, port = address.rsplit(":", 1)
        self.assertEqual(host, "127.0.0.1", "loopback unless --health_addr says otherwise")
        self.assertEqual(listening_addresses(int(port)), {"127.0.0.1"})
        self.wait_workers(2)
        health = self.wait_health(address, "healthy with 2 workers",
                                  lambda status, h: status == 200 and h["state"] == "healthy")
        self.assertEqual({k: health[k] for k in ("round", "world_size", "group_rank",
                                                 "restart_count", "max_restarts")},
                         {"round": 0, "world_size": 2, "group_rank": 0, "restart_count": 0,
                          "max_restarts": 3})
        self.assertGreaterEqual(health["last_progress_age_s"], 0)
        self.assertGreater(health["uptime_s"], 0)
        status, text = get(address, "/metrics")
        self.assertEqual(status, 200)
        samples = parse_metrics(text)
        for series in EXPECTED_SERIES:
            self.assertIn(series, samples, text)
        self.assertEqual(samples["ddprun_world_size"], 2)
        self.assertEqual(samples["ddprun_workers_running"], 2)
        self.assertEqual(samples["ddprun_rounds_joined_total"], 1)
        self.assertEqual(samples["ddprun_restart_budget_remaining"], 3)
        self.assertEqual(samples["ddprun_healthy"], 1)
        self.assertEqual(get(address, "/nowhere")[0], 404)
        with open(self.release, "w") as f:
            f.write("go")
        result = self.finish(proc, timeout=60)
        self.assertExit(result, 0)
        self.assertEqual(result.stderr.count("health endpoint: http://%s/healthz" % address), 1,
                         result.describe())

    # (b)
    def test_a_stopped_agent_fails_the_probe_and_recovers(self):
        log = self.path("events.jsonl")
        proc = self.start_ddprun("--health_port=0", "--event_log=" + log, *self.worker())
        address = self.endpoint(proc, log)
        self.wait_workers(1)
        self.wait_health(address, "healthy", lambda status, h: status == 200)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            with self.assertRaises((socket.timeout, urllib.error.URLError, TimeoutError)):
                get(address, "/healthz", timeout=1.5)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        self.assertEqual(get(address, "/healthz", timeout=10)[0], 200)
        self.finish_released([proc])

    def test_the_server_is_bounded(self):
        """A 17th connection closed at once, an idle connection closed after the 5 s read
        deadline, keep-alive, 405, an oversized request cut."""
        log = self.path("events.jsonl")
        proc = self.start_ddprun("--health_port=0", "--event_log=" + log, *self.worker())
        host, port = self.endpoint(proc, log).rsplit(":", 1)
        where = (host, int(port))
        idle = [socket.create_connection(where, timeout=10) for _ in range(16)]
        try:
            # Served in order of arrival: once the 16th answers, all 16 count as open.
            idle[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            skip_body(idle[-1], read_head(idle[-1]))
            with socket.create_connection(where, timeout=10) as extra:
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_all(extra), b"", "the 17th connection is closed unanswered")
            started = time.monotonic()
            self.assertEqual(read_all(idle[0]), b"", "an idle connection is closed")
            self.assertLess(time.monotonic() - started, 8)
        finally:
            for connection in idle:
                connection.close()
        # Once the server saw those close, a connection is served again.
        lib.wait_for(lambda: answers(where), 10, "the server to serve again")
        with socket.create_connection(where, timeout=10) as kept:
            for request, status in (
                    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
                    (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405),
                    (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200)):
                kept.sendall(request)  # one connection: kept alive
                head = read_head(kept)
                self.assertTrue(head[0].startswith("HTTP/1.1 %d " % status), head[0])
                skip_body(kept, head)
        with socket.create_connection(where, timeout=10) as big:
            try:
                big.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20000 +
                            b"\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # cut while sending: what the bound is for
            self.assertNotIn(b"200 OK", read_all(big))
        self.finish_released([proc])

    # (c)
    def test_lost_node_moves_the_survivors_counters_by_what_happened(self):
        store_port = lib.free_port()
        logs = [self.path("events_%d.jsonl" % i) for i in range(3)]

        def agent(i):
            return self.start_ddprun(
                "--nnodes=2:3", "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % store_port,
                "--rdzv_id=health-test", "--max_restarts=1", "--health_port=0",
                "--event_log=" + logs[i],
                "--rdzv_conf=join_timeout=30,last_call_timeout=60,keep_alive_interval=%s,"
                "keep_alive_max_attempt=%d" % (INTERVAL, ATTEMPTS), *self.worker())
        agents = [agent(0)]
        addresses = [self.endpoint(agents[0], logs[0])]
        for i in (1, 2):
            agents.append(agent(i))
            addresses.append(self.endpoint(agents[i], logs[i]))
        for address in addresses:  # MAX (3) closes the first round at once
            self.wait_health(address, "round 0 of 3 nodes running", lambda status, h:
                             status == 200 and h["state"] == "healthy" and h["world_size"] == 3)
        for address in addresses:
            samples = parse_metrics(get(address, "/metrics")[1])
            self.assertEqual(samples["ddprun_node_losses_total"], 0)
            self.assertEqual(samples['ddprun_restarts_total{cause="membership"}'], 0)
            self.assertEqual(samples["ddprun_world_size"], 3)
        host_samples = parse_metrics(get(addresses[0], "/metrics")[1])
        self.assertGreater(host_samples["ddprun_store_requests_total"], 0)
        self.assertGreaterEqual(host_samples["ddprun_store_connections"], 2)
        os.kill(agents[2].pid, signal.SIGKILL)
        for address in addresses[:2]:
            self.wait_health(address, "a round of 2 nodes running", lambda status, h:
                             status == 200 and h["state"] == "healthy" and h["world_size"] == 2,
                             timeout=HEARTBEAT_TIMEOUT + 20)
        for address, log in zip(addresses[:2], logs[:2]):
            samples = parse_metrics(get(address, "/metrics")[1])
            names = [e["event"] for e in events_of(log)]
            self.assertGreaterEqual(names.count("node_lost"), 1, names)
            self.assertEqual(samples["ddprun_node_losses_total"], names.count("node_lost"))
            self.assertEqual(samples['ddprun_restarts_total{cause="membership"}'], 1)
            self.assertEqual(samples['ddprun_restarts_total{cause="failure"}'], 0)
            self.assertEqual(samples["ddprun_worker_failures_total"], 0)
            self.assertEqual(samples["ddprun_rounds_joined_total"], 2)
            self.assertEqual(samples["ddprun_restart_budget_remaining"], 1)  # none spent
            self.assertEqual(samples["ddprun_world_size"], 2)
        self.finish_released(agents[:2])

    # (d)
    def test_a_bad_port_is_a_one_line_error(self):
        for args, env, named in (
                (["--health_port=70000"], {}, "--health_port=70000"),
                (["--health-port", "http"], {}, "--health_port=http"),
                ([], {"TORCHELASTIC_HEALTH_CHECK_PORT": "x"}, "TORCHELASTIC_HEALTH_CHECK_PORT=x"),
                (["--health_port=0", "--health_addr=localhost"], {}, "--health_addr=localhost")):
            result = self.ddprun(*args, lib.FAKE_WORKER, env=self.env(env))
            self.assertExit(result, 2)
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.describe())
            self.assertIn(named, lines[0])

    def test_dry_run_shows_the_endpoint(self):
        result = self.ddprun("--dry_run", "--health_port=0", lib.FAKE_WORKER)
        self.assertExit(result, 0)
        self.assertRegex(result.stdout, r"(?m)^ *health\b.*127\.0\.0\.1:0 \(ephemeral\), GET /healthz")
        result = self.ddprun("--dry_run", lib.FAKE_WORKER)
        self.assertNotRegex(result.stdout, r"(?m)^ *health\b")

    def test_a_port_in_use_is_a_one_line_error(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = self.ddprun("--health_port=%d" % port, lib.FAKE_WORKER)
        self.assertExit(result, 2)
        self.assertIn("--health_port=%d: cannot listen on 127.0.0.1:%d" % (port, port),
                      result.stderr)


def answers(where):
    try:
        return get("%s:%d" % where, "/healthz", timeout=2)[0] == 200
    except (OSError, urllib.error.URLError):
        return False


def read_head(connection):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            raise AssertionError("closed before a response head: %r" % data)
        data += chunk
    end = data.index(b"\r\n\r\n")
    return data[:end].decode(), data[end + 4:]


def skip_body(connection, head_and_rest):
    head, body = head_and_rest
    length = int(re.search(r"(?im)^content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += connection.recv(4096)


def read_all(connection):
    """Everything until the peer closes (a reset counts as closed)."""
    data = b""
    try:
        while True:
            chunk = connection.recv(4096)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def listening_addresses(port):
    """The local addresses of the TCP sockets listening on `port` (/proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = lib.read_file(table).splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) != port or fields[3] != "0A":  # 0A: LISTEN
                continue
            if len(address) == 8:
                found.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(address)[::-1]))
            else:
                found.add(address)
    return found


if __name__ == "__main__":
    unittest.main()
