"""The C++ sources are clang-formatted: scripts/check_format.py passes on the tree, and fails,
naming the file and the fix, on a copy with one badly formatted line."""
import shutil
import unittest

from ddprun_testlib import REPO_ROOT, SourceTreeCopy


def run_check(root):
    return SourceTreeCopy.run_script("check_format.py", root, timeout=600)


class FormatTest(SourceTreeCopy, unittest.TestCase):
    def setUp(self):
        if shutil.which("clang-format") is None:
            self.fail("clang-format is missing: scripts/install-deps.sh installs it")

    def test_the_tree_is_formatted(self):
        result = run_check(REPO_ROOT)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("C++ files formatted", result.stdout)

    def test_a_badly_formatted_line_is_refused(self):
        self.copy_tree("ddprun-format-", [".clang-format", "common/duration.h"])
        self.assertEqual(run_check(self.tmp).returncode, 0)  # the copy, before any edit
        self.edit("common/duration.h", "namespace ddprun {",
                  "namespace ddprun {\nint  planted ( ) ;")
        self.assert_script_refuses(run_check(self.tmp), "run `make format`", "common/duration.h:")


if __name__ == "__main__":
    unittest.main()
