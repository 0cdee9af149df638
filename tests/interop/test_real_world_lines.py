"""Real-world torchrun command lines (tests/interop/real_world_lines.json) run under ddprun with
real PyTorch workers (issue 16). Exit 77 (skipped) without torch.

Each line of the table becomes one test method, test_line_<id>, whose docstring names the line's
id and source. A line is run as the tool that writes it would run it: `nodes` agents on loopback
(node rank i on agent i), placeholders substituted ({port}: a fresh free port per line,
{node_rank}, {nproc}, {world_size}), the line's `env` added, and `--python /usr/bin/python3` put
before the line's arguments; the script is report_env_worker.py OUTDIR, which records its
environment and arguments in OUTDIR/env_<RANK>.json, forms a gloo group through env:// and
checks an all_reduce of the ranks. `program` names the launcher: ddprun (the default), or
ddprun-launch (the build's link to ddprun, torch.distributed.launch's stand-in) for the lines
that platforms still write with `python -m torch.distributed.launch`.

- expect.exit 0: every agent exits 0; every rank 0..world-1 wrote its json; RANK, LOCAL_RANK,
  WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE are consistent; every worker
  agrees on MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID; expect.worker_env values are exact
  (MASTER_PORT={port} for every static line that gives a port, checked by
  test_table_is_well_formed), expect.worker_env_match values are regular expressions; the
  all_reduce sum is world*(world-1)/2. The workers' arguments are OUTDIR alone, or with
  expect.local_rank_arg (local_rank or local-rank: torch.distributed.launch's argument)
  --<it>=<LOCAL_RANK> OUTDIR: those lines run local_rank_arg_worker.py, which parses
  --local_rank with argparse as AzureML's samples do and fails without it.
- expect.exit 2: every agent exits 2 with exactly one non-empty stderr line, starting
  `ddprun: error: ` and containing each expect.stderr substring, no traceback, nothing on
  stdout, and no worker ran (no json). expect.today marks lines refused only because a planned
  feature is missing (elastic: issue 10, etcd: issue 14): they flip to exit 0 when it lands.
- every line is also run with --dry_run added (on each agent): same exit code as the real run
  and, for a refusal, the same stderr text; a dry run starts no worker.

Two named tests are the issue's acceptance: the HF accelerate two-machine static line and the
ddp-tutorial-series run_example.sh line train while an unrelated listener holds port 29500, and
their workers get MASTER_PORT={port} from --rdzv_endpoint.

Runs are bounded (RUN_TIMEOUT per line); nothing sleeps to synchronise: agents are polled until
they exit, and once one agent exits with an unexpected status the others get PEER_GRACE seconds
before they are killed, so that a broken line fails fast instead of waiting for its timeout.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402
from etcd_cluster import EtcdCluster, etcd_available  # noqa: E402

lib.exit_if_no_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE_PATH = os.path.join(HERE, "real_world_lines.json")
WORKER = os.path.join(HERE, "report_env_worker.py")
LOCAL_RANK_ARG_WORKER = os.path.join(HERE, "local_rank_arg_worker.py")
PROGRAMS = {"ddprun": lib.DDPRUN, "ddprun-launch": lib.DDPRUN_LAUNCH}

NPROC = 2                # workers per agent: at most 2 on the 2-core CI machine
# Seconds for one line's real run, all agents together: up to 4 workers importing torch at once
# on 2 cores, cold, beside other tests. It costs time only when a line is broken, so it is well
# above report_env_worker.GROUP_TIMEOUT (a rank waiting for a peer that never comes).
RUN_TIMEOUT = 240.0
DRY_RUN_TIMEOUT = 30.0
PEER_GRACE = 20.0        # after one agent exits unexpectedly, the others' remaining time
POLL_INTERVAL = 0.02
HELD_PORT = 29500        # torchrun's default master port, held by an unrelated listener

PLACEHOLDERS = ("port", "node_rank", "nproc", "world_size")
PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")
LINE_KEYS = {"id", "source", "origin", "program", "nodes", "args", "env", "expect"}
EXPECT_KEYS = {"exit", "stderr", "today", "worker_env", "worker_env_match", "local_rank_arg"}
FLAG_OPTIONS = {"standalone", "module", "no_python", "run_path", "virtual_local_rank", "m",
                "use_env"}
ERROR_PREFIX = "ddprun: error: "


def load_table():
    with open(TABLE_PATH) as f:
        return json.load(f)


TABLE = load_table()


def line_by_id(line_id):
    for line in TABLE:
        if line["id"] == line_id:
            return line
    raise KeyError("no line %r in %s" % (line_id, TABLE_PATH))


def substitute(text, values):
    """Replaces {name} placeholders; values holds every known placeholder's text."""
    return PLACEHOLDER_RE.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0),
                              text)


