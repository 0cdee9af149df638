"""torchrun's flags and variables that ddprun once accepted without effect:
--event-log-handler=console (torchelastic.worker.status.* JSON lines on stderr), null and
dynamic_rendezvous (nothing, as open-source torch), TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (worker
rank 0 serves the workers' store) and --start-method (accepted: it concerns function entry
points, scripts are exec'd as under torchrun)."""
import json
import re
import unittest

import ddprun_testlib as lib
from ddprun_testlib import FAKE_WORKER, DdprunTestCase, read_int_file, read_json

PREFIX = "torchelastic.worker.status."


def torchelastic_events(stderr):
    events = []
    for line in stderr.splitlines():
        if line.startswith('{"name":"' + PREFIX):
            events.append(json.loads(line))
    return events


class ConsoleEventsTest(DdprunTestCase):

    def run_pair(self, *worker, handler="console", extra=()):
        return self.ddprun("--standalone", "--nproc_per_node=2",
                           "--event-log-handler=%s" % handler, *extra, "--no_python",
                           FAKE_WORKER, "--pid-file", self.path("pid_${local_rank}"), *worker)

    def test_success(self):
        result = self.run_pair("--exit", "0")
        self.assertExit(result, 0)
        events = torchelastic_events(result.stderr)
        names = [e["name"][len(PREFIX):] for e in events]
        self.assertEqual(names, ["RENDEZVOUS", "START", "START", "SUCCEEDED", "SUCCEEDED",
                                 "SUCCEEDED"], result.describe())
        self.assertEqual([e["source"] for e in events],
                         ["AGENT", "WORKER", "WORKER", "WORKER", "WORKER", "AGENT"])
        pids = [str(read_int_file(self.path("pid_%d" % r))) for r in range(2)]
        self.assertEqual([e["metadata"]["worker_id"] for e in events[1:5]], pids * 2)
        for event in events:
            metadata = event["metadata"]
            self.assertEqual(sorted(metadata), sorted([
                "run_id", "global_rank", "group_rank", "worker_id", "role", "hostname", "state",
                "total_run_time", "rdzv_backend", "raw_error", "metadata", "agent_restarts",
                "duration_ms"]))
            self.assertEqual(metadata["rdzv_backend"], "c10d")
            self.assertEqual(json.loads(metadata["metadata"])["entry_point"], "fake_worker")
        self.assertEqual(json.loads(events[4]["metadata"]["metadata"])["local_rank"], [1])

    def test_failure_names_the_failed_and_the_terminated_worker(self):
        result = self.run_pair("--if-local-rank", "1", "--write-error-file", "boom",
                               "--if-local-rank", "1", "--exit", "3", "--sleep", "60")
        self.assertExit(result, 3)
        events = torchelastic_events(result.stderr)
        ends = {(e["name"][len(PREFIX):], e["source"], e["metadata"]["global_rank"]): e
                for e in events[3:]}
        self.assertEqual(sorted(ends, key=str), sorted([
            ("FAILED", "WORKER", 0), ("FAILED", "WORKER", 1), ("SUCCEEDED", "AGENT", None)],
            key=str), result.describe())
        stopped = json.loads(ends[("FAILED", "WORKER", 0)]["metadata"]["metadata"])
        self.assertEqual(stopped["exit_code"], [-15])  # the agent's SIGTERM, as torch 2.x
        failed = ends[("FAILED", "WORKER", 1)]["metadata"]
        self.assertEqual(failed["global_rank"], 1)
        self.assertEqual(json.loads(failed["raw_error"])["message"]["message"], "boom")
        inner = json.loads(failed["metadata"])
        self.assertEqual(inner["exit_code"], [3])
        self.assertEqual(inner["worker_pid"], [read_int_file(self.path("pid_1"))])

    def test_null_and_dynamic_rendezvous_tell_nothing(self):
        for handler in ("null", "dynamic_rendezvous"):
            result = self.run_pair("--exit", "0", handler=handler)
            self.assertExit(result, 0)
            self.assertNotIn(PREFIX, result.stderr, handler)

    def test_start_method_is_accepted(self):
        for method in ("spawn", "fork", "forkserver"):
            result = self.ddprun("--standalone", "--start-method=%s" % method, "--no_python",
                                 FAKE_WORKER, "--exit", "0")
            self.assertExit(result, 0)
        self.assertExit(self.ddprun("--start-method=clone", "--no_python", FAKE_WORKER), 2)


class SharedStoreTest(DdprunTestCase):

    def launch(self, env_value, *flags):
        env = {"LOGLEVEL": "INFO"}  # for "agent store listening on HOST:PORT"
        if env_value is not None:
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = env_value
        result = self.ddprun(*flags, "--nproc_per_node=2", "--no_python", FAKE_WORKER,
                             "--env-json", self.path("env_${local_rank}"), env=self.env(env))
        self.assertExit(result, 0)
        store = re.search(r"agent store listening on \S+:(\d+)", result.stderr)
        workers = [read_json(self.path("env_%d.0" % r)) for r in range(2)]
        return result, store.group(1) if store else None, workers

    def test_disabled_sharing_gives_the_workers_their_own_store(self):
        result, agent_port, workers = self.launch("1", "--standalone")
        self.assertIsNotNone(agent_port, result.describe())
        for env in workers:
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "False")
            self.assertNotEqual(env["MASTER_PORT"], agent_port)
        self.assertEqual(workers[0]["MASTER_PORT"], workers[1]["MASTER_PORT"])

    def test_shared_by_default_and_for_other_values(self):
        for value in (None, "0", "true"):
            result, agent_port, workers = self.launch(value, "--standalone")
            for env in workers:
                self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True", value)
                self.assertEqual(env["MASTER_PORT"], agent_port, value)

    def test_static_rendezvous_keeps_sharing_as_torchrun(self):
        result, agent_port, workers = self.launch("1", "--master_port=%d" % lib.free_port())
        for env in workers:
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")

    def test_dry_run_says_so(self):
        env = self.env({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
        standalone = self.ddprun("--dry-run", "--standalone", "--no_python", FAKE_WORKER, env=env)
        self.assertIn("worker rank 0 serves the workers' store", standalone.stdout)
        static = self.ddprun("--dry-run", "--master_port=29511", "--no_python", FAKE_WORKER,
                             env=env)
        self.assertIn("has no effect on the static rendezvous", static.stdout)


if __name__ == "__main__":
    unittest.main()
