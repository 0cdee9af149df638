"""A real etcd cluster for tests and benches (Debian's etcd-server, installed by
scripts/install-deps.sh): N members on 127.0.0.1 with free ports and data directories under a
temporary directory, started together, waited for until every member reports healthy, and torn
down (SIGTERM, then SIGKILL after a bound; data removed) when the context ends, even on failure.

    with EtcdCluster(3) as cluster:
        cluster.endpoints          # ["127.0.0.1:23790", ...] (client URLs without the scheme)
        cluster.kill(1)            # SIGKILL one member
        cluster.restart(1)         # start it again on its data directory
        cluster.leader()           # index of the member that leads (None: no leader answers)
        cluster.make_leader(0)     # hand the leadership to member 0 (and wait until it leads)
        cluster.range("/ddprun/")  # {key: value} under a prefix, read from a live member
        cluster.lease_ttl(lease)   # seconds left of a lease (-1: expired; None: no answer)

stdlib only; every wait is bounded.
"""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def etcd_available():
    return os.access(ETCD, os.X_OK)


def _free_ports(count):
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


class EtcdCluster:
    def __init__(self, members=3, heartbeat_ms=100, election_ms=1000):
        self.count = members
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.dir = None
        self.procs = [None] * members
        self.client_ports = []
        self.peer_ports = []

    # -- public --------------------------------------------------------------------------------
    @property
    def endpoints(self):
        return ["127.0.0.1:%d" % port for port in self.client_ports]

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="ddprun_etcd_")
        ports = _free_ports(2 * self.count)
        self.client_ports, self.peer_ports = ports[:self.count], ports[self.count:]
        try:
            for index in range(self.count):
                self._start(index, "new")
            for index in range(self.count):
                self.wait_healthy(index)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for index in range(self.count):
            self.stop(index)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def kill(self, index):
        """SIGKILLs one member (its data stays, for restart)."""
        proc = self.procs[index]
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)

    def stop(self, index):
        proc = self.procs[index]
        if not proc or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)

    def restart(self, index):
        self.kill(index)
        self._start(index, "existing")
        self.wait_healthy(index)

    def health(self, index):
        url = "http://127.0.0.1:%d/health" % self.client_ports[index]
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return json.loads(reply.read().decode()).get("health") == "true"
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_healthy(self, index, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.health(index):
            proc = self.procs[index]
            if proc.poll() is not None:
                raise AssertionError("etcd member %d exited (%s):\n%s" % (
                    index, proc.returncode, self.log(index)[-3000:]))
            if time.monotonic() >= deadline:
                raise AssertionError("etcd member %d not healthy after %.0f s:\n%s" % (
                    index, timeout, self.log(index)[-3000:]))
            time.sleep(0.05)

    def alive(self, index):
        proc = self.procs[index]
        return proc is not None and proc.poll() is None

    def leader(self):
        """Index of the leading member as the live members report it, or None (no quorum)."""
        return self._statuses()[1]

    def make_leader(self, index, timeout=START_TIMEOUT):
        """Transfers the leadership to member `index` and waits until it leads."""
        deadline = time.monotonic() + timeout
        while True:
            ids, leader = self._statuses()
            if leader == index:
                return
            target = {i: member for member, i in ids.items()}.get(index)
            if leader is not None and target is not None:
                self._call(leader, "/v3/maintenance/transfer-leadership", {"targetID": target})
            if time.monotonic() >= deadline:
                raise AssertionError("etcd member %d does not lead after %.0f s (leader: %s)" %
                                     (index, timeout, leader))
            time.sleep(0.05)

    def _statuses(self):
        """({member id: index} of the live members that answer, index of the leader or None)."""
        ids = {}
        leader_id = None
        for index in range(self.count):
            status = self._call(index, "/v3/maintenance/status", {}) if self.alive(index) else None
            if status is None or "header" not in status:
                continue
            ids[status["header"].get("member_id")] = index
            leader_id = status.get("leader") or leader_id
        return ids, ids.get(leader_id)

    def range(self, prefix):
        """Every key under `prefix` with its value (str -> str), read from the first live member
        that answers (a linearizable read: it needs a quorum)."""
        start = prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1])
        body = {"key": base64.b64encode(start).decode(),
                "range_end": base64.b64encode(end).decode()}
        for index in range(self.count):
            reply = self._call(index, "/v3/kv/range", body) if self.alive(index) else None
            if reply is not None and "header" in reply:
                return {base64.b64decode(kv["key"]).decode(errors="replace"):
                        base64.b64decode(kv.get("value", "")).decode(errors="replace")
                        for kv in reply.get("kvs", [])}
        raise AssertionError("no etcd member answered a range read of %s" % prefix)

    def lease_ttl(self, lease):
        """Seconds left of lease `lease` (an int), as the first live member that answers says:
        -1 once it expired, None when no member answers."""
        for index in range(self.count):
            reply = self._call(index, "/v3/lease/timetolive", {"ID": lease}) \
                if self.alive(index) else None
            if reply is not None and "header" in reply:
                return int(reply.get("TTL", -1))
        return None

    def log(self, index):
        try:
            with open(self._path("m%d.log" % index), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # -- internals -----------------------------------------------------------------------------
    def _call(self, index, path, body, timeout=2):
        """POSTs to etcd's v3 JSON gateway on one member: the decoded reply, or None."""
        request = urllib.request.Request(
            "http://127.0.0.1:%d%s" % (self.client_ports[index], path),
            data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return json.loads(reply.read().decode())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _start(self, index, state):
        peers = ",".join("m%d=http://127.0.0.1:%d" % (i, port)
                         for i, port in enumerate(self.peer_ports))
        client = "http://127.0.0.1:%d" % self.client_ports[index]
        peer = "http://127.0.0.1:%d" % self.peer_ports[index]
        args = [ETCD, "--name", "m%d" % index, "--data-dir", self._path("m%d" % index),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", peers, "--initial-cluster-state", state,
                "--initial-cluster-token", os.path.basename(self.dir),
                "--heartbeat-interval", str(self.heartbeat_ms),
                "--election-timeout", str(self.election_ms)]
        log = open(self._path("m%d.log" % index), "ab")
        try:
            self.procs[index] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)
        finally:
            log.close()