def expected_stderr(expect):
    needles = expect.get("stderr", [])
    return [needles] if isinstance(needles, str) else list(needles)


def launcher_options(line):
    """The line's rendezvous-relevant settings as torchrun would read them: command line first,
    then PET_* variables (option dest names: rdzv_backend, master_port, standalone, ...)."""
    options = {}
    args = list(line["args"])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            name, eq, value = arg.lstrip("-").partition("=")
            name = name.replace("-", "_")
            if eq:
                options[name] = value
            elif name in FLAG_OPTIONS:
                options[name] = "1"
            elif i + 1 < len(args):
                options[name] = args[i + 1]
                i += 1
        i += 1
    for key, value in line.get("env", {}).items():
        if key.startswith("PET_"):
            options.setdefault(key[len("PET_"):].lower(), value)
    return options


def is_static_line(line):
    options = launcher_options(line)
    return options.get("rdzv_backend", "static") == "static" and options.get("standalone") != "1"


def static_port_given(line):
    """True when a static line names its master port (--rdzv_endpoint HOST:PORT, --master_port,
    PET_MASTER_PORT or PET_RDZV_ENDPOINT): the workers must then get MASTER_PORT={port}."""
    if not is_static_line(line):
        return False
    options = launcher_options(line)
    return ":" in options.get("rdzv_endpoint", "") or "master_port" in options


def describe_line(line):
    return "line %s (%s)" % (line["id"], line["source"])


class Outcome:
    """One agent's finished run: exit code (None: killed after the timeout), output."""

    def __init__(self, argv, returncode, stdout, stderr, elapsed, killed):
        self.result = lib.Result(argv, returncode, stdout, stderr, elapsed)
        self.killed = killed

    @property
    def returncode(self):
        return self.result.returncode

    @property
    def stderr(self):
        return self.result.stderr

    @property
    def stdout(self):
        return self.result.stdout


