"""The open-file limit (issue 25): ddprun and ddprun-store raise their soft RLIMIT_NOFILE to the
hard limit at start and say in one line when the connections asked for cannot fit; workers get
the limit they would have had without ddprun. And --logs-specs is refused in one line (no
silent no-op: ddprun loads no Python plugins).
"""
import os
import resource
import subprocess
import unittest

from ddprun_testlib import DDPRUN, DdprunTestCase, SYSTEM_PYTHON, BUILD_DIR

DDPRUN_STORE = os.path.join(BUILD_DIR, "tools", "ddprun-store")


def limit_files(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class OpenFilesTest(DdprunTestCase):

    def run_limited(self, args, soft, hard, timeout=60):
        proc = subprocess.Popen(args, env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=self.tmp, start_new_session=True,
                                preexec_fn=limit_files(soft, hard))
        self._procs.append(proc)
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    def test_ddprun_raises_its_limit_and_workers_keep_theirs(self):
        code = ("import os, resource; print('worker', *resource.getrlimit(resource.RLIMIT_NOFILE)); "
                "print('launcher', [l.split()[3:5] for l in open('/proc/%d/limits' % os.getppid()) "
                "if l.startswith('Max open files')][0])")
        rc, out, err = self.run_limited([DDPRUN, "--standalone", "--nproc_per_node=1",
                                         "--no_python", SYSTEM_PYTHON, "-c", code], 512, 2048)
        self.assertEqual(rc, 0, err)
        self.assertIn("worker 512 2048", out)
        self.assertIn("launcher ['2048', '2048']", out)
        self.assertNotIn("open files", err)

    def test_ddprun_says_when_the_ranks_cannot_fit(self):
        rc, out, err = self.run_limited([DDPRUN, "--dry-run", "--nproc_per_node=64", "--no_python",
                                         "/bin/true"], 100, 100)
        self.assertEqual(rc, 0, err)
        lines = [l for l in err.splitlines() if "open files" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("a job of up to 64 ranks on 1 node(s), a store connection each, needs "
                      "about 129 open files, but the limit is 100 (hard limit 100)", lines[0])

    def test_the_store_raises_its_limit_and_warns_in_one_line(self):
        proc = subprocess.Popen([DDPRUN_STORE, "serve", "--host", "127.0.0.1", "--port", "0",
                                 "--max-connections", "5000"], env=self.env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=limit_files(256, 1024))
        self._procs.append(proc)
        self.assertIn("listening on", proc.stdout.readline())
        with open("/proc/%d/limits" % proc.pid) as limits:
            line = [l for l in limits if l.startswith("Max open files")][0]
        self.assertEqual(line.split()[3:5], ["1024", "1024"])
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("ddprun-store: warning: --max-connections=5000 needs about 5064 open files, "
                      "but the limit is 1024 (hard limit 1024)", err)

    def test_logs_specs_is_refused_in_one_line(self):
        result = self.ddprun("--logs-specs=mine", "--no_python", "/bin/true")
        self.assertExit(result, 2)
        self.assertEqual(result.stderr.count("\n"), 1, result.describe())
        self.assertIn("--logs_specs=mine: ddprun loads no Python LogsSpecs plugins",
                      result.stderr)


if __name__ == "__main__":
    unittest.main()
