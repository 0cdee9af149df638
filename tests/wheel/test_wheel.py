"""The portable wheels `make wheel` built (issue 38, docs/packaging.md), checked as a user meets them.

Which wheels: $DDPRUN_WHEEL_X86_64 and $DDPRUN_WHEEL_AARCH64, else the newest
dist/ddprun-*-manylinux_2_28_<arch>.whl of the checkout; a missing one is a skip naming `make
wheel`. Run with the wheel tools' python (scripts/setup-wheel-tools.sh: pyelftools, auditwheel):

    ~/.cache/ddprun/wheel-tools/bin/python -m unittest tests/wheel/test_wheel.py

Per wheel: every ELF file needs glibc only, at most GLIBC_2.28 (wheel_elf.py), for the wheel's
architecture, and `auditwheel show` agrees (manylinux_2_28 or older); the wheel holds the five
programs (executable), their man pages, bash/zsh/fish completion, the NCCL module and `python -m
ddprun`. The x86_64 wheel is then installed with pip into a new venv and used: versions, `python
-m ddprun`, man, completion, a 2-worker gloo allreduce under the wheel's ddprun, and the NCCL
module's run-time loading (this machine has CUDA 13's runtime and no GPU: the runtime's own
error comes back; a DDPRUN_CUDART_LIBRARY that does not load is named). The checker itself must
reject what this machine's g++ builds (libstdc++, GLIBC_2.34): its cmake always, the gcc tree's
ddprun when one is built.
"""
import functools
import glob
import os
import re
import shutil
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))
import wheel_elf  # noqa: E402
from ddprun_testlib import run_checked  # noqa: E402

PROGRAMS = ["ddprun", "ddprun-launch", "ddprun-store", "ddprun-allreduce-check",
            "ddprun-allreduce-perf"]
MAN_PAGES = ["ddprun.1.gz", "ddprun-launch.1.gz", "ddprun-store.1.gz",
             "ddprun-allreduce-check.1.gz", "ddprun-allreduce-perf.1.gz"]


def wheel_path(arch):
    chosen = os.environ.get(f"DDPRUN_WHEEL_{arch.upper()}")
    if chosen:
        return chosen
    found = sorted(glob.glob(os.path.join(REPO_ROOT, "dist", f"ddprun-*-manylinux_2_28_{arch}.whl")),
                   key=os.path.getmtime)
    return found[-1] if found else None


run = functools.partial(run_checked, timeout=120)


class WheelFiles:
    """The contents of one wheel, by role."""

    def __init__(self, path):
        self.path = path
        with zipfile.ZipFile(path) as wheel:
            self.infos = {info.filename: info for info in wheel.infolist()}
        self.data = re.sub(r"-py3-none-.*", "", os.path.basename(path)) + ".data"

    def member(self, relative):
        return f"{self.data}/{relative}"

    def mode(self, name):
        return self.infos[name].external_attr >> 16


class ArchChecks:
    """Checks every wheel gets; `arch` is set by the subclasses."""
    arch = None

    def setUp(self):
        self.wheel = wheel_path(self.arch)
        if not self.wheel or not os.path.exists(self.wheel):
            self.skipTest(f"no {self.arch} wheel: run make wheel (or set DDPRUN_WHEEL_{self.arch.upper()})")

    def test_every_elf_file_needs_only_glibc_up_to_2_28(self):
        problems, count = wheel_elf.problems_of(self.wheel)
        self.assertEqual(problems, [])
        self.assertGreaterEqual(count, len(PROGRAMS) + 1)  # the programs and the NCCL module

    def test_auditwheel_says_manylinux_2_28_or_older(self):
        result = run([sys.executable, "-m", "auditwheel", "show", self.wheel])
        text = " ".join(result.stdout.split())
        match = re.search(r'consistent with the following platform tag: "manylinux_2_(\d+)_' +
                          self.arch + '"', text)
        self.assertIsNotNone(match, result.stdout)
        self.assertLessEqual(int(match.group(1)), 28, result.stdout)

    def test_programs_man_pages_completion_module_and_python_m(self):
        files = WheelFiles(self.wheel)
        expected = [files.member(f"scripts/{p}") for p in PROGRAMS]
        expected += [files.member(f"data/share/man/man1/{page}") for page in MAN_PAGES]
        expected += [files.member(f"data/share/bash-completion/completions/{p}") for p in PROGRAMS]
        expected += [files.member(f"data/share/zsh/site-functions/_{p}") for p in PROGRAMS]
        expected += [files.member(f"data/share/fish/vendor_completions.d/{p}.fish") for p in PROGRAMS]
        expected += [files.member("data/lib/ddprun/libddprun_worker_nccl.so"),
                     "ddprun/__init__.py", "ddprun/__main__.py"]
        missing = [name for name in expected if name not in files.infos]
        self.assertEqual(missing, [], sorted(files.infos))
        for program in PROGRAMS:
            self.assertTrue(files.mode(files.member(f"scripts/{program}")) & 0o111, program)


class X86_64Wheel(ArchChecks, unittest.TestCase):
    arch = "x86_64"


class Aarch64Wheel(ArchChecks, unittest.TestCase):
    arch = "aarch64"