class RealWorldLinesTest(lib.DdprunTestCase):

    require_binaries = tuple(PROGRAMS.values())

    # -- running one line ----------------------------------------------------------------------

    def values(self, line, port, node):
        return {"port": str(port), "node_rank": str(node), "nproc": str(NPROC),
                "world_size": str(line["nodes"] * NPROC)}

    def agent_argv(self, line, port, node, out_dir, dry_run):
        values = self.values(line, port, node)
        argv = [PROGRAMS[line.get("program", "ddprun")]]
        if dry_run:
            argv.append("--dry_run")
        argv += ["--python", lib.SYSTEM_PYTHON]
        argv += [substitute(arg, values) for arg in line["args"]]
        worker = LOCAL_RANK_ARG_WORKER if "local_rank_arg" in line["expect"] else WORKER
        return argv + [worker, out_dir]

    def agent_env(self, line, port, node):
        values = self.values(line, port, node)
        tmpdir = self.path("tmpdir")  # keeps kept log dirs (--tee) inside the test's temp dir
        os.makedirs(tmpdir, exist_ok=True)
        extra = {"TMPDIR": tmpdir, "REPORT_ENV_NODE": str(node)}
        extra.update({key: substitute(value, values) for key, value in line["env"].items()})
        return self.env(extra)

    def new_out_dir(self, name):
        out_dir = self.path(name)
        os.makedirs(out_dir)
        return out_dir

    def run_agents(self, line, port, out_dir, expected_exit):
        """Starts every agent at once and waits for all of them (bounded)."""
        procs, logs = [], []
        for node in range(line["nodes"]):
            stdout_path = self.path("%s.node%d.stdout" % (os.path.basename(out_dir), node))
            stderr_path = self.path("%s.node%d.stderr" % (os.path.basename(out_dir), node))
            with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
                procs.append(self.start(self.agent_argv(line, port, node, out_dir, False),
                                        env=self.agent_env(line, port, node), stdout=out,
                                        stderr=err))
            logs.append((stdout_path, stderr_path))
        killed = self.wait_agents(procs, expected_exit)
        outcomes = []
        for proc, (stdout_path, stderr_path), was_killed in zip(procs, logs, killed):
            outcomes.append(Outcome(proc.argv, None if was_killed else proc.returncode,
                                    lib.read_file(stdout_path), lib.read_file(stderr_path),
                                    time.monotonic() - proc.start_time, was_killed))
        return outcomes

    @staticmethod
    def wait_agents(procs, expected_exit):
        """Polls until every agent exited; returns which ones had to be killed."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            codes = [proc.poll() for proc in procs]
            if None not in codes:
                return [False] * len(procs)
            now = time.monotonic()
            if any(code is not None and code != expected_exit for code in codes):
                deadline = min(deadline, now + PEER_GRACE)
            if now >= deadline:
                break
            time.sleep(POLL_INTERVAL)
        killed = []
        for proc in procs:
            alive = proc.poll() is None
            if alive:
                lib.killpg_quietly(proc.pid)
                lib.kill_quietly(proc.pid)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            killed.append(alive)
        return killed

    def dry_run_agents(self, line, port, out_dir):
        outcomes = []
        for node in range(line["nodes"]):
            result = self.run_launcher(self.agent_argv(line, port, node, out_dir, True),
                                       env=self.agent_env(line, port, node),
                                       timeout=DRY_RUN_TIMEOUT)
            outcomes.append(Outcome(result.args, result.returncode, result.stdout, result.stderr,
                                    result.elapsed, False))
        return outcomes

    # -- checks --------------------------------------------------------------------------------

    def report(self, line, outcomes, extra=""):
        parts = [describe_line(line)]
        if extra:
            parts.append(extra)
        for node, outcome in enumerate(outcomes):
            state = "killed after the time limit" if outcome.killed else "exited"
            parts.append("=== agent %d (%s) ===\n%s" % (node, state, outcome.result.describe()))
        return "\n".join(parts)

    def json_files(self, out_dir):
        return sorted(name for name in os.listdir(out_dir)
                      if name.startswith("env_") and name.endswith(".json"))

    def check_exit_codes(self, line, outcomes, expected_exit, what):
        codes = [outcome.returncode for outcome in outcomes]
        self.assertEqual(codes, [expected_exit] * len(outcomes),
                         self.report(line, outcomes, "%s: exit codes %s, expected %s on every "
                                     "agent" % (what, codes, expected_exit)))

    def check_refusal(self, line, outcomes, out_dir, what):
        needles = expected_stderr(line["expect"])
        for node, outcome in enumerate(outcomes):
            message = self.report(line, outcomes, "%s, agent %d" % (what, node))
            lines = [text for text in outcome.stderr.splitlines() if text.strip()]
            self.assertEqual(len(lines), 1, "expected one stderr line\n" + message)
            self.assertTrue(lines[0].startswith(ERROR_PREFIX),
                            "the error does not start with %r\n%s" % (ERROR_PREFIX, message))
            for needle in needles:
                self.assertIn(needle, lines[0], message)
            self.assertNotIn("Traceback", outcome.stderr, message)
            self.assertNoLauncherTraceback(outcome.result)
            self.assertEqual(outcome.stdout, "", "a refused line printed on stdout\n" + message)
        self.assertEqual(self.json_files(out_dir), [],
                         self.report(line, outcomes, "%s: a worker ran" % what))

    def check_training(self, line, outcomes, out_dir, port):
        nodes = line["nodes"]
        world = nodes * NPROC
        expect = line["expect"]
        values = self.values(line, port, 0)
        context = lambda extra: self.report(line, outcomes, extra)  # noqa: E731
        self.assertEqual(self.json_files(out_dir), sorted("env_%d.json" % r for r in range(world)),
                         context("not every rank 0..%d wrote its json" % (world - 1)))
        records = [lib.read_json(os.path.join(out_dir, "env_%d.json" % r)) for r in range(world)]
        check_group_rank = is_static_line(line) or nodes == 1
        for rank, record in enumerate(records):
            env = record["env"]
            where = context("rank %d: %s" % (rank, json.dumps(record, sort_keys=True)))
            self.assertEqual(env["RANK"], str(rank), where)
            self.assertEqual(env["WORLD_SIZE"], str(world), where)
            self.assertEqual(env["LOCAL_WORLD_SIZE"], str(NPROC), where)
            self.assertEqual(env["GROUP_WORLD_SIZE"], str(nodes), where)
            self.assertIn(env["LOCAL_RANK"], [str(i) for i in range(NPROC)], where)
            self.assertEqual(int(env["GROUP_RANK"]) * NPROC + int(env["LOCAL_RANK"]), rank, where)
            if check_group_rank:  # static: GROUP_RANK is --node_rank; one node: 0
                self.assertEqual(env["GROUP_RANK"], env["REPORT_ENV_NODE"], where)
            for key, value in expect.get("worker_env", {}).items():
                self.assertEqual(env.get(key), substitute(value, values),
                                 "%s\n%s" % (key, where))
            for key, pattern in expect.get("worker_env_match", {}).items():
                self.assertRegex(env.get(key) or "", pattern, "%s\n%s" % (key, where))
            argv = [out_dir]  # torch.distributed.launch's argument goes right after the script
            if "local_rank_arg" in expect:
                argv.insert(0, "--%s=%s" % (expect["local_rank_arg"], env["LOCAL_RANK"]))
            self.assertEqual(record["argv"], argv, where)
            self.assertEqual(record.get("pg_rank"), rank, where)
            self.assertEqual(record.get("pg_world_size"), world, where)
            self.assertEqual(record.get("allreduce_sum"), world * (world - 1) // 2, where)
        for key in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                    "TORCHELASTIC_USE_AGENT_STORE"):
            seen = sorted(set(str(record["env"].get(key)) for record in records))
            self.assertEqual(len(seen), 1, context("workers disagree on %s: %s" % (key, seen)))

    def run_line(self, line, port=None):
        """The real run, checked against expect; returns (port, outcomes)."""
        port = port or lib.free_port()
        expected_exit = line["expect"]["exit"]
        out_dir = self.new_out_dir("run")
        outcomes = self.run_agents(line, port, out_dir, expected_exit)
        self.check_exit_codes(line, outcomes, expected_exit, "run")
        for outcome in outcomes:
            self.assertNoLauncherTraceback(outcome.result)
        if expected_exit == 0:
            self.check_training(line, outcomes, out_dir, port)
        else:
            self.check_refusal(line, outcomes, out_dir, "run")
        return port, outcomes

    def dry_run_line(self, line, port, real_outcomes):
        """--dry_run on every agent: the real run's exit code and, for a refusal, its message."""
        expected_exit = line["expect"]["exit"]
        out_dir = self.new_out_dir("dry_run")
        outcomes = self.dry_run_agents(line, port, out_dir)
        self.check_exit_codes(line, outcomes, expected_exit, "dry run")
        self.assertEqual(self.json_files(out_dir), [],
                         self.report(line, outcomes, "a dry run started a worker"))
        if expected_exit != 0:
            self.check_refusal(line, outcomes, out_dir, "dry run")
            if real_outcomes is not None:
                for node, (dry, real) in enumerate(zip(outcomes, real_outcomes)):
                    self.assertEqual(dry.stderr.strip(), real.stderr.strip(),
                                     "%s, agent %d: the dry run's message differs from the real "
                                     "run's" % (describe_line(line), node))

    def etcd_port(self):
        """A one-member etcd on a free port for this line ({port}: its client port)."""
        if not etcd_available():
            self.skipTest("no etcd (scripts/install-deps.sh installs Debian's etcd-server)")
        cluster = EtcdCluster(1)
        cluster.__enter__()
        self.addCleanup(cluster.__exit__, None, None, None)
        return cluster.client_ports[0]

    def check_line(self, line):
        uses_etcd = launcher_options(line).get("rdzv_backend", "").startswith("etcd")
        port = self.etcd_port() if uses_etcd and line["expect"]["exit"] == 0 else lib.free_port()
        real = None
        with self.subTest(part="run"):
            _, real = self.run_line(line, port)
        with self.subTest(part="dry_run"):
            self.dry_run_line(line, port, real)

    # -- the acceptance: port 29500 held by an unrelated listener ----------------------

    def hold_port(self, port):
        """Locks `port` against other tests and makes sure something unrelated listens there."""
        lock = lib.PortLock(port)
        lock.__enter__()
        self.addCleanup(lock.__exit__, None, None, None)
        if lib.port_is_free(port):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.addCleanup(listener.close)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("0.0.0.0", port))
            listener.listen(16)
        self.assertFalse(lib.port_is_free(port), "port %d should be held" % port)

    def check_with_default_port_held(self, line_id, master_addr):
        line = line_by_id(line_id)
        self.assertEqual(line["expect"]["exit"], 0, describe_line(line))
        self.hold_port(HELD_PORT)
        port = lib.free_port()
        self.assertNotEqual(port, HELD_PORT)
        _, outcomes = self.run_line(line, port)
        for name in self.json_files(self.path("run")):
            env = lib.read_json(self.path("run", name))["env"]
            self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"]), (master_addr, str(port)),
                             self.report(line, outcomes, "%s: %s" % (name, env)))

    def test_accelerate_two_machines_train_with_29500_held(self):
        """HF accelerate's two-machine static line (--rdzv_endpoint 127.0.0.1:{port}) trains on
        two loopback agents while an unrelated listener holds 29500; MASTER_PORT={port}."""
        self.check_with_default_port_held("accelerate-multi-machine", "127.0.0.1")

    def test_run_example_sh_trains_with_29500_held(self):
        """ddp-tutorial-series run_example.sh (--rdzv_endpoint=localhost:{port}, static) trains
        while an unrelated listener holds 29500; MASTER_ADDR=localhost, MASTER_PORT={port}."""
        self.check_with_default_port_held("pytorch-examples-run-example-sh", "localhost")

    # -- the table itself ----------------------------------------------------------------------

    def test_table_is_well_formed(self):
        ids = [line["id"] for line in TABLE]
        self.assertEqual(len(ids), len(set(ids)), "duplicate ids: %s" % ids)
        for line in TABLE:
            where = describe_line(line)
            self.assertLessEqual(set(line), LINE_KEYS, where)
            self.assertLessEqual({"id", "source", "nodes", "args", "env", "expect"}, set(line),
                                 where)
            self.assertRegex(line["id"], r"^[a-z0-9]+(-[a-z0-9]+)*$", where)
            self.assertIn(line["nodes"], (1, 2), where)
            self.assertIn(line.get("program", "ddprun"), PROGRAMS, where)
            self.assertLessEqual(set(line["expect"]), EXPECT_KEYS, where)
            self.assertIn(line["expect"]["exit"], (0, 2), where)
            texts = list(line["args"]) + list(line["env"].values()) + [
                str(v) for v in line["expect"].get("worker_env", {}).values()]
            for text in texts:
                for name in PLACEHOLDER_RE.findall(text):
                    self.assertIn(name, PLACEHOLDERS, "%s: unknown placeholder {%s}" % (where,
                                                                                       name))
            self.assertTrue(any("{nproc}" in text for text in texts),
                            "%s: the worker count must be {nproc}" % where)
            if line["nodes"] > 1:
                self.assertTrue(any("{node_rank}" in t for t in texts) or
                                not is_static_line(line), "%s: static without {node_rank}" % where)
                self.assertNotIn("localhost", " ".join(texts),
                                 "%s: multi-node lines use 127.0.0.1" % where)
            if line["expect"]["exit"] == 0:
                self.assertNotIn("stderr", line["expect"], where)
                self.assertNotIn("today", line["expect"], where)
                self.assertIn(line["expect"].get("local_rank_arg", "local_rank"),
                              ("local_rank", "local-rank"), where)
                if static_port_given(line):
                    self.assertEqual(line["expect"].get("worker_env", {}).get("MASTER_PORT"),
                                     "{port}", "%s: a static line with a port must expect "
                                     "MASTER_PORT={port}" % where)
            else:
                self.assertTrue(expected_stderr(line["expect"]), where)
                self.assertNotIn("worker_env", line["expect"], where)
                self.assertNotIn("local_rank_arg", line["expect"], where)


def _make_line_test(line):
    def test(self):
        self.check_line(line)
    test.__doc__ = "%s: %s" % (line["id"], line["source"])
    test.__name__ = "test_line_" + line["id"].replace("-", "_")
    return test


for _line in TABLE:
    _test = _make_line_test(_line)
    setattr(RealWorldLinesTest, _test.__name__, _test)
del _line, _test


if __name__ == "__main__":
    unittest.main()
