"""The authenticated rendezvous (issue 12, docs/reliability.md) with the real binaries on
loopback: agents holding the job's token (from a file or the environment) form rounds and their
workers serve their own store (TORCHELASTIC_USE_AGENT_STORE=False, MASTER_PORT a free port, the
token not in their environment); a stranger without the token, or with another one, is refused
at once with one line naming the fix, while the job goes on; each refused connection is logged
once by the store's host; the static backend's workers serve their own store too, and a real
allreduce runs over it.
"""
import glob
import os
import subprocess
import time

import ddprun_testlib as lib

CHECK = os.path.join(lib.BUILD_DIR, "worker", "ddprun-allreduce-check")
STORE = os.path.join(lib.BUILD_DIR, "tools", "ddprun-store")
TOKEN = "an-authenticated-rendezvous-token-0123456789"
CONF = "join_timeout=30,keep_alive_interval=0.5,keep_alive_max_attempt=2"
REFUSAL_DEADLINE = 10.0  # a refused client must say so well before any join or connect timeout


class AuthenticatedRendezvousTest(lib.DdprunTestCase):
    require_binaries = (lib.DDPRUN, lib.FAKE_WORKER, CHECK, STORE)

    def setUp(self):
        super().setUp()
        self.port = lib.free_port()
        self.token_file = self.write_token("job.token", TOKEN + "\n")
        self.envs = self.path("envs")
        os.mkdir(self.envs)
        self.release = self.path("release")

    def write_token(self, name, text):
        path = self.path(name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def elastic_agent(self, token_conf="", env=None, nnodes="2:3", last_call=1):
        conf = CONF + ",last_call_timeout=%s" % last_call + ("," + token_conf if token_conf else "")
        return self.start_ddprun(
            "--nnodes=%s" % nnodes, "--nproc_per_node=1", "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % self.port, "--rdzv_id=auth-test",
            "--rdzv_conf=" + conf, lib.FAKE_WORKER, "--env-json-dir", self.envs,
            "--wait-for-file", self.release, env=self.env(env or {}))

    def wait_workers(self, count, exclude_ports=(), timeout=30):
        def ready():
            envs = [e for e in self.worker_envs() if e["MASTER_PORT"] not in exclude_ports]
            return envs if len(envs) == count else None
        return lib.wait_for(ready, timeout, "%d workers of a round" % count)

    def worker_envs(self):
        envs = []
        for path in glob.glob(os.path.join(self.envs, "env_*.json")):
            try:
                envs.append(lib.read_json(path))
            except ValueError:
                pass  # being written
        return envs

    def refused_quickly(self, proc, expected):
        start = time.monotonic()
        result = self.finish(proc, timeout=REFUSAL_DEADLINE + 20)
        self.assertNotEqual(result.returncode, 0, result.describe())
        self.assertLess(time.monotonic() - start, REFUSAL_DEADLINE, result.describe())
        self.assertIn(expected, result.stderr, result.describe())
        self.assertNoLauncherTraceback(result)
        return result

    def test_elastic_agents_with_the_token_train_and_strangers_are_refused(self):
        host = self.elastic_agent("token_file=" + self.token_file)
        other = self.elastic_agent(env={"DDPRUN_RDZV_TOKEN": TOKEN})
        envs = lib.wait_for(lambda: len(self.worker_envs()) == 2 and self.worker_envs(), 30,
                            "both workers of the authenticated round")
        for env in envs:
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "False", env)
            self.assertNotEqual(int(env["MASTER_PORT"]), self.port, env)
            self.assertNotIn("DDPRUN_RDZV_TOKEN", env)
            self.assertEqual(env["WORLD_SIZE"], "2", env)
        self.assertEqual(len({env["MASTER_PORT"] for env in envs}), 1, envs)

        # Strangers, while the job runs: an agent without the token, one with another token, and
        # a store client without the token. Each is refused at once with the fix in one line.
        self.refused_quickly(self.elastic_agent(), "requires a token")
        wrong = self.write_token("wrong.token", "another-job-token-0123456789")
        self.refused_quickly(self.elastic_agent("token_file=" + wrong),
                             "does not hold this node's token")
        probe = subprocess.run([STORE, "get", "--host", "127.0.0.1", "--port", str(self.port),
                                "--connect-timeout", "30", "ddprun/rdzv/auth-test/hint"],
                               capture_output=True, text=True, timeout=60, env=self.env())
        self.assertEqual(probe.returncode, 1, probe.stderr)
        self.assertIn("requires a token", probe.stderr)
        self.assertEqual(len(probe.stderr.strip().splitlines()), 1, probe.stderr)

        # The job's own token reads the rendezvous; the round was not disturbed.
        view = subprocess.run([STORE, "rdzv", "--endpoint", "127.0.0.1:%d" % self.port,
                               "--rdzv_id", "auth-test", "--json", "--token-file", self.token_file],
                              capture_output=True, text=True, timeout=60, env=self.env())
        self.assertEqual(view.returncode, 0, view.stderr)
        self.assertEqual(len(self.worker_envs()), 2)

        open(self.release, "w").close()
        results = [self.finish(proc) for proc in (host, other)]
        for result in results:
            self.assertExit(result, 0)
        # The store's host logged each of the 3 refused connections once (the wrong-token agent
        # is refused by its own check of the store's proof: the store sees it leave, no line).
        refusals = sum(r.stderr.count("refused the connection") for r in results)
        self.assertEqual(refusals, 2, "\n".join(r.describe() for r in results))

    def test_the_store_moves_with_its_authentication_when_its_host_is_lost(self):
        token = "token_file=" + self.token_file
        host = self.elastic_agent(token, last_call=60)
        lib.wait_for(lambda: not lib.port_is_free(self.port), 30, "the rendezvous store")
        others = [self.elastic_agent(token, last_call=60) for _ in range(2)]
        first = self.wait_workers(3)
        host.kill()
        second = self.wait_workers(2, exclude_ports={e["MASTER_PORT"] for e in first})
        self.assertTrue(all(e["TORCHELASTIC_USE_AGENT_STORE"] == "False" for e in second))
        # The moved store is authenticated: the job's token reads it, none is refused.
        view = subprocess.run([STORE, "rdzv", "--endpoint", "127.0.0.1:%d" % self.port,
                               "--rdzv_id", "auth-test", "--json", "--token-file", self.token_file],
                              capture_output=True, text=True, timeout=60, env=self.env())
        self.assertEqual(view.returncode, 0, view.stderr)
        self.assertIn('"store_epoch":1', view.stdout.replace(" ", ""))
        stranger = subprocess.run([STORE, "num-keys", "--port", str(self.port)],
                                  capture_output=True, text=True, timeout=60, env=self.env())
        self.assertEqual(stranger.returncode, 1, stranger.stderr)
        self.assertIn("requires a token", stranger.stderr)
        open(self.release, "w").close()
        for proc in others:
            self.assertExit(self.finish(proc), 0)

    def test_static_workers_serve_their_own_store_and_allreduce(self):
        master = lib.free_port()
        nodes = []
        for rank in range(2):
            nodes.append(self.start_ddprun(
                "--nnodes=2", "--node_rank=%d" % rank, "--nproc_per_node=2",
                "--master_addr=127.0.0.1", "--master_port=%d" % master,
                "--rdzv_conf=token_file=" + self.token_file, "--no_python", CHECK,
                "--backend", "cpu", env=self.env()))
        for result in [self.finish(proc, timeout=120) for proc in nodes]:
            self.assertExit(result, 0)
            self.assertRegex(result.stdout, r"rank \d/4 ok: backend=cpu", result.describe())

    def test_a_token_offered_to_a_store_without_one_is_refused(self):
        host = self.elastic_agent()  # no token: serves an unauthenticated store
        lib.wait_for(lambda: not lib.port_is_free(self.port), 30, "the rendezvous store")
        self.refused_quickly(self.elastic_agent("token_file=" + self.token_file),
                             "runs without a token")
        lib.kill_quietly(host.pid, 15)
        self.finish(host)

    def test_bad_token_sources_are_usage_errors(self):
        open_file = self.path("open.token")
        with open(open_file, "w") as f:
            f.write(TOKEN)
        os.chmod(open_file, 0o644)
        for conf, expected in (("token=" + TOKEN, "visible to every user"),
                               ("token_file=" + open_file, "chmod o-rw"),
                               ("token_file=" + self.path("missing"), "cannot read the token file")):
            result = self.ddprun("--nnodes=2", "--rdzv_backend=c10d",
                                 "--rdzv_endpoint=127.0.0.1:%d" % self.port,
                                 "--rdzv_conf=" + conf, lib.FAKE_WORKER, timeout=30)
            self.assertExit(result, 2)
            self.assertIn(expected, result.stderr, result.describe())
            self.assertNotIn(TOKEN, result.stderr)  # never echoed
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.describe())


if __name__ == "__main__":
    import unittest
    unittest.main()
