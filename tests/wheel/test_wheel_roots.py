"""The wheels on other distributions (issue 38; packaging/wheel/make-root.sh, check-in-root.sh).

For each wheel ($DDPRUN_WHEEL_X86_64 / $DDPRUN_WHEEL_AARCH64, else the newest in dist/), makes
(or reuses, cached under ~/.cache/ddprun/wheel/roots) a Debian root with debootstrap, installs
the wheel with pip into a venv of that root's own Python, and runs the checks there:
- DDPRUN_WHEEL_X86_64: the x86_64 wheel in Debian 11 bullseye amd64 (glibc 2.31, Python 3.9):
  --version, python -m ddprun, the standalone gloo allreduce, a static two-node job over
  loopback, an authenticated c10d job, --numa-binding=node --dry-run, man ddprun from the
  venv's share/man and --print-completion bash (check-in-root.sh bullseye-full);
- DDPRUN_WHEEL_AARCH64: the aarch64 wheel in Debian 12 bookworm arm64 under qemu-user-static:
  --version and the standalone allreduce (check-in-root.sh arm64-allreduce).
A test without its wheel is skipped, saying so. Needs root (debootstrap, chroot, mounts),
debootstrap and qemu-user-static (scripts/install-deps.sh) and, the first time, Debian's mirror
(the one apt uses). DDPRUN_WHEEL_ROOTS=DIR puts the roots under DIR instead.

    DDPRUN_WHEEL_X86_64=dist/ddprun-...-manylinux_2_28_x86_64.whl \\
        python3 -m unittest tests/wheel/test_wheel_roots.py
"""
import os
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(REPO_ROOT, "packaging", "wheel")
sys.path.insert(0, HERE)
from test_wheel import wheel_path  # noqa: E402  ($DDPRUN_WHEEL_<ARCH>, else dist/'s newest)
# Making a root, the first time: a download and dpkg (measured on 2 busy cores: Debian 11 amd64
# 142 s, Debian 12 arm64 540 s, its dpkg runs under qemu); later runs reuse it at once.
MAKE_ROOT_TIMEOUT = 3600
CHECK_TIMEOUT = 3600


def roots_dir():
    default = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                           "ddprun", "wheel", "roots")
    return os.environ.get("DDPRUN_WHEEL_ROOTS", default)


def run(argv, timeout):
    """Runs argv, its output passed through as it comes (the PASS/FAIL lines); returns the exit
    status (killed after timeout seconds) and the output."""
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        # SIGTERM: the scripts' traps remove what they copied into the root.
        timer = threading.Timer(timeout, process.terminate)
        timer.start()
        try:
            for line in process.stdout:
                sys.stderr.write(line)
                lines.append(line)
            process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode, "".join(lines)


class WheelRoots(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root (debootstrap, chroot, mounts)")

    def check(self, wheel_arch, suite, arch, mode, expected_checks):
        wheel = wheel_path(wheel_arch)
        if not wheel:
            self.skipTest("no %s wheel: run make wheel (or set DDPRUN_WHEEL_%s)" %
                          (wheel_arch, wheel_arch.upper()))
        self.assertTrue(os.path.isfile(wheel), "%s: no such file" % wheel)
        root = os.path.join(roots_dir(), "%s-%s" % (suite, arch))
        code, output = run([os.path.join(SCRIPTS, "make-root.sh"), suite, arch, root],
                           MAKE_ROOT_TIMEOUT)
        self.assertEqual(code, 0, "make-root.sh %s %s failed:\n%s" % (suite, arch, output))
        code, output = run([os.path.join(SCRIPTS, "check-in-root.sh"), root, wheel, mode],
                           CHECK_TIMEOUT)
        self.assertEqual(code, 0, "check-in-root.sh %s failed:\n%s" % (mode, output))
        passed = {line.split()[1] for line in output.splitlines() if line.startswith("PASS ")}
        self.assertEqual(passed, set(expected_checks), output)
        self.assertNotIn("\nFAIL ", "\n" + output)

    def test_x86_64_wheel_in_debian_11(self):
        self.check("x86_64", "bullseye", "amd64", "bullseye-full",
                   ["version", "python-m", "standalone", "static-2node", "c10d-auth",
                    "numa-dry-run", "man", "completion"])

    def test_aarch64_wheel_in_debian_12_arm64(self):
        self.check("aarch64", "bookworm", "arm64", "arm64-allreduce",
                   ["version", "standalone"])


if __name__ == "__main__":
    unittest.main()
