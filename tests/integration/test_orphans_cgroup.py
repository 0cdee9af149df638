"""No orphans through the job cgroup (issue 39): each worker joins a cgroup v2 directory made for
the launch (launcher/process/job_cgroup.h), the session keeper lists the job's processes from it
instead of all of /proc, and removes it after its sweep; where no cgroup can be made, the keeper
scans /proc as before (docs/architecture.md, "No orphans"). Each launch: 4 workers of
orphan_tree.py, each with a child and a grandchild in its session (12 descendants).

The cases that need a job cgroup skip where this machine cannot make one (not root and no
delegated cgroup, a read-only /sys/fs/cgroup in a container, no cgroup2); the fallback's run
everywhere.
"""
import glob
import os
import pwd
import shutil
import signal
import subprocess
import unittest
import uuid

import ddprun_testlib as lib
import orphan_tree as tree

NPROC = 4
DESCENDANTS = NPROC * tree.PER_WORKER
BOUND_S = 1.0
NO_CGROUP = "/nonexistent-ddprun-test/cgroup"  # DDPRUN_JOB_CGROUP: a parent that cannot be made


def cgroup_of(pid):
    """The v2 cgroup path of `pid` (its /proc/<pid>/cgroup "0::" line), None once it is gone."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].rstrip("\n")
    except OSError:
        pass
    return None


def own_cgroup_dir():
    """This process's cgroup v2 directory (as launcher/process/cgroup_paths.h finds it), or
    None."""
    path = cgroup_of(os.getpid())
    if not path:
        return None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            words = line.split()
            if "-" in words[6:] and words[words.index("-", 6) + 1] == "cgroup2":
                root, mount = words[3], words[4].replace("\\040", " ")
                if root == "/":
                    return mount + (path if path != "/" else "")
                if path == root or path.startswith(root + "/"):
                    return mount + path[len(root):]
    return None


def job_cgroup_skip_reason():
    """Why this machine cannot make a job cgroup (None when it can): made and removed once."""
    parent = own_cgroup_dir()
    if parent is None:
        return "no cgroup v2 for this process"
    probe = os.path.join(parent, "ddprun-probe-%s" % uuid.uuid4().hex[:8])
    try:
        os.mkdir(probe)
    except OSError as error:
        return "cannot make a cgroup in %s: %s" % (parent, error)
    os.rmdir(probe)
    return None


class JobCgroupTest(lib.DdprunTestCase):

    def launch(self, mode, env=None):
        with open(self.path("ddprun.out"), "wb") as out:
            proc = self.start([lib.DDPRUN] + tree.ddprun_args(NPROC, mode, own_group=True),
                              env=env, stdout=out, stderr=out)
        if mode != "wait":
            return proc, []
        return proc, tree.wait_for_tree(self.marker, proc, DESCENDANTS)

    def output(self):
        return lib.read_file(self.path("ddprun.out"))

    def sigkill_and_check_gone(self, proc, pids):
        keepers = tree.keepers(self.marker)
        self.assertEqual(len(keepers), 1, "no session keeper")
        took = tree.sigkill_and_time(proc, pids, BOUND_S)
        self.assertIsNotNone(took, "alive %.1f s after SIGKILL of ddprun: %s" % (
            BOUND_S, [pid for pid in pids if lib.is_alive(pid)]))
        proc.wait(timeout=10)
        lib.wait_for(lambda: not lib.pids_with_marker(self.marker), BOUND_S,
                     "no process of the launch left")

    def job_cgroup(self, proc):
        """The directory of the launch's job cgroup: ddprun-<ddprun's pid>-<random>."""
        matches = glob.glob(os.path.join(own_cgroup_dir(), "ddprun-%d-*" % proc.pid))
        self.assertEqual(len(matches), 1, "job cgroups of pid %d: %s" % (proc.pid, matches))
        return matches[0]

    def test_sigkill_of_ddprun_sweeps_through_the_job_cgroup(self):
        reason = job_cgroup_skip_reason()
        if reason:
            self.skipTest(reason)
        proc, pids = self.launch("wait")
        directory = self.job_cgroup(proc)
        name = os.path.basename(directory)
        # Every worker joined before it ran, so its child and grandchild are in it too; ddprun
        # and its keeper are not, and the keeper was told the directory.
        self.assertEqual({cgroup_of(pid).rsplit("/", 1)[-1] for pid in pids}, {name})
        self.assertNotEqual(cgroup_of(proc.pid).rsplit("/", 1)[-1], name)
        keeper = tree.keepers(self.marker)[0]
        with open("/proc/%d/cmdline" % keeper, "rb") as f:
            self.assertEqual(f.read().split(b"\0")[1:2], [directory.encode()])
        self.assertNotEqual(cgroup_of(keeper).rsplit("/", 1)[-1], name)
        self.sigkill_and_check_gone(proc, pids)
        lib.wait_for(lambda: not os.path.exists(directory), BOUND_S,
                     "the keeper to remove %s" % directory)

    def test_normal_end_removes_the_job_cgroup(self):
        reason = job_cgroup_skip_reason()
        if reason:
            self.skipTest(reason)
        # Each worker exits 0 leaving a child and a grandchild: the keeper's sweep ends them,
        # then the cgroup is empty and removed before ddprun returns.
        proc, _ = self.launch("exit")
        proc.wait(timeout=30)
        self.assertEqual(proc.returncode, 0, self.output())
        self.assertEqual(lib.pids_with_marker(self.marker), [])
        self.assertEqual(glob.glob(os.path.join(own_cgroup_dir(), "ddprun-%d-*" % proc.pid)), [])

    def test_without_a_job_cgroup_the_proc_scan_sweeps(self):
        proc, pids = self.launch("wait", env=self.env({"DDPRUN_JOB_CGROUP": NO_CGROUP,
                                                       "LOGLEVEL": "DEBUG"}))
        self.assertEqual([pid for pid in pids if "/ddprun-" in (cgroup_of(pid) or "")], [])
        self.sigkill_and_check_gone(proc, pids)
        self.assertIn("no job cgroup (mkdir in %s" % NO_CGROUP, self.output())

    def test_job_cgroup_off(self):
        proc, pids = self.launch("wait", env=self.env({"DDPRUN_JOB_CGROUP": "off",
                                                       "LOGLEVEL": "DEBUG"}))
        self.assertEqual([pid for pid in pids if "/ddprun-" in (cgroup_of(pid) or "")], [])
        self.assertEqual(len(tree.keepers(self.marker)), 1)
        with open("/proc/%d/cmdline" % tree.keepers(self.marker)[0], "rb") as f:
            self.assertEqual(f.read().split(b"\0")[1:], [b""])  # no argument: no cgroup
        self.sigkill_and_check_gone(proc, pids)
        self.assertIn("no job cgroup (DDPRUN_JOB_CGROUP=off)", self.output())

    def test_a_user_without_delegation_gets_the_proc_scan(self):
        # A plain user may not make a directory in root's cgroup: the normal case, not an error.
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv(1) to run ddprun as nobody")
        nobody = pwd.getpwnam("nobody")
        as_nobody = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                     "--clear-groups", "--"]
        worker = [lib.SYSTEM_PYTHON, tree.WORKER]
        reachable = subprocess.run(as_nobody + worker[:1] + ["-c", "open(%r).close()" % tree.WORKER],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if reachable.returncode != 0 or not os.access(lib.DDPRUN, os.X_OK):
            self.skipTest("nobody cannot run %s or read %s here" % (lib.DDPRUN, tree.WORKER))
        os.chmod(self.tmp, 0o777)
        command = as_nobody + [lib.DDPRUN, "--standalone", "--nproc_per_node=%d" % NPROC,
                               "--no_python"] + worker + ["wait", "--own-group"]
        with open(self.path("ddprun.out"), "wb") as out:
            proc = self.start(command, stdout=out, stderr=out)  # the default log level
        try:
            pids = tree.wait_for_tree(self.marker, proc, DESCENDANTS)
        except AssertionError as error:
            raise AssertionError("%s\n%s" % (error, self.output()))
        if [pid for pid in pids if "/ddprun-" in (cgroup_of(pid) or "")]:
            self.skipTest("nobody may make cgroups here (delegated): nothing to fall back from")
        self.assertNotIn("cgroup", self.output())  # nothing to say at the default level
        self.sigkill_and_check_gone(proc, pids)

if __name__ == "__main__":
    unittest.main()
