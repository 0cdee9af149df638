"""ddprun loads OpenSSL and hwloc on first use (cmake/LazyLibraries.cmake, issue 39): a plain
launch maps neither (nor libudev, hwloc's), and --numa-binding, which needs hwloc, still works.
Skipped in trees built without DDPRUN_LAZY_LIBRARIES (the wheel, the sanitizer trees).
"""
import os
import re
import subprocess
import unittest

import ddprun_testlib as lib

LAZY = ("libssl.so", "libcrypto.so", "libhwloc.so", "libudev.so")


def lazy_build():
    cache = os.path.join(lib.BUILD_DIR, "CMakeCache.txt")
    if not os.path.exists(cache):
        return False
    with open(cache) as f:
        return re.search(r"^DDPRUN_LAZY_LIBRARIES:BOOL=ON$", f.read(), re.M) is not None


def loaded_libraries(flags):
    """The shared objects the dynamic loader maps for one launch of 2 x /bin/true."""
    env = dict(os.environ, LD_DEBUG="files")
    proc = subprocess.run([lib.DDPRUN, "--standalone", "--nproc_per_node=2", *flags,
                           "--no_python", "/bin/true"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(re.findall(r"file=(\S+) \[0\];  generating link map", proc.stderr))


@unittest.skipUnless(lazy_build(), "built without DDPRUN_LAZY_LIBRARIES")
class LazyLibrariesTest(unittest.TestCase):

    def test_not_linked(self):
        dynamic = subprocess.run(["readelf", "-d", lib.DDPRUN], capture_output=True, text=True,
                                 check=True).stdout
        for name in LAZY:
            self.assertNotIn(name, dynamic)

    def test_plain_launch_loads_none(self):
        loaded = loaded_libraries([])
        self.assertEqual([f for f in loaded if f.startswith(LAZY)], [], sorted(loaded))

    def test_numa_binding_loads_hwloc(self):
        loaded = loaded_libraries(["--numa-binding=node"])
        self.assertIn("libhwloc.so.15", {f.split("/")[-1] for f in loaded}, sorted(loaded))


if __name__ == "__main__":
    unittest.main()
