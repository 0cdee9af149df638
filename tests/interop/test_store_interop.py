"""Wire compatibility of ddprun's c10d store with real PyTorch, both protocol generations.

* A PyTorch client (torch 1.13 from Debian's /usr/bin/python3, torch 2.x from the venv made by
  scripts/setup-torch2-venv.sh) runs the same script against `ddprun-store serve` and against
  PyTorch's own server; the answers must be identical.
* ddprun's client (`ddprun-store get/set/...`) runs against PyTorch's own server.
* Clients of both generations share one ddprun server.

Environment: DDPRUN_BUILD_DIR (the CMake build dir), DDPRUN_TORCH2_PYTHON (optional override).
Exits 77 (skipped) when ddprun-store or every PyTorch is missing.
"""
import json
import os
import select
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("DDPRUN_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
STORE_BIN = os.path.join(BUILD_DIR, "tools", "ddprun-store")
# One PyTorch process from start to end, `import torch` included: ~6 s cold beside a CPU burner
# on the 2-core CI machine, more when another test imports torch at the same time (ctest -j2).
# It bounds only a broken run, so it is generous.
TIMEOUT = 120


def torch_major(python):
    if not python or not os.access(python, os.X_OK):
        return None
    try:
        out = subprocess.run([python, "-c", "import torch.distributed, torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return int(out.stdout.split(".")[0]) if out.returncode == 0 else None


def torch2_python():
    explicit = os.environ.get("DDPRUN_TORCH2_PYTHON")
    if explicit:
        return explicit
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "ddprun", "torch2-venv", "bin", "python")


TORCH1 = "/usr/bin/python3" if torch_major("/usr/bin/python3") == 1 else None
TORCH2 = torch2_python() if torch_major(torch2_python()) == 2 else None

if not os.access(STORE_BIN, os.X_OK) or not (TORCH1 or TORCH2):
    print(f"skipping: ddprun-store at {STORE_BIN} or PyTorch missing", file=sys.stderr)
    sys.exit(77)

# Every operation a PyTorch client offers, as JSON answers (exceptions by type name).
CLIENT_SCRIPT = r"""
import datetime, json, sys, threading
import torch, torch.distributed as d
T = datetime.timedelta
host, port = sys.argv[1], int(sys.argv[2])
v2 = int(torch.__version__.split(".")[0]) >= 2
s = d.TCPStore(host, port, 2, False, T(seconds=20))  # world size 2: sends ADD init/ 1
r = {}
def err(fn):
    try:
        fn()
        return "no error"
    except Exception as e:
        return type(e).__name__
s.set("k", "v"); r["get"] = s.get("k").decode()
s.set("empty", ""); r["get_empty"] = s.get("empty").decode()
r["add_missing"] = s.add("cnt", 5); r["add_negative"] = s.add("cnt", -7)
r["add_zero"] = s.add("cnt", 0); r["counter_text"] = s.get("cnt").decode()
r["cas_missing_expected"] = s.compare_set("cas", "x", "y").decode()
r["cas_create"] = s.compare_set("cas", "", "a").decode()
r["cas_mismatch"] = s.compare_set("cas", "zzz", "b").decode()
r["cas_swap"] = s.compare_set("cas", "a", "b").decode()
r["num_keys"] = s.num_keys()
r["delete"] = s.delete_key("k"); r["delete_again"] = s.delete_key("k")
r["num_keys_after_delete"] = s.num_keys()
other = d.TCPStore(host, port, None, False, T(seconds=20))
setter = threading.Thread(target=lambda: other.set("later", "1")); setter.start()
s.wait(["later"], T(seconds=20)); setter.join(); r["wait_then_get"] = s.get("later").decode()
r["wait_timeout"] = err(lambda: s.wait(["never"], T(milliseconds=300)))
r["after_timeout"] = s.add("cnt", 0)
if v2:
    r["check"] = [s.check(["cas", "cnt"]), s.check(["cas", "nope"]), s.check([])]
    s.multi_set(["m1", "m2"], ["1", "22"])
    r["multi_get"] = [x.decode() for x in s.multi_get(["m1", "m2"])]
    s.append("m1", "+"); s.append("fresh", "x")
    r["append"] = [s.get("m1").decode(), s.get("fresh").decode()]
    # A key set after the timed-out wait must not shift later replies (CANCEL_WAIT).
    other.set("never", "late")
    other.get("never")  # a round trip: the SET is applied before s counts the keys
    r["after_cancel"] = [s.num_keys(), s.add("cnt", 0)]
    if hasattr(s, "list_keys"):
        r["list_keys"] = sorted(s.list_keys())
    if hasattr(s, "queue_push"):
        s.queue_push("q", "a"); s.queue_push("q", "b")
        r["queue"] = [s.queue_len("q"), s.queue_pop("q", block=False).decode(),
                      s.queue_pop("q").decode(), s.queue_len("q")]
        r["queue_empty"] = err(lambda: s.queue_pop("q", block=False))
    if hasattr(s, "barrier"):
        s.barrier("bar", 1); r["barrier_counter"] = s.get("bar").decode()
print(json.dumps(r, sort_keys=True))
"""

TORCH_SERVER_SCRIPT = r"""
import datetime, sys
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), wait_for_workers=False)
print(f"listening on 127.0.0.1:{s.port}", flush=True)
sys.stdin.read()
"""


class Server:
    """A store server process that prints 'listening on HOST:PORT' first and stops on EOF/kill."""

    def __init__(self, argv):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"server {argv} did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def read_line(proc, expected):
    """Waits (at most TIMEOUT) for `proc` to print `expected` as its next stdout line."""
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != expected:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"expected {expected!r} from {proc.args[0]}, got {line!r}:\n"
                             f"{err[-3000:]}")


def ddprun_server(threads=1):
    return Server([STORE_BIN, "serve", "--host", "127.0.0.1", "--port", "0",
                   "--threads", str(threads)])


def torch_server(python):
    return Server([python, "-c", TORCH_SERVER_SCRIPT])


def run_client_script(python, port):
    out = subprocess.run([python, "-c", CLIENT_SCRIPT, "127.0.0.1", str(port)],
                         capture_output=True, text=True, timeout=TIMEOUT)
    if out.returncode != 0:
        raise AssertionError(f"PyTorch client failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def torch_client_prints(python, port, expressions):
    """Runs a PyTorch client `s` against the store at `port` and prints `expressions`."""
    return subprocess.run(
        [python, "-c", "import sys, datetime, torch.distributed as d; "
         "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), None, False, datetime.timedelta(seconds=20)); "
         f"print({expressions})", str(port)],
        capture_output=True, text=True, timeout=TIMEOUT)


def cli(port, *args, legacy=False, check=True):
    argv = [STORE_BIN, args[0], "--port", str(port), "--timeout", "5"]
    argv += ["--legacy"] if legacy else []
    out = subprocess.run(argv + list(args[1:]), capture_output=True, text=True, timeout=TIMEOUT)
    if check and out.returncode != 0:
        raise AssertionError(f"ddprun-store {' '.join(args)} failed: {out.stderr}")
    return out


class PyTorchClientAgainstDdprunServer(unittest.TestCase):
    def same_answers(self, python):
        with torch_server(python) as reference:
            expected = run_client_script(python, reference.port)
        for threads in (1, 3):
            with self.subTest(threads=threads), ddprun_server(threads) as ours:
                self.assertEqual(run_client_script(python, ours.port), expected)
        return expected

    @unittest.skipUnless(TORCH1, "Debian's python3-torch (1.13) is not installed")
    def test_torch1_client_gets_pytorch_answers(self):
        answers = self.same_answers(TORCH1)
        self.assertEqual(answers["cas_missing_expected"], "x")
        self.assertEqual(answers["num_keys"], 5)  # init/, k, empty, cnt, cas

    @unittest.skipUnless(TORCH2, "no torch 2.x venv (run scripts/setup-torch2-venv.sh)")
    def test_torch2_client_gets_pytorch_answers(self):
        answers = self.same_answers(TORCH2)
        self.assertEqual(answers["wait_timeout"], "DistStoreError")
        self.assertEqual(answers["multi_get"], ["1", "22"])


class DdprunClientAgainstPyTorchServer(unittest.TestCase):
    def exercise(self, python, legacy):
        with torch_server(python) as server:
            port = server.port
            run = lambda *a, **k: cli(port, *a, legacy=legacy, **k).stdout.strip()
            cli(port, "set", "k", "v", legacy=legacy)
            self.assertEqual(run("get", "k"), "v")
            self.assertEqual(run("add", "cnt", "5"), "5")
            self.assertEqual(run("add", "cnt", "-7"), "-2")
            self.assertEqual(run("compare-set", "cas", "", "a"), "a")
            self.assertEqual(run("compare-set", "cas", "zzz", "b"), "a")
            self.assertEqual(run("compare-set", "cas", "a", "b"), "b")
            self.assertEqual(run("check", "k", "cas"), "true")
            self.assertEqual(run("check", "k", "nope"), "false")
            timed_out = cli(port, "wait", "never", "--timeout", "0.3", legacy=legacy, check=False)
            self.assertEqual(timed_out.returncode, 1, timed_out.stderr)
            self.assertIn("timeout", timed_out.stderr)
            cli(port, "wait", "k", legacy=legacy)
            self.assertEqual(run("num-keys"), "3")
            self.assertEqual(run("delete", "k"), "true")
            self.assertEqual(run("delete", "k"), "false")
            self.assertEqual(run("get", "--raw", "/cas"), "b")
            if not legacy:
                cli(port, "multi-set", "a", "1", "b", "2")
                self.assertEqual(run("multi-get", "a", "b"), "1\n2")
                cli(port, "append", "a", "x")
                self.assertEqual(run("get", "a"), "1x")
                self.assertEqual(run("ping"), str(0x64647072))
                cli(port, "queue-push", "q", "first")
                cli(port, "queue-push", "q", "second")
                self.assertEqual(run("queue-len", "q"), "2")
                self.assertEqual(run("queue-pop", "q"), "first")
                popped = torch_client_prints(
                    python, port, "s.queue_pop('q', block=False).decode(), s.queue_len('q')")
                self.assertEqual(popped.stdout.strip(), "second 0", popped.stderr)
                empty = cli(port, "queue-pop", "q", legacy=legacy, check=False)
                self.assertEqual(empty.returncode, 1, empty.stderr)
                self.assertIn("'q' is empty", empty.stderr)
            # What ddprun's client wrote is what a PyTorch client reads.
            read = torch_client_prints(python, port, "s.get('cas').decode(), s.add('cnt', 0)")
            self.assertEqual(read.stdout.strip(), "b -2", read.stderr)

    @unittest.skipUnless(TORCH1, "Debian's python3-torch (1.13) is not installed")
    def test_against_torch1_server(self):
        self.exercise(TORCH1, legacy=True)

    @unittest.skipUnless(TORCH2, "no torch 2.x venv (run scripts/setup-torch2-venv.sh)")
    def test_against_torch2_server(self):
        self.exercise(TORCH2, legacy=False)

    @unittest.skipUnless(TORCH1, "Debian's python3-torch (1.13) is not installed")
    def test_validated_client_against_torch1_server_fails_fast_with_a_hint(self):
        with torch_server(TORCH1) as server:
            out = subprocess.run([STORE_BIN, "num-keys", "--port", str(server.port),
                                  "--connect-timeout", "1"],
                                 capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(out.returncode, 1)
            self.assertIn("legacy", out.stderr)
            self.assertEqual(cli(server.port, "num-keys", legacy=True).stdout.strip(), "0")


@unittest.skipUnless(TORCH1 and TORCH2, "needs both PyTorch 1.13 and 2.x")
class BothGenerationsOnOneServer(unittest.TestCase):
    def test_legacy_and_validated_clients_share_keys(self):
        with ddprun_server(threads=3) as server:  # clients on different server threads
            script = ("import sys, datetime, torch.distributed as d; "
                      "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), None, False, datetime.timedelta(seconds=20)); "
                      "exec(sys.argv[2])")
            def py(python, code):
                out = subprocess.run([python, "-c", script, str(server.port), code],
                                     capture_output=True, text=True, timeout=TIMEOUT)
                self.assertEqual(out.returncode, 0, out.stderr)
                return out.stdout.strip()
            py(TORCH1, "s.set('from1', 'one'); s.add('n', 1)")
            py(TORCH2, "s.set('from2', 'two'); s.add('n', 1)")
            self.assertEqual(py(TORCH2, "print(s.get('from1').decode(), s.add('n', 0))"), "one 2")
            self.assertEqual(py(TORCH1, "print(s.get('from2').decode(), s.num_keys())"), "two 3")
            # A 1.13 client blocked in get() is released by a 2.x client's set(). Both import
            # torch first (seconds each on a cold machine, at once here) and say when they are
            # connected; the set is sent only once the waiter is about to block, so no import
            # runs inside the waiter's get (bounded by its store's 20 s timeout).
            waiter = subprocess.Popen(
                [TORCH1, "-c", script, str(server.port),
                 "print('waiting', flush=True); print(s.get('late').decode())"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            setter = subprocess.Popen(
                [TORCH2, "-c", script, str(server.port),
                 "print('ready', flush=True); sys.stdin.readline(); s.set('late', 'released')"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                read_line(waiter, "waiting")
                read_line(setter, "ready")
                setter.stdin.write("go\n")
                setter.stdin.flush()
                out, err = waiter.communicate(timeout=TIMEOUT)
                _, setter_err = setter.communicate(timeout=TIMEOUT)
            finally:
                for proc in (waiter, setter):
                    if proc.poll() is None:
                        proc.kill()
                        proc.communicate()
            self.assertEqual(setter.returncode, 0, setter_err)
            self.assertEqual((waiter.returncode, out.strip()), (0, "released"), err)


if __name__ == "__main__":
    unittest.main()
