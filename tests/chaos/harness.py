"""The chaos harness's moving parts: simulated hosts, their network faults, the ddprun agents
(one per host, restarted like a supervisor would), and the recorder of the history the checker
reads (checker.py). chaos.py runs schedules with it.

Hosts are network namespaces on one bridge (ddprun_testlib.NetnsHosts, 10.213.8.0/24). Each runs
one agent (`--rdzv_backend=c10d`, the same three endpoints, `--nnodes=2:3`, NPROC workers of
chaos_train.py). Faults:
- partitions: iptables DROP rules in the cut host's namespace (INPUT from and/or OUTPUT to the
  other hosts' addresses): symmetric or one-way, no FIN, no RST;
- loss: the iptables statistic match (each packet in and out of the host's link dropped with the
  probability); delay and jitter: NFQUEUE and delayer.py (this kernel has no sch_netem; Network);
- pause: SIGSTOP/SIGCONT of the agent (its workers and its in-process store, if it serves one,
  stop answering with it);
- kills: SIGKILL of an agent with its workers (a lost machine; restarted at heal, as a machine
  that reboots would be) or of one worker.
Every fault is healed before the schedule ends; the recorder keeps wall-clock times of each
injection and heal, each agent incarnation (start, exit, code, error lines, event log), and the
process table's changes (each host's live worker pids, sampled every SAMPLE_INTERVAL s).
"""
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

TRAIN = os.path.join(HERE, "chaos_train.py")
NPROC = 1
MIN_NODES = 2  # --nnodes=2:3
HOST_VAR = "DDPRUN_CHAOS_HOST"
RDZV_PORT = 29500
KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT = 1, 3
HEARTBEAT_TIMEOUT = KEEP_ALIVE_INTERVAL * KEEP_ALIVE_MAX_ATTEMPT
RDZV_CONF = ("keep_alive_interval=%d,keep_alive_max_attempt=%d,last_call_timeout=1,"
             "join_timeout=60" % (KEEP_ALIVE_INTERVAL, KEEP_ALIVE_MAX_ATTEMPT))
MAX_RESTARTS = 20
CKPT_EVERY = 5
STEP_SLEEP = 0.1
SAMPLE_INTERVAL = 0.1
AGENT_RESTARTS_PER_HOST = 4  # per schedule: an agent that keeps dying is not restarted forever
CLOSED = "' is closed: "  # a restarted agent's line once the job is over or lost its quorum


def _run(args, check=True):
    result = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, timeout=30, text=True)
    if check and result.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), result.stderr.strip()))
    return result.returncode == 0


# How long a helper process (a delayer, an echo server: a Python interpreter started in a host's
# namespace) may take to print "ready": a cold start on a loaded machine, far above the usual
# fraction of a second; it costs time only when the helper is broken.
READY_TIMEOUT = 60


def read_ready(proc, seconds=READY_TIMEOUT):
    """Whether `proc` printed its "ready" line within `seconds` (a select on its stdout)."""
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    return bool(ready) and proc.stdout.readline().strip() == "ready"


DELAYER = os.path.join(HERE, "delayer.py")
DELAY_QUEUE = 0  # each host's namespace has its own nfnetlink_queue numbers