class CheckerRejectsAHostBuild(unittest.TestCase):
    """The checker fails what this Debian 12 machine's g++ builds: libstdc++ and glibc 2.34+.
    CMake (the build's own, always here) is checked always; the gcc tree's ddprun where it is
    built (CI removes that tree before this stage)."""

    def host_builds(self):
        build = os.path.abspath(os.environ.get("DDPRUN_BUILD_DIR", os.path.join(REPO_ROOT, "build")))
        ddprun = os.path.join(build, "launcher", "ddprun")
        cmake = shutil.which("cmake")
        self.assertIsNotNone(cmake, "cmake not on PATH: run scripts/install-deps.sh")
        return [cmake] + ([ddprun] if os.path.exists(ddprun) else [])

    def test_gcc_builds_are_rejected(self):
        for program in self.host_builds():
            with self.subTest(program=program):
                problems, _ = wheel_elf.problems_of(os.path.realpath(program))
                self.assertTrue(any("needs libstdc++.so.6" in p for p in problems), problems)
                self.assertTrue(any(re.search(r"GLIBC_2\.(29|[3-9]\d)", p) for p in problems),
                                problems)


class InstalledX86_64Wheel(unittest.TestCase):
    """The x86_64 wheel in a new venv of this machine's python3, used as a user would."""

    @classmethod
    def setUpClass(cls):
        cls.wheel = wheel_path("x86_64")
        if not cls.wheel:
            raise unittest.SkipTest("no x86_64 wheel: run make wheel")
        cls.tmp = tempfile.TemporaryDirectory(prefix="ddprun_wheel_")
        cls.venv = os.path.join(cls.tmp.name, "venv")
        run(["python3", "-m", "venv", cls.venv])
        cls.bin = os.path.join(cls.venv, "bin")
        run([os.path.join(cls.bin, "python"), "-m", "pip", "install", "--quiet", "--no-index",
             cls.wheel], timeout=300)
        cls.env = dict(os.environ, PATH=f"{cls.bin}:/usr/bin:/bin", VIRTUAL_ENV=cls.venv)
        for name in ("DDPRUN_NCCL_PLUGIN", "DDPRUN_NCCL_LIBRARY", "DDPRUN_CUDART_LIBRARY"):
            cls.env.pop(name, None)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_in_venv(self, argv, timeout=120, check=True, env=None):
        return run(argv, timeout=timeout, check=check, env=dict(self.env, **(env or {})),
                   cwd=self.tmp.name)

    def test_programs_are_on_the_venv_path_with_the_project_version(self):
        with open(os.path.join(REPO_ROOT, "CMakeLists.txt")) as f:
            version = re.search(r"project\(ddprun VERSION ([0-9.]+)", f.read()).group(1)
        self.assertIn(f"ddprun {version}", self.run_in_venv(["ddprun", "--version"]).stdout)
        for program in PROGRAMS[1:]:
            path = self.run_in_venv(["sh", "-c", f"command -v {program}"]).stdout.strip()
            self.assertEqual(path, os.path.join(self.bin, program))
            self.run_in_venv([program, "--help"])

    def test_python_m_ddprun_runs_ddprun(self):
        result = self.run_in_venv([os.path.join(self.bin, "python"), "-m", "ddprun", "--version"])
        self.assertRegex(result.stdout, r"^ddprun \d")

    def test_man_page_from_the_venv_share_man(self):
        result = self.run_in_venv(["man", "-P", "cat", "ddprun"],
                                  env={"MANPATH": os.path.join(self.venv, "share", "man")})
        self.assertIn("--nproc-per-node", result.stdout.replace("‐", "-"))

    def test_completion(self):
        result = self.run_in_venv(["ddprun", "--print-completion", "bash"])
        self.assertIn("--nnodes", result.stdout)

    def test_standalone_gloo_allreduce_is_exact(self):
        result = self.run_in_venv(["ddprun", "--standalone", "--nproc_per_node=2",
                                   os.path.join(self.bin, "ddprun-allreduce-check")], timeout=180)
        self.assertEqual(len(re.findall(r"ok: backend=cpu, .* exact, barrier ok", result.stdout)), 2,
                         result.stdout)

    def test_nccl_module_loads_the_cuda_runtime_at_run_time(self):
        check = os.path.join(self.bin, "ddprun-allreduce-check")
        result = self.run_in_venv(["ddprun", "--standalone", "--nproc_per_node=1", check,
                                   "--backend", "nccl"], timeout=180, check=False)
        if result.returncode == 0:
            self.skipTest("a CUDA device is present: the NCCL backend ran")
        # The runtime's own words: libcudart was found and called (no GPU driver here).
        self.assertRegex(result.stderr, r"nccl backend unavailable: cudaGetDeviceCount: "
                         r"(CUDA driver|no CUDA-capable|.*driver)", result.stderr)
        result = self.run_in_venv(["ddprun", "--standalone", "--nproc_per_node=1", check,
                                   "--backend", "nccl"], timeout=180,
                                  check=False, env={"DDPRUN_CUDART_LIBRARY": "/nonexistent/libcudart.so.13"})
        self.assertIn("DDPRUN_CUDART_LIBRARY=/nonexistent/libcudart.so.13 did not load", result.stderr)


if __name__ == "__main__":
    unittest.main()
