"""Direct clock reads (docs/architecture.md, "The seams": Clock): scripts/check_clock_reads.py
passes on the tree, and fails, naming the file and the line, on a copy with a read planted in
policy code (directly or through an alias of a std::chrono clock), or with an allow-list entry
whose file reads no clock any more. Comments and tests are not code it judges."""
import os
import unittest

from ddprun_testlib import REPO_ROOT, SourceTreeCopy

FOLDERS = ["common", "store", "rendezvous", "elastic", "cli", "launcher", "worker", "tools",
           "bench"]
WATCHDOG = "launcher/process/worker_watchdog.cc"


def run_check(root):
    return SourceTreeCopy.run_script("check_clock_reads.py", root)


class ClockReadsTest(SourceTreeCopy, unittest.TestCase):
    def setUp(self):
        self.copy_tree("ddprun-clock-reads-", FOLDERS, ignore=("build*", "*.py", "*.md"))

    def assert_refused(self, *expected):
        self.assert_script_refuses(run_check(self.tmp), "check_clock_reads: 1 problem", *expected)

    def test_the_tree_reads_clocks_only_where_allowed(self):
        result = run_check(REPO_ROOT)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("clock reads only in the", result.stdout)
        self.assertEqual(run_check(self.tmp).returncode, 0)  # the copy, before any edit

    def test_a_planted_read_in_the_watchdog_is_refused(self):
        self.edit(WATCHDOG, "last_activity_ = clock_.Now();",
                  "last_activity_ = std::chrono::steady_clock::now();")
        self.assert_refused(WATCHDOG + ":", "reads the clock directly")

    def test_a_read_through_an_alias_is_refused(self):
        self.edit(WATCHDOG, "using std::chrono::milliseconds;",
                  "using std::chrono::milliseconds;\nusing Wall = std::chrono::system_clock;\n"
                  "auto Stamp() { return Wall::now(); }")
        self.assert_refused(WATCHDOG + ":", "Wall::now()")

    def test_a_read_in_a_comment_or_a_test_is_not_one(self):
        self.edit(WATCHDOG, "using std::chrono::milliseconds;",
                  "using std::chrono::milliseconds;  // not steady_clock::now()")
        os.makedirs(os.path.join(self.tmp, "tests"))
        with open(os.path.join(self.tmp, "tests", "t_test.cc"), "w") as f:
            f.write("auto t = std::chrono::steady_clock::now();\n")
        self.assertEqual(run_check(self.tmp).returncode, 0)

    def test_a_stale_allowance_is_refused(self):
        os.remove(os.path.join(self.tmp, "tools", "ddprun_store.cc"))
        self.assert_refused("tools/ddprun_store.cc: allowed in scripts/check_clock_reads.py but "
                            "reads no clock directly")


if __name__ == "__main__":
    unittest.main()