class Network:
    """Network faults on lib.NetnsHosts, each in the hit host's own namespace (nothing in the
    root namespace), on the host's link only (its loopback, an agent and the store it serves,
    is never hit). heal(host) removes every fault of that host.
    - cut: filter-table DROP rules (INPUT from and/or OUTPUT to the other hosts' addresses);
    - loss: the statistic match, each packet in and out of the link dropped with the
      probability (the kernel here has no sch_netem; netem's loss is the same draw);
    - delay: mangle-table NFQUEUE rules (in and out of the link) and a delayer.py in the
      namespace holding each packet MS +- JITTER ms, netem's delay from userspace. Mangle runs
      before filter, so a delayed packet still meets a cut's DROP rules."""

    def __init__(self, hosts):
        self.hosts, self.delayers = hosts, {}

    def _ipt(self, host, *args):
        _run(self.hosts.exec_prefix(host) + ["iptables", "-w", "5"] + list(args))

    def _others(self, host):
        return [a for h, a in enumerate(self.hosts.addresses) if h != host]

    def _link_rules(self, host, table, *target):
        device = self.hosts.devices[host]
        for chain, side in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self._ipt(host, "-t", table, "-A", chain, side, device, *target)

    def cut(self, host, inbound, outbound):
        for other in self._others(host):
            if inbound:
                self._ipt(host, "-A", "INPUT", "-s", other, "-j", "DROP")
            if outbound:
                self._ipt(host, "-A", "OUTPUT", "-d", other, "-j", "DROP")

    def lose(self, host, percent):
        self._link_rules(host, "filter", "-m", "statistic", "--mode", "random",
                         "--probability", "%.4f" % (percent / 100.0), "-j", "DROP")

    def delay(self, host, ms, jitter):
        if host in self.delayers:
            raise RuntimeError("host %d is delayed already" % host)
        proc = subprocess.Popen(
            self.hosts.exec_prefix(host) + [sys.executable, DELAYER, "--queue", str(DELAY_QUEUE),
                                            "--ms", str(ms), "--jitter", str(jitter)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.delayers[host] = proc
        if not read_ready(proc):
            raise RuntimeError("the delayer of host %d did not start: %s" % (
                host, self._stop_delayer(host)))
        # --queue-bypass: should the delayer die, packets pass instead of being dropped.
        self._link_rules(host, "mangle", "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE),
                         "--queue-bypass")

    def _stop_delayer(self, host):
        """Stops host's delayer (its held packets are let through); its summary line."""
        proc = self.delayers.pop(host, None)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=10)
        return (err or "").strip() or "exit %s" % proc.returncode

    def heal(self, host):
        """Removes host's faults; {host: the delayer's summary line} when it was delayed."""
        self._ipt(host, "-F", "INPUT")
        self._ipt(host, "-F", "OUTPUT")
        self._ipt(host, "-t", "mangle", "-F", "INPUT")
        self._ipt(host, "-t", "mangle", "-F", "OUTPUT")
        summary = self._stop_delayer(host)
        return {} if summary is None else {host: summary}

    def heal_all(self):
        stats = {}
        for host in range(len(self.hosts.addresses)):
            stats.update(self.heal(host))
        return stats


ETCD = "/usr/bin/etcd"
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380


class EtcdMembers:
    """A 3-member etcd cluster for the etcd backend: one member per host, in the host's
    namespace at its address (so a cut host's member is cut off too). Without the job's marker:
    stopped by stop(), not counted as the job's leftovers."""

    def __init__(self, hosts, workdir):
        self.hosts, self.dir, self.procs = hosts, workdir, {}
        self.token = "chaos-%s" % os.path.basename(workdir)

    def start(self):
        cluster = ",".join("m%d=http://%s:%d" % (h, a, ETCD_PEER_PORT)
                           for h, a in enumerate(self.hosts.addresses))
        for host, address in enumerate(self.hosts.addresses):
            client = "http://%s:%d" % (address, ETCD_CLIENT_PORT)
            peer = "http://%s:%d" % (address, ETCD_PEER_PORT)
            log = open(os.path.join(self.dir, "etcd_m%d.log" % host), "ab")
            try:
                self.procs[host] = subprocess.Popen(
                    self.hosts.exec_prefix(host) + [
                        ETCD, "--name", "m%d" % host,
                        "--data-dir", os.path.join(self.dir, "etcd_m%d" % host),
                        "--listen-client-urls", client, "--advertise-client-urls", client,
                        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                        "--initial-cluster", cluster, "--initial-cluster-state", "new",
                        "--initial-cluster-token", self.token, "--heartbeat-interval", "100",
                        "--election-timeout", "1000"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            finally:
                log.close()

    def listening(self):
        return all(_listens(p.pid, ETCD_CLIENT_PORT) for p in self.procs.values()
                   if p.poll() is None) and all(p.poll() is None for p in self.procs.values())

    @property
    def endpoints(self):
        return ",".join("%s:%d" % (a, ETCD_CLIENT_PORT) for a in self.hosts.addresses)

    def is_leader(self, host):
        """Whether host's member leads the cluster now (None: it did not say within 2 s)."""
        url = "http://%s:%d/v3/maintenance/status" % (self.hosts.addresses[host], ETCD_CLIENT_PORT)
        ask = ("import json, sys, urllib.request as u; r = json.load(u.urlopen(u.Request("
               "sys.argv[1], data=b'{}'), timeout=2)); print(r['leader'] == r['header']['member_id'])")
        try:
            out = subprocess.run(self.hosts.exec_prefix(host) + [sys.executable, "-c", ask, url],
                                 capture_output=True, text=True, timeout=5).stdout.strip()
        except subprocess.SubprocessError:
            return None
        return {"True": True, "False": False}.get(out)

    def signal(self, host, sig):
        proc = self.procs.get(host)
        if proc is not None and proc.poll() is None:
            lib.kill_quietly(proc.pid, sig)

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                lib.kill_quietly(proc.pid, signal.SIGCONT)
                lib.kill_quietly(proc.pid)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def _listens(pid, port):
    """Whether pid's network namespace has a TCP listener on `port`."""
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                for line in f.read().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


class Agent:
    """One incarnation of a host's agent: its process and what it left (recorded as a dict)."""

    def __init__(self, proc, host, incarnation, event_log, err_path):
        self.proc, self.host, self.incarnation = proc, host, incarnation
        self.event_log, self.err_path = event_log, err_path
        self.start_t, self.exit_t = time.time(), None

    def record(self):
        err = lib.read_file(self.err_path) if os.path.exists(self.err_path) else ""
        return {"host": self.host, "incarnation": self.incarnation, "pid": self.proc.pid,
                "start": self.start_t, "exit": self.exit_t, "rc": self.proc.returncode,
                "errors": [ln for ln in err.splitlines() if is_error(ln)],
                "foreign": [ln for ln in err.splitlines() if not is_launcher(ln)][:12],
                "stderr_tail": err.splitlines()[-12:], "events": _read_jsonl(self.event_log)}


def is_launcher(line):
    """A line of the launcher's own log ("[ddprun] W1127 ...") or its final "ddprun: error:"."""
    return line.startswith("[ddprun] ") or line.startswith("ddprun: ")


def is_error(line):
    return line.startswith("[ddprun] E") or line.startswith("ddprun: error:")


def _read_jsonl(path):
    entries = []
    if os.path.exists(path):
        for line in lib.read_file(path).splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass
    return entries


class Job:
    """One schedule's job: a directory, a marker, one agent per host, the recorder."""

    def __init__(self, hosts, workdir, rdzv_id, python, backend="c10d"):
        self.hosts, self.dir, self.rdzv_id, self.python = hosts, workdir, rdzv_id, python
        self.backend = backend
        self.etcd = EtcdMembers(hosts, workdir) if backend == "etcd" else None
        self.job_dir = os.path.join(workdir, "job")
        os.makedirs(self.job_dir)
        self.steps_log = os.path.join(self.job_dir, "steps.log")
        self.marker = os.path.basename(workdir) + "-" + rdzv_id
        self.endpoints = self.etcd.endpoints if self.etcd else ",".join(
            "%s:%d" % (a, RDZV_PORT) for a in hosts.addresses)
        self.agents = {}       # host -> current Agent
        self.finished = []     # every exited Agent
        self.restarts = {h: 0 for h in range(len(hosts.addresses))}
        self.samples = []      # [t, host, [pids]] on each change
        self._last_sample = {}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample_loop, daemon=True)
        self._steps_offset, self._steps = 0, []

    # -- agents --------------------------------------------------------------------------------

    def start_agent(self, host):
        incarnation = sum(1 for a in self.finished if a.host == host) + (
            1 if host in self.agents else 0)
        tag = "h%d_%d" % (host, incarnation)
        event_log = os.path.join(self.dir, "events_%s.jsonl" % tag)
        out_path, err_path = (os.path.join(self.dir, "agent_%s.%s" % (tag, s))
                              for s in ("out", "err"))
        env = lib.clean_env({"GLOO_SOCKET_IFNAME": self.hosts.devices[host],
                             HOST_VAR: str(host), lib.MARKER_VAR: self.marker})
        args = self.hosts.exec_prefix(host) + [
            lib.DDPRUN, "--nnodes=%d:%d" % (MIN_NODES, len(self.hosts.addresses)),
            "--nproc_per_node=%d" % NPROC, "--rdzv_backend=%s" % self.backend,
            "--rdzv_endpoint=%s" % self.endpoints, "--rdzv_id=%s" % self.rdzv_id,
            "--max_restarts=%d" % MAX_RESTARTS, "--rdzv_conf=%s" % RDZV_CONF,
            "--local_addr=%s" % self.hosts.addresses[host], "--event_log=%s" % event_log,
            # The workers' output to files: the agent's stderr holds the launcher's lines only.
            "--redirects=3", "--log_dir=%s" % os.path.join(self.dir, "logs_%s" % tag),
            "--python", self.python, TRAIN, self.job_dir, "--ckpt-every", str(CKPT_EVERY),
            "--sleep", str(STEP_SLEEP), "--max-steps", "20000"]
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True, cwd=self.dir)
        self.agents[host] = Agent(proc, host, incarnation, event_log, err_path)
        return self.agents[host]

    def listening(self, host):
        """Whether host's namespace has a listener on RDZV_PORT (its agent serves the store)."""
        agent = self.agents.get(host)
        if agent is None or agent.proc.poll() is not None:
            return False
        return _listens(agent.proc.pid, RDZV_PORT)

    def reap(self):
        """Moves exited agents to self.finished; returns them."""
        gone = []
        for host, agent in list(self.agents.items()):
            if agent.proc.poll() is not None:
                agent.exit_t = time.time()
                self.finished.append(agent)
                del self.agents[host]
                gone.append(agent)
        return gone

    @staticmethod
    def _is_worker(pid):
        """A chaos_train.py worker (the agent's own command line names the script too)."""
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
        return b"ddprun" not in argv[0] and any(a.endswith(b"chaos_train.py") for a in argv)

    def host_pids(self, host, workers_only=False):
        needle = ("%s=%d" % (HOST_VAR, host)).encode()
        pids = []
        for pid in lib.pids_with_marker(self.marker):
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
                if workers_only and not self._is_worker(pid):
                    continue
                if lib.is_alive(pid):
                    pids.append(pid)
            except OSError:
                pass
        return pids

    def kill_host(self, host):
        """SIGKILL of host's agent first (it cannot react), then everything else of the host."""
        agent = self.agents.get(host)
        if agent is not None:
            lib.kill_quietly(agent.proc.pid)
        for pid in self.host_pids(host):
            lib.kill_quietly(pid)

    def signal_agent(self, host, sig):
        agent = self.agents.get(host)
        if agent is not None:
            lib.kill_quietly(agent.proc.pid, sig)
        return agent is not None

    def kill_worker(self, host):
        pids = self.host_pids(host, workers_only=True)
        if pids:
            lib.kill_quietly(min(pids))
        return pids[:1]

    # -- the recorder --------------------------------------------------------------------------

    def start_sampler(self):
        self._sampler.start()

    def _sample_loop(self):
        while not self._stop.wait(SAMPLE_INTERVAL):
            self.sample()

    def sample(self):
        now = time.time()
        live = {h: [] for h in range(len(self.hosts.addresses))}
        for pid in lib.pids_with_marker(self.marker):
            try:
                if not self._is_worker(pid):
                    continue
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if not lib.is_alive(pid):
                continue
            for entry in env:
                if entry.startswith(HOST_VAR.encode() + b"="):
                    live.setdefault(int(entry.split(b"=", 1)[1]), []).append(pid)
        for host, pids in live.items():
            pids = sorted(pids)
            if self._last_sample.get(host) != pids:
                self._last_sample[host] = pids
                self.samples.append([now, host, pids])

    def stop_sampler(self):
        self._stop.set()
        if self._sampler.is_alive():
            self._sampler.join(timeout=5)

    def steps(self):
        """Every line of steps.log so far (read incrementally)."""
        if os.path.exists(self.steps_log):
            with open(self.steps_log, "rb") as f:
                f.seek(self._steps_offset)
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line being written is read next time
            for line in data[:end].splitlines():
                try:
                    self._steps.append(json.loads(line))
                except ValueError:
                    pass
            self._steps_offset += end
        return self._steps

    def started(self):
        records = []
        for name in os.listdir(self.job_dir):
            if name.startswith("started_") and ".tmp." not in name:
                try:
                    records.append(lib.read_json(os.path.join(self.job_dir, name)))
                except ValueError:
                    pass
        return records

    def leftovers(self):
        return lib.pids_with_marker(self.marker)

    def kill_everything(self):
        for _ in range(3):
            pids = self.leftovers()
            if not pids:
                return
            for pid in pids:
                lib.kill_quietly(pid, signal.SIGCONT)
                lib.kill_quietly(pid)
            time.sleep(0.1)
