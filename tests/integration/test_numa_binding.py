"""--numa-binding for real: each worker's /proc/self/status Cpus_allowed_list is the CPU list the
--dry-run of the same command line prints for its local rank; the launcher's own mask (taskset)
bounds it; without the flag workers keep the launcher's mask; a mode that cannot be satisfied is
exit 2 and one line. Written for any machine (this VM: 2 CPUs, 1 NUMA node, no GPU), so the
checks compare with the launcher's mask rather than naming CPUs.
"""
import os
import re
import shutil
import unittest

from ddprun_testlib import DDPRUN, DdprunTestCase

# Each worker prints "rank=<local rank> <its Cpus_allowed_list>".
WORKER = ["--no_python", "/bin/sh", "-c",
          'echo "rank=$LOCAL_RANK $(sed -n "s/^Cpus_allowed_list:\\t//p" /proc/self/status)"']


def cpu_list(cpus):
    """The kernel's list format ("0-2,5") of a set of CPU numbers."""
    cpus, text, i = sorted(cpus), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        text.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(text)


def parse_list(text):
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def numa_nodes():
    return len([n for n in os.listdir("/sys/devices/system/node") if re.match(r"node\d+$", n)])


class NumaBindingTest(DdprunTestCase):

    def launch(self, *args, taskset=None):
        prefix = ["taskset", "-c", taskset] if taskset is not None else []
        return self.run_launcher(prefix + [DDPRUN, "--standalone"] + list(args) + WORKER)

    def planned(self, *args, taskset=None):
        """{local rank: cpu list} as --dry-run prints it."""
        result = self.launch("--dry-run", *args, taskset=taskset)
        self.assertExit(result, 0)
        planned, rank = {}, None
        for line in result.stdout.splitlines():
            worker = re.match(r"worker local_rank=(\d+) ", line)
            if worker:
                rank = int(worker.group(1))
            cpus = re.match(r"  cpus: (\S+) \(NUMA node (\d+)\)$", line)
            if cpus:
                planned[rank] = cpus.group(1)
        return planned

    def ran(self, *args, taskset=None):
        """{local rank: Cpus_allowed_list} as the workers saw it."""
        result = self.launch(*args, taskset=taskset)
        self.assertExit(result, 0)
        seen = dict(re.findall(r"^rank=(\d+) (\S+)$", result.stdout, re.M))
        return {int(rank): cpus for rank, cpus in seen.items()}

    def assertRunAsPlanned(self, *args, taskset=None):
        planned = self.planned(*args, taskset=taskset)
        ran = self.ran(*args, taskset=taskset)
        self.assertEqual(ran, planned)
        return planned

    def test_node_binds_every_rank_to_its_node(self):
        planned = self.assertRunAsPlanned("--nproc_per_node=2", "--numa-binding=node")
        self.assertEqual(len(planned), 2)
        allowed = os.sched_getaffinity(0)
        for cpus in planned.values():
            self.assertLessEqual(parse_list(cpus), allowed)
        if numa_nodes() == 1:
            self.assertEqual(planned, {0: cpu_list(allowed), 1: cpu_list(allowed)})

    def test_exclusive_gives_each_rank_its_own_cores(self):
        planned = self.assertRunAsPlanned("--nproc_per_node=2", "--numa-binding=exclusive")
        first, second = parse_list(planned[0]), parse_list(planned[1])
        self.assertFalse(first & second, planned)
        self.assertLessEqual(first | second, os.sched_getaffinity(0))

    def test_the_launchers_mask_bounds_the_binding(self):
        last = str(max(os.sched_getaffinity(0)))
        self.assertEqual(self.assertRunAsPlanned("--nproc_per_node=2", "--numa-binding=node",
                                                 taskset=last), {0: last, 1: last})
        self.assertEqual(self.assertRunAsPlanned("--nproc_per_node=1", "--numa-binding=exclusive",
                                                 taskset=last), {0: last})

    def test_without_the_flag_workers_keep_the_launchers_mask(self):
        allowed = cpu_list(os.sched_getaffinity(0))
        self.assertEqual(self.planned("--nproc_per_node=2"), {})
        self.assertEqual(self.ran("--nproc_per_node=2"), {0: allowed, 1: allowed})
        last = str(max(os.sched_getaffinity(0)))
        self.assertEqual(self.ran("--nproc_per_node=2", taskset=last), {0: last, 1: last})

    def test_a_mode_that_cannot_be_satisfied_is_one_line_and_exit_2(self):
        too_many = len(os.sched_getaffinity(0)) + 1
        for dry_run in (["--dry-run"], []):
            result = self.launch(*dry_run, "--nproc_per_node=%d" % too_many,
                                 "--numa-binding=exclusive")
            self.assertExit(result, 2)
            self.assertEqual(result.stdout, "")
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.describe())
            self.assertRegex(lines[0], r"--numa_binding=exclusive: NUMA node \d+ has \d+ physical "
                                       r"cores? for %d local ranks .*; use --numa-binding=node, "
                                       r"or fewer ranks per node" % too_many)
        last = str(max(os.sched_getaffinity(0)))
        result = self.launch("--nproc_per_node=2", "--numa-binding=exclusive", taskset=last)
        self.assertExit(result, 2)
        self.assertIn("the launcher may use CPUs %s)" % last, result.stderr)


if __name__ == "__main__":
    if shutil.which("taskset") is None:
        raise SystemExit("taskset (util-linux) is needed")
    unittest.main()
