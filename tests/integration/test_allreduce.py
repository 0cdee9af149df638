"""The bundled allreduce programs under the real launcher (issue 5).

ddprun-allreduce-check must pass on 4 local ranks, report a corrupted input precisely, and fail
within a bound (not hang) when the environment is wrong; ddprun-allreduce-perf must print
nccl-tests' table (and JSON) with #wrong == 0. The agent-store mode
(TORCHELASTIC_USE_AGENT_STORE=True) runs against a standalone ddprun-store when it is built.
"""
import json
import os
import re
import subprocess
import time
import unittest

from ddprun_testlib import BUILD_DIR, DDPRUN, DdprunTestCase, free_port

CHECK = os.path.join(BUILD_DIR, "worker", "ddprun-allreduce-check")
PERF = os.path.join(BUILD_DIR, "worker", "ddprun-allreduce-perf")
STORE = os.path.join(BUILD_DIR, "tools", "ddprun-store")
# The NCCL module built the wheel's way, for this test only (worker/CMakeLists.txt).
NCCL_DLOPEN = os.path.join(BUILD_DIR, "worker", "libddprun_worker_nccl_dlopen.so")
ROW = re.compile(r"^\s+\d+\s+\d+\s+\w+\s+sum\s")


class AllreduceCheckTest(DdprunTestCase):
    require_binaries = (DDPRUN, CHECK, PERF)

    def check(self, *args, nproc=4, backend="cpu", timeout=120, env=None):
        return self.ddprun("--standalone", "--nproc_per_node=%d" % nproc, "--no_python", CHECK,
                           "--backend", backend, *args, timeout=timeout, env=env)

    def test_four_ranks_pass(self):
        result = self.check()
        self.assertExit(result, 0)
        for rank in range(4):
            self.assertRegex(result.stdout, r"(?m)^rank %d/4 ok: backend=cpu" % rank,
                             result.describe())

    def test_mismatch_names_rank_index_and_values(self):
        result = self.check("--corrupt-rank", "2")
        self.assertNotEqual(result.returncode, 0, result.describe())
        # Rank 2 added 1 to element count/2 of every input: for 1000 elements, index 500.
        self.assertRegex(result.stderr, r"rank \d/4: allreduce MISMATCH: float x 1000 elements: "
                         r"index 500 expected -?\d+ actual -?\d+ \(1 wrong\)", result.describe())

    def test_wrong_world_size_fails_within_the_timeout(self):
        wrapper = 'WORLD_SIZE=5 exec "$0" --backend cpu --timeout 3'
        start = time.monotonic()
        result = self.ddprun("--standalone", "--nproc_per_node=4", "--no_python", "sh", "-c",
                             wrapper, CHECK, timeout=60)
        self.assertNotEqual(result.returncode, 0, result.describe())
        self.assertLess(time.monotonic() - start, 30, result.describe())
        self.assertIn("rendezvous timed out after 3.0 s", result.stderr, result.describe())
        self.assertIn("of WORLD_SIZE=5 ranks joined", result.stderr, result.describe())

    def test_missing_environment_is_a_usage_error(self):
        env = self.env()
        proc = subprocess.run([CHECK], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=30)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("ddprun-allreduce-check: WORLD_SIZE is not set", proc.stderr)

    def test_nccl_without_gpu_fails_clearly(self):
        result = self.check(nproc=1, backend="nccl", timeout=60)
        if result.returncode == 0:
            self.skipTest("a CUDA device is present: the NCCL backend ran")
        self.assertIn("nccl backend", result.stderr, result.describe())
        # A module that is there loads (the ASan tree's once did not: an undefined symbol).
        self.assertNotIn("failed to load", result.stderr, result.describe())

    @unittest.skipUnless(os.path.exists(NCCL_DLOPEN), "no CUDA headers: no run-time-loading module")
    def test_nccl_module_loading_the_cuda_runtime_at_run_time(self):
        # The wheel's module (docs/worker.md): the CUDA runtime is found and called when the
        # module is first used (this machine: CUDA's runtime, no GPU driver), or named.
        result = self.check(nproc=1, backend="nccl", timeout=60,
                            env={"DDPRUN_NCCL_PLUGIN": NCCL_DLOPEN})
        if result.returncode == 0:
            self.skipTest("a CUDA device is present: the NCCL backend ran")
        self.assertRegex(result.stderr, r"nccl backend unavailable: cudaGetDeviceCount: "
                         r"(CUDA driver version is insufficient|no CUDA-capable device|"
                         r"libcudart\.so\.13 or libcudart\.so\.12 not found \(on the loader's path)",
                         result.describe())
        result = self.check(nproc=1, backend="nccl", timeout=60,
                            env={"DDPRUN_NCCL_PLUGIN": NCCL_DLOPEN,
                                 "DDPRUN_CUDART_LIBRARY": "/nonexistent/libcudart.so.13"})
        self.assertExit(result, 1)
        self.assertIn("cudaGetDeviceCount: DDPRUN_CUDART_LIBRARY=/nonexistent/libcudart.so.13 did "
                      "not load: /nonexistent/libcudart.so.13: cannot open shared object file",
                      result.stderr, result.describe())

    @unittest.skipUnless(os.access(STORE, os.X_OK), "ddprun-store is not built")
    def test_agent_store_mode_every_rank_is_a_client(self):
        port = free_port()
        server = self.start([STORE, "serve", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.assertIn("listening", server.stdout.readline().decode())
        ranks = []
        for rank in range(3):
            env = self.env({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3",
                            "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "1",
                            "TORCHELASTIC_USE_AGENT_STORE": "True"})
            ranks.append(self.start([CHECK, "--backend", "cpu", "--timeout", "30"], env=env))
        for rank, proc in enumerate(ranks):
            result = self.finish(proc, timeout=90)
            self.assertExit(result, 0)
            self.assertIn("rank %d/3 ok" % rank, result.stdout)


class AllreducePerfTest(DdprunTestCase):
    require_binaries = (DDPRUN, CHECK, PERF)

    def perf(self, *args):
        result = self.ddprun("--standalone", "--nproc_per_node=4", "--no_python", PERF,
                             "--backend", "cpu", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3",
                             "-w", "1", *args, timeout=120)
        self.assertExit(result, 0)
        return result

    def test_table_shape_and_no_wrong_values(self):
        result = self.perf("-d", "int32")
        self.assertRegex(result.stdout, r"size\s+count\s+type\s+redop\s+time\s+algbw\s+busbw\s+"
                         r"#wrong")
        rows = [line.split() for line in result.stdout.splitlines() if ROW.match(line)]
        self.assertEqual([int(r[0]) for r in rows], [1024, 4096, 16384, 65536], result.describe())
        for size, count, dtype, redop, time_us, algbw, busbw, wrong in rows:
            self.assertEqual(int(count) * 4, int(size))
            self.assertEqual((dtype, redop, wrong), ("int32", "sum", "0"))
            self.assertGreater(float(time_us), 0)
            # busbw = algbw * 2 (n - 1) / n with n = 4, up to the table's rounding.
            self.assertAlmostEqual(float(busbw), float(algbw) * 1.5, delta=0.02)
        self.assertIn("# Out of bounds values : 0 OK", result.stdout)

    def test_json_output(self):
        result = self.perf("--json", "-d", "double")
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(len(lines), 1, result.describe())  # rank 0 prints, once
        report = json.loads(lines[0])
        self.assertEqual((report["backend"], report["world_size"]), ("cpu", 4))
        self.assertEqual([row["size"] for row in report["rows"]], [1024, 4096, 16384, 65536])
        for row in report["rows"]:
            self.assertEqual((row["type"], row["redop"], row["wrong"]), ("double", "sum", 0))
            self.assertAlmostEqual(row["busbw_gbps"], row["algbw_gbps"] * 1.5)

    def test_bad_option_exits_2(self):
        proc = subprocess.run([PERF, "--datatype", "half"], env=self.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(proc.returncode, 2, proc.stderr)


if __name__ == "__main__":
    unittest.main()
