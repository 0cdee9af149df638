"""ddprun under a real Slurm cluster (slurm_cluster.py: slurmctld, three slurmd in network
namespaces, munged), driven through the sbatch scripts of examples/slurm/ used verbatim:

- the static script on 2 nodes x 2 workers runs ddprun-allreduce-check (job COMPLETED, 0:0);
- the slurm preset inside a real step of fewer nodes than the job picks the step's first node;
- real PyTorch (gloo) DDP training gives exactly the loss of the same training standalone;
- a worker's failure fails the job with the worker's exit status;
- scancel of a running job: every worker gets SIGTERM, ddprun exits, nothing of the job is left
  in any node's namespace, and Slurm reports CANCELLED with the signal; scancel --signal=TERM:
  ddprun's 143 becomes the job's exit code;
- the elastic script on 3 nodes loses a node (its slurmd and every process killed); the two
  survivors go on at the smaller size and finish.

Skipped when Slurm/munge are not installed or namespaces cannot be created (not root).
"""
import os
import shlex
import unittest

import ddprun_testlib as lib
import slurm_cluster

EXAMPLES = os.path.join(lib.REPO_ROOT, "examples", "slurm")
STATIC = os.path.join(EXAMPLES, "static.sbatch")
ELASTIC = os.path.join(EXAMPLES, "elastic.sbatch")
ALLREDUCE_CHECK = os.path.join(lib.BUILD_DIR, "worker", "ddprun-allreduce-check")
TRAIN = os.path.join(lib.INTEROP_DIR, "train_ddp.py")
JOB_TIMEOUT = 90
UNAVAILABLE = slurm_cluster.slurm_unavailable()


