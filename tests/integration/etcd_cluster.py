"""A real etcd cluster for tests and benches (Debian's etcd-server, installed by
scripts/install-deps.sh): N members on 127.0.0.1 with free ports and data directories under a
temporary directory, started together, waited for until every member reports healthy, and torn
down (SIGTERM, then SIGKILL after a bound; data removed) when the context ends, even on failure.

    with EtcdCluster(3) as cluster:
        cluster.endpoints          # ["127.0.0.1:23790", ...] (client URLs without the scheme)
        cluster.kill(1)            # SIGKILL one member
        cluster.restart(1)         # start it again on its data directory

stdlib only; every wait is bounded.
"""
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

    def log(self, index):
        try:
            with open(self._path("m%d.log" % index), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # -- internals -----------------------------------------------------------------------------
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
