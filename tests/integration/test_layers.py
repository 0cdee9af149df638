"""The layers (docs/architecture.md): scripts/check_layers.py passes on the tree and fails, naming
the file and the rule, on a copy with an include, a link or a namespace that goes up; the built
worker library and ddprun-store hold neither the etcd client nor the launcher."""
import os
import subprocess
import unittest

from ddprun_testlib import BUILD_DIR, REPO_ROOT, SourceTreeCopy

FOLDERS = ["common", "completion", "store", "rendezvous", "elastic", "cli", "launcher", "worker",
           "tools"]


def run_check(root):
    return SourceTreeCopy.run_script("check_layers.py", root)


class LayersTest(SourceTreeCopy, unittest.TestCase):
    def setUp(self):
        self.copy_tree("ddprun-layers-", FOLDERS, ignore=("*.py", "*.md", "*.scd", "*.in"))

    def assert_refused(self, *expected):
        self.assert_script_refuses(run_check(self.tmp), "up the layers", *expected)

    def test_the_tree_points_down(self):
        result = run_check(REPO_ROOT)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("points down", result.stdout)
        self.assertEqual(run_check(self.tmp).returncode, 0)  # the copy, before any edit

    def test_an_include_up_the_layers_is_refused(self):
        self.edit("store/store.cc", '#include "store/store.h"',
                  '#include "store/store.h"\n#include "rendezvous/dynamic_rendezvous.h"')
        self.assert_refused('store/store.cc:', 'includes "rendezvous/dynamic_rendezvous.h" '
                            '(rendezvous); store may use common')

    def test_a_worker_include_of_the_etcd_client_is_refused(self):
        self.edit("worker/worker_store.cc", '#include "worker/worker_store.h"',
                  '#include "worker/worker_store.h"\n#include "store/etcd/etcd_client.h"')
        self.assert_refused('worker/worker_store.cc:', '(store/etcd); worker may use store, common')

    def test_a_link_up_the_layers_is_refused(self):
        self.edit("rendezvous/CMakeLists.txt", "PUBLIC ddprun_store",
                  "PUBLIC ddprun_launcher ddprun_store")
        self.assert_refused("rendezvous/CMakeLists.txt:",
                            "ddprun_rendezvous links ddprun_launcher (launcher)")

    def test_a_namespace_of_another_folder_is_refused(self):
        self.edit("launcher/process/spawn.cc", "namespace ddprun::launcher::process {",
                  "namespace ddprun::launcher {")
        self.assert_refused("launcher/process/spawn.cc:",
                            "opens namespace ddprun::launcher; code in launcher/process/ is in "
                            "ddprun::launcher::process")


def symbols(path):
    result = subprocess.run(["nm", "-C", path], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise unittest.SkipTest("nm %s: %s" % (path, result.stderr.strip()))
    return result.stdout


class BinariesTest(unittest.TestCase):
    """What goes up the layers at link time shows in the binaries' symbols."""

    def check_binary(self, rel, forbidden):
        path = os.path.join(BUILD_DIR, rel)
        if not os.path.exists(path):
            self.skipTest("%s not built" % path)
        table = symbols(path)
        self.assertIn("ddprun::store::", table)  # both use the store: the check can see symbols
        for name in forbidden:
            self.assertNotIn(name, table, "%s holds %s" % (rel, name))

    def test_the_worker_library_holds_the_store_only(self):
        self.check_binary("worker/libddprun_worker.so", [
            "ddprun::store::etcd::", "ddprun::launcher::", "ddprun::rendezvous::",
            "ddprun::elastic::", "ddprun::cli::", "boost::beast::"])

    def test_ddprun_store_holds_neither_etcd_nor_the_launcher(self):
        self.check_binary("tools/ddprun-store", [
            "ddprun::store::etcd::", "ddprun::launcher::", "boost::beast::"])


if __name__ == "__main__":
    unittest.main()
