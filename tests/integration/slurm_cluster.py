"""A real Slurm cluster on one machine, for tests (Debian's slurmctld, slurmd, slurm-client and
munge, installed by scripts/install-deps.sh; none of their system services is used).

    reason = slurm_unavailable()          # None, or why this machine cannot run one (skip)
    with SlurmCluster(nodes=2) as cluster:
        job = cluster.sbatch(["script.sbatch"], env={...})   # the job id
        info = cluster.wait_job_done(job, timeout=60)           # scontrol's fields, e.g.
        info["JobState"], info["ExitCode"]                      # "COMPLETED", "0:0"
        cluster.client(["scancel", job])                        # any client command
        cluster.node_pids(0)                                    # every process on node n1
        cluster.kill_node(1)                                    # node n2 lost: slurmd and all

Layout: hosts are network namespaces on one bridge (ddprun_testlib.NetnsHosts): host 0 runs
slurmctld (10.213.8.1, name "ctl") and the clients (sbatch, srun from a test, scontrol, ...);
host n >= 1 runs the slurmd of node n<n> (10.213.8.(n+1)). Every process of a host (a daemon,
a client, a job's tasks) runs in the host's network namespace, a UTS namespace with the host's
name as host name, and a mount namespace with the cluster's hosts file on /etc/hosts (so node
names resolve, as on a real cluster) and, for a node, its own directory on `<dir>/node` (spool,
pid and log files of its slurmd), as on separate machines.
munged runs with its own key and socket (slurm.conf `AuthInfo=socket=...`); SLURM_CONF names the
generated slurm.conf, for the daemons, the clients and (exported by sbatch) the jobs. Everything
else lives under a temporary directory. Process tracking is proctrack/linuxproc, task/none (no
cgroups needed). Accounting is off (sacct needs slurmdbd and a MySQL server): a finished job is
read with `scontrol show job` (kept MinJobAge = 600 s) and from the jobcomp/filetxt file.

Start waits (bounded) until sinfo shows every node idle; stop (also on a failed start) kills
every process in each namespace, then the daemons, and removes namespaces, hosts files and the
directory. stdlib only.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from ddprun_testlib import NetnsHosts, can_create_netns, wait_for

SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
CLIENTS = ("sbatch", "srun", "scontrol", "sinfo", "scancel", "squeue")
START_TIMEOUT = 60.0
CLIENT_TIMEOUT = 30.0
CTL_NAME = "ctl"


def slurm_unavailable():
    """None when a cluster can start here, else the reason (for skipTest)."""
    missing = [p for p in (SLURMCTLD, SLURMD, MUNGED, "/usr/sbin/mungekey") if not os.access(p, os.X_OK)]
    missing += [c for c in CLIENTS + ("unshare", "nsenter", "ip") if shutil.which(c) is None]
    if missing:
        return "Slurm/munge not installed (missing %s): run scripts/install-deps.sh" % ", ".join(missing)
    if not can_create_netns():
        return "cannot create network namespaces (needs root and `ip netns`)"
    if subprocess.run(["unshare", "--uts", "--mount", "true"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        return "cannot create UTS/mount namespaces (unshare --uts --mount)"
    return None


def node_name(index):
    """Slurm node name of node `index` (0-based): n1, n2, ..."""
    return "n%d" % (index + 1)


def parse_scontrol(text):
    """`scontrol show job -o` (one line of Key=Value) as a dict."""
    fields = {}
    for match in re.finditer(r"(\S+?)=(\S*)", text.strip()):
        fields.setdefault(match.group(1), match.group(2))
    return fields


class SlurmCluster:
    def __init__(self, nodes=2, cpus=4, gpus=2, slurmd_timeout=10, kill_wait=10):
        self.count = nodes
        self.cpus = cpus
        self.gpus = gpus
        self.slurmd_timeout = slurmd_timeout
        self.kill_wait = kill_wait
        self.dir = None
        self.hosts = None
        self.munged = None
        self.slurmctld = None
        self.slurmds = [None] * nodes
        self.conf = None
        self.hosts_file = None

    # -- context -------------------------------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def names(self):
        return [node_name(i) for i in range(self.count)]

    @property
    def addresses(self):
        return self.hosts.addresses[1:]

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="ddprun_slurm_")
        self.hosts = NetnsHosts(self.count + 1)
        self.hosts.create()
        self._write_hosts_files()
        self._start_munged()
        self._write_conf()
        self.slurmctld = self._spawn(self._on_host(0, [SLURMCTLD, "-D", "-i", "-f", self.conf]),
                                     os.path.join(self.dir, "slurmctld.stdout"))
        for index in range(self.count):
            self.start_node(index)
        self.wait_nodes_idle(range(self.count))

    def stop(self):
        """Kills every process of the cluster (jobs included), removes everything; idempotent."""
        if self.hosts is not None:
            for index in range(1, self.count + 1):
                self._kill_namespace(index)
            self._kill_namespace(0)
        for proc in [self.slurmctld, self.munged] + self.slurmds:
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.slurmctld, self.munged, self.slurmds = None, None, [None] * self.count
        if self.hosts is not None:
            self.hosts.remove()
            self.hosts = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- nodes ---------------------------------------------------------------------------------
    def start_node(self, index):
        name = node_name(index)
        own = os.path.join(self.dir, "nodes", name)
        os.makedirs(os.path.join(own, "spool"), exist_ok=True)
        self.slurmds[index] = self._spawn(
            self._on_host(index + 1, [SLURMD, "-D", "-N", name, "-f", self.conf], own),
            os.path.join(own, "slurmd.stdout"))

    def kill_node(self, index):
        """The node is lost: its slurmd and every process in its namespace get SIGKILL."""
        self._kill_namespace(index + 1)
        if self.slurmds[index] is not None:
            self.slurmds[index].wait(timeout=10)
            self.slurmds[index] = None

    def node_pids(self, index):
        """Every process in node `index`'s network namespace (slurmd included)."""
        return self._namespace_pids(index + 1)

    def job_pids(self, index):
        """Processes on node `index` other than its slurmd (a job's stepd, tasks, workers)."""
        daemon = self.slurmds[index]
        skip = {daemon.pid} if daemon is not None else set()  # ip -> unshare -> sh exec slurmd
        return [pid for pid in self.node_pids(index) if pid not in skip]

    def wait_nodes_idle(self, indexes, timeout=START_TIMEOUT):
        wanted = [node_name(i) for i in indexes]

        def idle():
            self._check_daemons()
            out = self.client(["sinfo", "-h", "-N", "-o", "%N %T"], check=False).stdout
            states = dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)
            return all(states.get(n, "").rstrip("*") == "idle" for n in wanted)
        wait_for(idle, timeout, "Slurm nodes %s idle (logs in %s)" % (wanted, self.dir), 0.2)

    # -- clients -------------------------------------------------------------------------------
    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        env.update(extra or {})
        return env

    def client(self, args, env=None, check=True, timeout=CLIENT_TIMEOUT):
        """Runs a Slurm client command on the controller's host; returns the CompletedProcess."""
        proc = subprocess.run(self._on_host(0, list(args)),
                              env=env if env is not None else self.env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=self.dir)
        if check and proc.returncode != 0:
            raise AssertionError("%s exited %d\nstdout:\n%s\nstderr:\n%s"
                                 % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def sbatch(self, args, env=None):
        """Submits a batch job (`sbatch --parsable <args>`); returns its id."""
        out = self.client(["sbatch", "--parsable"] + list(args), env=self.env(env)).stdout
        return out.strip().split(";")[0]

    def job_info(self, job_id):
        out = self.client(["scontrol", "show", "job", "-o", str(job_id)]).stdout
        return parse_scontrol(out)

    def wait_job_state(self, job_id, states, timeout):
        def reached():
            info = self.job_info(job_id)
            return info if info.get("JobState") in states else None
        return wait_for(reached, timeout, "job %s in %s (%s)" % (job_id, states, self.dir), 0.2)

    def wait_job_done(self, job_id, timeout):
        """Waits for the job to end (any final state); returns scontrol's fields."""
        return self.wait_job_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                            "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                                            "DEADLINE", "PREEMPTED"), timeout)

    def jobcomp(self, job_id):
        """The job's last jobcomp/filetxt record as a dict (JobState, ExitCode, ...), or None.
        (A job that lost a node under --no-kill has a RESIZING record first.)"""
        try:
            with open(os.path.join(self.dir, "jobcomp.txt")) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        for line in reversed(lines):
            fields = parse_scontrol(line)
            if fields.get("JobId") == str(job_id):
                return fields
        return None

    def log(self, name):
        """A daemon's log: "slurmctld" or a node name."""
        path = (os.path.join(self.dir, "slurmctld.log") if name == "slurmctld"
                else os.path.join(self.dir, "nodes", name, "slurmd.log"))
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    # -- internals -----------------------------------------------------------------------------
    def _on_host(self, host, argv, own_dir=None):
        """argv as run on host `host` (0: the controller, n: node n<n>): in its network namespace
        (nsenter, which unlike `ip netns exec` keeps /sys and its cgroup mounts, needed by
        slurmd), with its own host name, the cluster's hosts file on /etc/hosts and, for a node,
        its own directory on <dir>/node."""
        name = CTL_NAME if host == 0 else node_name(host - 1)
        script = "hostname %s && mount --bind %s /etc/hosts" % (name, self.hosts_file)
        if own_dir is not None:
            script += " && mount --bind %s %s" % (own_dir, os.path.join(self.dir, "node"))
        return (["nsenter", "--net=/run/netns/%s" % self.hosts.names[host], "unshare", "--uts",
                 "--mount", "--propagation", "private", "sh", "-c", script + ' && exec "$@"',
                 "sh"] + list(argv))

    def _write_hosts_files(self):
        lines = ["127.0.0.1 localhost", "%s %s" % (self.hosts.addresses[0], CTL_NAME)]
        lines += ["%s %s" % (addr, node_name(i)) for i, addr in enumerate(self.addresses)]
        self.hosts_file = os.path.join(self.dir, "hosts")
        with open(self.hosts_file, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _start_munged(self):
        munge = os.path.join(self.dir, "munge")
        os.makedirs(munge, mode=0o700)
        key = os.path.join(munge, "munge.key")
        subprocess.run(["/usr/sbin/mungekey", "--create", "--keyfile", key], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)
        self.munge_socket = os.path.join(munge, "munge.socket")
        self.munged = self._spawn(
            [MUNGED, "-F", "-f", "--key-file", key, "--socket", self.munge_socket,
             "--pid-file", os.path.join(munge, "munged.pid"),
             "--seed-file", os.path.join(munge, "munged.seed"),
             "--log-file", os.path.join(munge, "munged.log")],
            os.path.join(munge, "munged.stdout"))
        wait_for(lambda: self._check_alive(self.munged, "munged") and
                 os.path.exists(self.munge_socket), 20, "munged's socket", 0.05)

    def _write_conf(self):
        self.conf = os.path.join(self.dir, "slurm.conf")
        node = os.path.join(self.dir, "node")  # each slurmd's own directory is mounted here
        os.makedirs(node)
        os.makedirs(os.path.join(self.dir, "state"))
        first, last = self.hosts.addresses[1], self.hosts.addresses[-1]
        prefix = first.rsplit(".", 1)[0]
        addr_range = "%s.[%s-%s]" % (prefix, first.rsplit(".", 1)[1], last.rsplit(".", 1)[1])
        conf = """\
ClusterName=ddprun
SlurmctldHost={ctl}({ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={dir}/state
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdSpoolDir={node}/spool
SlurmdPidFile={node}/slurmd.pid
SlurmdLogFile={node}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout={slurmd_timeout}
KillWait={kill_wait}
MinJobAge=600
InactiveLimit=0
SchedulerParameters=sched_interval=1
GresTypes=gpu
NodeName=n[1-{count}] NodeAddr={addr_range} CPUs={cpus} {gres}State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""".format(ctl=CTL_NAME, ctl_addr=self.hosts.addresses[0], socket=self.munge_socket,
           dir=self.dir, node=node, slurmd_timeout=self.slurmd_timeout,
           kill_wait=self.kill_wait, count=self.count,
           gres="Gres=gpu:%d " % self.gpus if self.gpus else "", addr_range=addr_range, cpus=self.cpus)
        with open(self.conf, "w") as f:
            f.write(conf)
        # Stand-in GPUs: plain files as their device files. Slurm allocates them and sets its GPU
        # variables (what the preset reads); nothing opens them (task/none: no device cgroup).
        if self.gpus:
            for n in range(self.gpus):
                open(os.path.join(self.dir, "gpu%d" % n), "w").close()
            with open(os.path.join(self.dir, "gres.conf"), "w") as f:
                f.write("Name=gpu File=%s/gpu[0-%d]\n" % (self.dir, self.gpus - 1))

    def _spawn(self, args, output):
        with open(output, "ab") as out:
            return subprocess.Popen(args, env=self.env() if self.conf else None,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _check_alive(self, proc, what):
        if proc.poll() is not None:
            raise AssertionError("%s exited (%s) while the cluster starts; see %s"
                                 % (what, proc.returncode, self.dir))
        return True

    def _check_daemons(self):
        self._check_alive(self.slurmctld, "slurmctld")
        for index, proc in enumerate(self.slurmds):
            if proc is not None:
                self._check_alive(proc, "slurmd of %s" % node_name(index))

    def _namespace_pids(self, host):
        proc = subprocess.run(["ip", "netns", "pids", self.hosts.names[host]],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              timeout=30)
        return [int(p) for p in proc.stdout.split()]

    def _kill_namespace(self, host):
        """SIGKILL to every process in a namespace, until none is left (bounded)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pids = self._namespace_pids(host)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

