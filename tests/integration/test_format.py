"""The C++ sources are clang-formatted: scripts/check_format.py passes on the tree, and fails,
naming the file and the fix, on a copy with one badly formatted line."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from ddprun_testlib import REPO_ROOT

CHECK = os.path.join(REPO_ROOT, "scripts", "check_format.py")


def run_check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True,
                          timeout=600)


class FormatTest(unittest.TestCase):
    def setUp(self):
        if shutil.which("clang-format") is None:
            self.fail("clang-format is missing: scripts/install-deps.sh installs it")

    def test_the_tree_is_formatted(self):
        result = run_check(REPO_ROOT)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("C++ files formatted", result.stdout)

    def test_a_badly_formatted_line_is_refused(self):
        tmp = tempfile.mkdtemp(prefix="ddprun-format-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        shutil.copy(os.path.join(REPO_ROOT, ".clang-format"), tmp)
        os.makedirs(os.path.join(tmp, "common"))
        shutil.copy(os.path.join(REPO_ROOT, "common", "duration.h"), os.path.join(tmp, "common"))
        self.assertEqual(run_check(tmp).returncode, 0)  # the copy, before any edit
        path = os.path.join(tmp, "common", "duration.h")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("namespace ddprun {", "namespace ddprun {\nint  planted ( ) ;", 1))
        result = run_check(tmp)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("common/duration.h:", result.stdout)
        self.assertIn("run `make format`", result.stderr)


if __name__ == "__main__":
    unittest.main()