@unittest.skipIf(UNAVAILABLE, UNAVAILABLE)
class SlurmTest(lib.DdprunTestCase):
    """One cluster for the whole class: jobs are independent and it starts in about a second."""

    require_binaries = (lib.DDPRUN, lib.FAKE_WORKER, ALLREDUCE_CHECK)
    cluster = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = slurm_cluster.SlurmCluster(nodes=3).__enter__()

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls.cluster.stop()
            cls.cluster = None

    # -- helpers -------------------------------------------------------------------------------
    def submit(self, script, args, nodes, env=None, options=()):
        """sbatch of an examples/slurm script (verbatim) with `args`; returns the job id."""
        self.output = self.path("job-%j.out")
        extra = {"DDPRUN": lib.DDPRUN}
        extra.update(env or {})
        return self.cluster.sbatch(
            ["--nodes=%d" % nodes, "--output=" + self.output, "--chdir=" + self.tmp]
            + list(options) + [script] + list(args), env=self.env(extra))

    def job_output(self, job):
        return lib.read_file(self.output.replace("%j", job))

    def describe(self, job):
        try:
            output = self.job_output(job)
        except FileNotFoundError:
            output = "(no output file)"
        return "job %s output:\n%s\n--- slurmctld log (tail) ---\n%s" % (
            job, output[-6000:], self.cluster.log("slurmctld")[-3000:])

    def wait_done(self, job, timeout=JOB_TIMEOUT):
        try:
            return self.cluster.wait_job_done(job, timeout)
        except AssertionError as error:
            self.cluster.client(["scancel", job], check=False)
            raise AssertionError("%s\n%s" % (error, self.describe(job)))

    def assertJobEnded(self, job, info, state, exit_code):
        """JobState and ExitCode as scontrol shows them; exit_code may be a tuple of choices."""
        message = "%s\n%s" % ({k: info.get(k) for k in ("JobState", "ExitCode", "Reason")},
                              self.describe(job))
        self.assertEqual(info.get("JobState"), state, message)
        choices = exit_code if isinstance(exit_code, tuple) else (exit_code,)
        self.assertIn(info.get("ExitCode"), choices, message)
        # The job completion log agrees on the state. (Its ExitCode is written when the state
        # changes: for a cancelled job before the batch script has ended, so always 0:0.)
        record = self.cluster.jobcomp(job)
        self.assertIsNotNone(record, "no jobcomp record for job %s" % job)
        self.assertEqual(record["JobState"], state, record)
        if state != "CANCELLED":
            self.assertEqual(record["ExitCode"], exit_code, record)

    def assertNothingLeft(self, nodes, timeout=30):
        """No process but slurmd in any node's network namespace (bounded wait for stepds)."""
        def leftovers():
            return {slurm_cluster.node_name(i): self.cluster.job_pids(i) for i in nodes
                    if self.cluster.job_pids(i)}
        try:
            lib.wait_for(lambda: not leftovers(), timeout, "the job's processes to be gone", 0.1)
        except AssertionError:
            left = leftovers()
            commands = {node: [_cmdline(pid) for pid in pids] for node, pids in left.items()}
            self.fail("processes left on the nodes: %s" % commands)

    def worker_command(self, script):
        """A --no_python worker: `sh -c SCRIPT` (RANK, WORLD_SIZE, ... in its environment)."""
        return ["/bin/sh", "-c", script]

    # -- tests ---------------------------------------------------------------------------------
    def test_static_allreduce_check(self):
        job = self.submit(STATIC, [ALLREDUCE_CHECK], nodes=2,
                          env={"NPROC_PER_NODE": "2", "DDPRUN_ARGS": "--no_python"})
        info = self.wait_done(job)
        self.assertJobEnded(job, info, "COMPLETED", "0:0")
        self.assertEqual(info["NodeList"], "n[1-2]")
        output = self.job_output(job)
        self.assertEqual(output.count(" ok: backend=cpu, "), 4, self.describe(job))
        self.assertNothingLeft(range(3))

    def test_preset_uses_the_step_not_the_job(self):
        """srun -N2 -r1 in a 3-node job: the step runs on n2, n3 (SLURM_NODEID 0 is n2), so the
        master must be n2, not the job's first node n1 (which runs no ddprun)."""
        inner = ("srun -N2 -r1 --ntasks-per-node=1 %s --env_preset=slurm --dry_run --no_python "
                 "/bin/true" % shlex.quote(lib.DDPRUN))
        job = self.cluster.sbatch(["--nodes=3", "--output=" + self.path("job-%j.out"),
                                   "--chdir=" + self.tmp, "--wrap", inner], env=self.env())
        self.output = self.path("job-%j.out")
        info = self.wait_done(job)
        self.assertJobEnded(job, info, "COMPLETED", "0:0")
        output = self.job_output(job)
        self.assertEqual(output.count("--master_addr=n2 (SLURM_STEP_NODELIST)"), 2, output)
        self.assertEqual(output.count("--nnodes=2 (SLURM_STEP_NUM_NODES)"), 2, output)
        for rank in range(2):
            self.assertIn("--node_rank=%d (SLURM_NODEID)" % rank, output)

    def test_torch_training_gives_the_standalone_loss(self):
        if not lib.system_python_has_torch():
            self.skipTest("%s cannot import torch" % lib.SYSTEM_PYTHON)
        standalone = self.path("loss_standalone")
        result = self.ddprun("--standalone", "--nproc_per_node=4", "--python", lib.SYSTEM_PYTHON,
                             TRAIN, standalone, timeout=120)
        self.assertExit(result, 0)
        out = self.path("loss_slurm")
        job = self.submit(STATIC, [TRAIN, out], nodes=2,
                          env={"NPROC_PER_NODE": "2", "DDPRUN_ARGS": "--python " + lib.SYSTEM_PYTHON})
        info = self.wait_done(job, timeout=150)
        self.assertJobEnded(job, info, "COMPLETED", "0:0")
        expected, actual = float(lib.read_file(standalone)), float(lib.read_file(out))
        self.assertEqual(actual.hex(), expected.hex(),
                         "Slurm 2x2 %r != standalone 4 %r" % (actual, expected))
        self.assertNothingLeft(range(3))

    def start_sigterm_recorders(self):
        """static.sbatch with 2 x 2 workers that record SIGTERM; returns the job once all run."""
        worker = ("exec %s --ready-file %s/ready.$RANK --on-sigterm-write %s/term.$RANK "
                  "--sleep 300" % (lib.FAKE_WORKER, self.tmp, self.tmp))
        job = self.submit(STATIC, self.worker_command(worker), nodes=2,
                          env={"NPROC_PER_NODE": "2", "DDPRUN_ARGS": "--no_python"})
        self.await_ready_files(job, 4)
        return job

    def await_ready_files(self, job, workers):
        """Waits for ready.<rank> of ranks 0..workers-1; cancels the job and fails otherwise."""
        ready = [self.path("ready.%d" % rank) for rank in range(workers)]
        try:
            lib.wait_for(lambda: all(os.path.exists(p) for p in ready), 60,
                         "%d workers ready" % workers, 0.1)
        except AssertionError as error:
            self.cluster.client(["scancel", job], check=False)
            self.fail("%s\n%s" % (error, self.describe(job)))

    def assertEveryWorkerGotSigterm(self, job):
        for rank in range(4):
            path = self.path("term.%d" % rank)
            self.assertTrue(os.path.exists(path) and lib.read_file(path) == "SIGTERM",
                            "worker %d got no SIGTERM\n%s" % (rank, self.describe(job)))

    def test_scancel_stops_every_worker_and_leaves_nothing(self):
        job = self.start_sigterm_recorders()
        self.cluster.client(["scancel", job])
        info = self.wait_done(job, timeout=60)
        # Slurm's record of a cancelled job: CANCELLED, and as exit code the signal that ended
        # the batch script, 0:15 (SIGTERM), or, when the script's srun returned first, its
        # status: 143:0, ddprun's 128 + SIGTERM (both seen here, about 1 run in 15 for the
        # latter). Each slurmd sends SIGTERM to every process of the steps, ddprun and workers
        # alike; srun, signalled too, then has the tasks SIGKILLed ("srun: forcing job
        # termination"), so Slurm may not see ddprun's own status: the next test does.
        self.assertJobEnded(job, info, "CANCELLED", ("0:15", "143:0"))
        self.assertEveryWorkerGotSigterm(job)
        self.assertNothingLeft(range(3))

    def test_scancel_signal_term_reports_ddprun_status(self):
        """scancel --signal=TERM signals the steps only (not the batch script and its srun):
        every ddpruns ends with 143 (128 + SIGTERM, its documented status), so does srun, so
        does the batch script: Slurm records FAILED, 143:0."""
        job = self.start_sigterm_recorders()
        self.cluster.client(["scancel", "--signal=TERM", job])
        info = self.wait_done(job, timeout=60)
        self.assertJobEnded(job, info, "FAILED", "143:0")
        self.assertEveryWorkerGotSigterm(job)
        self.assertNothingLeft(range(3))

    def test_worker_failure_fails_the_job_with_its_status(self):
        """A worker exits 7 on node n2: both ddpruns exit 7 (the root cause's status, at once on
        the other node too), srun and the batch script too: FAILED, 7:0."""
        worker = 'if [ "$RANK" = 3 ]; then exit 7; fi; exec sleep 300'
        job = self.submit(STATIC, self.worker_command(worker), nodes=2,
                          env={"NPROC_PER_NODE": "2", "DDPRUN_ARGS": "--no_python"})
        info = self.wait_done(job, timeout=60)
        self.assertJobEnded(job, info, "FAILED", "7:0")
        output = self.job_output(job)
        for task in range(2):
            self.assertIn("task %d: Exited with exit code 7" % task, output, self.describe(job))
        self.assertNothingLeft(range(3))

    def test_zz_elastic_survives_a_lost_node(self):
        """Named to run last: it kills node n3 (restarted by the cleanup)."""
        self.addCleanup(self._restart_node, 2)
        # 3 nodes x 2 workers block until the node is lost; at 2 nodes they check an allreduce.
        worker = ('if [ "$WORLD_SIZE" = 6 ]; then : > %(d)s/ready.$RANK; exec sleep 300; fi; '
                  '%(check)s && echo "$WORLD_SIZE" > %(d)s/done.$RANK'
                  % {"d": self.tmp, "check": ALLREDUCE_CHECK})
        job = self.submit(ELASTIC, self.worker_command(worker), nodes=3,
                          env={"NPROC_PER_NODE": "2", "MIN_NODES": "2",
                               "DDPRUN_ARGS": "--no_python"})
        self.await_ready_files(job, 6)
        self.cluster.kill_node(2)  # n3: not the batch host, whose loss ends any Slurm job
        info = self.wait_done(job, timeout=90)
        done = [self.path("done.%d" % rank) for rank in range(4)]
        missing = [p for p in done if not os.path.exists(p)]
        self.assertFalse(missing, "survivors did not finish at 2 nodes: %s\n%s"
                         % (missing, self.describe(job)))
        self.assertEqual({lib.read_file(p).strip() for p in done}, {"4"})
        # The survivors' ddpruns exited 0, so did srun (--no-kill: the lost task is reported,
        # "srun: error: Node failure on n3", but fails nothing) and the batch script.
        self.assertJobEnded(job, info, "COMPLETED", "0:0")
        self.assertIn("round 1 formed: 2 node(s), world size 4", self.job_output(job))
        self.assertNothingLeft(range(2))

    def _restart_node(self, index):
        self.cluster.start_node(index)
        self.cluster.wait_nodes_idle([index])


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip() or str(pid)
    except OSError:
        return str(pid)


if __name__ == "__main__":
    unittest.main()
