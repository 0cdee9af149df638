"""The packages `make package` built, installed for real (make check-package; root, Debian).

Installs build/ddprun_<version>_<arch>.deb with dpkg -i and checks the installed tool as a user
would meet it: `ddprun --version` (the build's version and git revision), a standalone launch of
the installed ddprun-allreduce-check, `man -w` for every program, bash completion of
`ddprun --nnod<TAB>` through bash-completion's loader (zsh's compinit and fish find theirs too),
and the C++ example built against the installed CMake package and pkg-config file and run under
the installed ddprun. Then `dpkg -r` (in a finally, so also after a failure; then --purge) and
a check that every file and directory the package brought is gone. Without installing: lintian
on the .deb (errors or warnings fail, and any hardening-* tag; overrides ship in the package,
each with its reason); hardening-check on every ELF file of the .deb (tests/package/hardening.py);
the BSD-3-Clause licence in the DEP-5 copyright file, the .rpm's License tag and %license file
and the archive; the .rpm and the .tar.gz list the same files as the .deb (but for the licence
file); the -dbgsym .ddeb and the -debuginfo .rpm carry the debug symbols of every program and of
the library. Completion is checked for ddprun-launch (the link to ddprun) too.

The machine is left as it was: the test refuses to run when ddprun is already installed or
when any file of the package already exists.
"""
import functools
import glob
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))
import docs_lib  # noqa: E402
from ddprun_testlib import run_checked  # noqa: E402
import hardening  # noqa: E402

BUILD_DIR = os.path.abspath(os.environ.get("DDPRUN_BUILD_DIR", os.path.join(REPO_ROOT, "build")))
EXAMPLE = os.path.join(REPO_ROOT, "examples", "cpp")
# The installed programs, whatever else is on the caller's PATH (a /usr/local install, build/).
SYSTEM_ENV = dict(os.environ, PATH="/usr/bin:/bin")
# The ELF files the .deb installs (libddprun_worker_nccl.so only where NCCL was found).
ELF_FILES = ["usr/bin/ddprun", "usr/bin/ddprun-store", "usr/bin/ddprun-allreduce-check",
             "usr/bin/ddprun-allreduce-perf", "usr/lib/*/libddprun_worker.so.0.*"]
# The licence in the .rpm (%license) and at the top of the archive.
RPM_LICENSE = "/usr/share/licenses/ddprun/LICENSE"
LICENSE = os.path.join(REPO_ROOT, "LICENSE")


run = functools.partial(run_checked, timeout=300)


def only(pattern):
    paths = sorted(glob.glob(os.path.join(BUILD_DIR, pattern)))
    if len(paths) != 1:
        raise AssertionError("expected one %s in %s, found %s: run make package" % (
            pattern, BUILD_DIR, paths))
    return paths[0]


def deb_entries(deb):
    """{path: type} of a .deb's data ('d' directory, '-' file, 'l' link), paths from /."""
    entries = {}
    for line in run(["dpkg-deb", "--contents", deb]).stdout.splitlines():
        kind, path = line[0], line.split(None, 5)[5].split(" -> ")[0]
        entries["/" + path.lstrip("./").rstrip("/")] = kind
    entries.pop("/", None)
    return entries


def files_of(entries):
    return sorted(path for path, kind in entries.items() if kind != "d")


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or shutil.which("dpkg") is None:
            raise unittest.SkipTest("needs root and dpkg (Debian)")
        cls.deb = only("ddprun_*_*.deb")
        cls.entries = deb_entries(cls.deb)
        cls.version = re.match(r"ddprun_([^_]+)_", os.path.basename(cls.deb)).group(1)

    def test_lintian_is_clean(self):
        # Overridden tags are shown as "O:" lines (with their reasons as "N:" lines); any "E:" or
        # "W:" line fails. (--fail-on counts overridden tags when --show-overrides is given.)
        # A hardening-* tag fails at any level (hardening-no-bindnow is only "I:") unless
        # overridden with its reason (the NCCL plugin's fortify, as in tests/package/hardening.py).
        result = run(["lintian", "--display-info", "--show-overrides", self.deb], timeout=600,
                     check=False)
        print("\nlintian %s:\n%s" % (os.path.basename(self.deb), result.stdout))
        bad = [line for line in result.stdout.splitlines() if line[:3] in ("E: ", "W: ")]
        self.assertEqual(bad, [], "lintian errors or warnings")
        hardening_tags = [line for line in result.stdout.splitlines()
                          if re.match(r"^[EWIPX]: \S+: hardening-", line)]
        self.assertEqual(hardening_tags, [], "lintian hardening tags")

    def test_hardening_check(self):
        with tempfile.TemporaryDirectory(prefix="ddprun-deb-") as root:
            run(["dpkg-deb", "-x", self.deb, root])
            for pattern in ELF_FILES:  # the files the check must see, so that it cannot pass empty
                self.assertTrue(glob.glob(os.path.join(root, pattern)), pattern)
            missing, report = hardening.missing_protections(root)
        print("\n%s\n%s" % (" ".join(hardening.hardening_check_argv()), report))
        self.assertEqual(missing, {}, "protections hardening-check reports missing, by file")

    def test_licence(self):
        with open(LICENSE) as f:
            licence = f.read()
        self.assertIn("Copyright (c) 2025-2026, the ddprun authors\n", licence)
        # The clauses and the disclaimer: the text after the copyright lines.
        terms = " ".join(licence.split("All rights reserved.", 1)[1].split())
        self.assertIn("Neither the name of the copyright holder", terms)
        # Debian: DEP-5, every file under BSD-3-Clause, the licence's full text in its paragraph.
        copyright = run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO "
                         "./usr/share/doc/ddprun/copyright" % self.deb]).stdout
        paragraphs = [p for p in copyright.split("\n\n") if p.strip()]
        self.assertTrue(paragraphs[0].startswith(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
        self.assertIn("Files: *\nCopyright: 2025-2026 the ddprun authors\nLicense: BSD-3-Clause\n",
                      copyright)
        standalone = [p for p in paragraphs if p.startswith("License: BSD-3-Clause\n")]
        self.assertEqual(len(standalone), 1, "one License: BSD-3-Clause paragraph with the text")
        text = " ".join(line.strip() for line in standalone[0].splitlines()[1:]
                        if line.strip() != ".")
        self.assertEqual(" ".join(text.split()), terms)
        # RPM: the SPDX name in its License tag, LICENSE as its %license file.
        rpm = only("ddprun-[0-9]*.rpm")
        self.assertEqual(run(["rpm", "-qp", "--queryformat", "%{LICENSE}", rpm]).stdout,
                         "BSD-3-Clause")
        self.assertEqual(run(["rpm", "-qp", "--licensefiles", rpm]).stdout.split(), [RPM_LICENSE])
        in_rpm = run(["sh", "-c", "rpm2cpio '%s' | cpio -i --quiet --to-stdout .%s" % (
            rpm, RPM_LICENSE)]).stdout
        self.assertEqual(in_rpm, licence)
        # The archive: LICENSE in its top directory.
        tarball = only("ddprun-*.tar.gz")
        top = os.path.basename(tarball)[:-len(".tar.gz")]
        self.assertEqual(run(["tar", "-xzOf", tarball, top + "/LICENSE"]).stdout, licence)

    def test_rpm_and_tarball_hold_the_same_files(self):
        # The licence file: the .deb has it in its copyright file (test_licence).
        files = files_of(self.entries)
        rpm = only("ddprun-[0-9]*.rpm")
        dump = run(["rpm", "-qlp", "--dump", rpm]).stdout.splitlines()
        # --dump: path size mtime digest mode ...; mode 040... is a directory.
        rpm_files = sorted(line.split()[0] for line in dump if not line.split()[4].startswith("040"))
        self.assertEqual(rpm_files, sorted(files + [RPM_LICENSE]))
        tarball = only("ddprun-*.tar.gz")
        listing = run(["tar", "-tvzf", tarball]).stdout.splitlines()
        tar_paths = [line.split(None, 5)[5].split(" -> ")[0].split("/", 1)[1]
                     for line in listing if line[0] != "d"]
        self.assertIn("LICENSE", tar_paths)
        tar_files = sorted("/usr/" + path for path in tar_paths if path != "LICENSE")
        # Unpacked anywhere but /usr, zsh looks in share/zsh/site-functions (Debian's zsh in
        # /usr/share/zsh/vendor-completions for packages): the one deliberate difference.
        tar_files = sorted(path.replace("/zsh/site-functions/", "/zsh/vendor-completions/")
                           for path in tar_files)
        self.assertEqual(tar_files, files)

    def test_debug_symbols_are_split_out(self):
        ddeb = only("ddprun-dbgsym_*.ddeb")
        debug = [path for path in deb_entries(ddeb) if path.endswith(".debug")]
        self.assertGreaterEqual(len(debug), 5, "ddprun, ddprun-store, two programs, the library")
        for binary in ("/usr/bin/ddprun", "/usr/bin/ddprun-store"):
            self.assertIn(binary, self.entries)

    def test_rpm_debuginfo(self):
        # /usr/lib/debug/<file>-<version>-<release>.<arch>.debug for each program and the library
        # (rpmbuild's find-debuginfo), and the sources under /usr/src/debug/ddprun (CPack).
        debuginfo = only("ddprun-debuginfo-*.rpm")
        listed = run(["rpm", "-qlp", debuginfo]).stdout.split()
        elves = [path for path, kind in self.entries.items() if kind == "-" and (
            path.startswith("/usr/bin/") or re.search(r"\.so[.0-9]*$", path))]
        self.assertGreaterEqual(len(elves), 5, elves)
        missing = [path for path in elves if not any(
            re.fullmatch(r"/usr/lib/debug%s(-[^/]*)?\.debug" % re.escape(path), entry)
            for entry in listed)]
        self.assertEqual(missing, [], "no .debug file in %s for these" % debuginfo)
        self.assertIn("/usr/src/debug/ddprun/src_0/launcher/main.cc", listed)
        # The .debug files hold debug information (not just the stripped sections' stubs), and
        # the .rpm's programs none.
        with tempfile.TemporaryDirectory(prefix="ddprun-rpm-") as work:
            run(["sh", "-c", "rpm2cpio '%s' | cpio -idm --quiet" % debuginfo], cwd=work)
            run(["sh", "-c", "rpm2cpio '%s' | cpio -idm --quiet ./usr/bin/ddprun" %
                 only("ddprun-[0-9]*.rpm")], cwd=work)
            debug_file = glob.glob(os.path.join(work, "usr/lib/debug/usr/bin/ddprun-[0-9]*.debug"))
            self.assertEqual(len(debug_file), 1, listed)
            self.assertIn(".debug_info", run(["readelf", "-S", debug_file[0]]).stdout)
            self.assertNotIn(".debug_info",
                             run(["readelf", "-S", os.path.join(work, "usr/bin/ddprun")]).stdout)

    def test_install_use_remove(self):
        if run(["dpkg-query", "-W", "-f=${Status}", "ddprun"], check=False).stdout.startswith(
                "install"):
            self.fail("ddprun is already installed here: the test would change this machine")
        existing = [path for path, kind in self.entries.items()
                    if kind != "d" and os.path.lexists(path)]
        self.assertEqual(existing, [], "files of the package already exist (installed by hand?)")
        new_dirs = [path for path, kind in self.entries.items()
                    if kind == "d" and not os.path.isdir(path)]
        try:
            run(["dpkg", "-i", self.deb])
            with self.subTest("version"):
                self.check_version()
            with self.subTest("launch"):
                self.check_launch()
            with self.subTest("ddprun-launch"):
                self.check_legacy_launch()
            with self.subTest("man"):
                for program in docs_lib.PROGRAMS:
                    self.assertEqual(run(["man", "-w", program]).stdout.strip(),
                                     "/usr/share/man/man1/%s.1.gz" % program)
            with self.subTest("completion"):
                self.check_completion()
            with self.subTest("example"):
                self.check_example()
        finally:
            remove = run(["dpkg", "-r", "ddprun"], check=False)
            left = [path for path in files_of(self.entries) if os.path.lexists(path)]
            left += [path for path in new_dirs if os.path.lexists(path)]
            # Whatever dpkg -r kept (it keeps conffiles; the package has none) goes too.
            purge = run(["dpkg", "--purge", "ddprun"], check=False)
        self.assertEqual(remove.returncode, 0, remove.stderr)
        self.assertEqual(left, [], "left behind by dpkg -r")
        self.assertEqual(purge.returncode, 0, purge.stderr)
        self.assertNotIn("libddprun_worker", run(["ldconfig", "-p"]).stdout)

    def check_version(self):
        installed = run(["/usr/bin/ddprun", "--version"]).stdout.strip()
        self.assertRegex(installed, r"^ddprun %s \(git ([0-9a-f]{12}(-dirty)?|unknown)\)$"
                         % re.escape(self.version))
        built = run([os.path.join(BUILD_DIR, "launcher", "ddprun"), "--version"]).stdout.strip()
        self.assertEqual(installed, built)
        for program in ("ddprun-allreduce-check", "ddprun-allreduce-perf"):
            self.assertEqual(run([program, "--version"], env=SYSTEM_ENV).stdout.strip(),
                             installed.replace("ddprun ", program + " ", 1))

    def check_launch(self):
        result = run(["ddprun", "--standalone", "--nproc-per-node=2", "--no-python",
                      "ddprun-allreduce-check", "--backend", "cpu", "--timeout", "60"],
                     cwd=tempfile.gettempdir(), env=SYSTEM_ENV)
        self.assertEqual(len(re.findall(r"^rank [01]/2 ok: backend=cpu", result.stdout, re.M)), 2,
                         result.stdout)

    def check_legacy_launch(self):
        """ddprun-launch, torch.distributed.launch's stand-in: a link to ddprun, documented in
        ddprun(1), whose workers get --local_rank=N right after the script."""
        self.assertEqual(self.entries.get("/usr/bin/ddprun-launch"), "l")
        self.assertEqual(os.readlink("/usr/bin/ddprun-launch"), "ddprun")
        self.assertEqual(os.readlink("/usr/share/man/man1/ddprun-launch.1.gz"), "ddprun.1.gz")
        self.assertEqual(run(["man", "-w", "ddprun-launch"]).stdout.strip(),
                         "/usr/share/man/man1/ddprun.1.gz")  # man-db follows the link
        with tempfile.TemporaryDirectory() as work:
            script = os.path.join(work, "train.py")
            open(script, "w").close()
            out = run(["ddprun-launch", "--dry-run", "--nproc-per-node=2", script, "--lr", "1"],
                      env=SYSTEM_ENV).stdout
        self.assertIn(" %s --local_rank=1 --lr 1\n" % script, out)

    def check_completion(self):
        # bash-completion's loader finds each script by the command's name: ddprun-launch's too.
        self.assertEqual(docs_lib.bash_complete("ddprun", ["ddprun --nnod"], loader=True),
                         [["--nnodes"]])
        self.assertEqual(sorted(docs_lib.bash_complete("ddprun-launch", ["ddprun-launch --nproc"],
                                                       loader=True)[0]),
                         ["--nproc-per-node", "--nproc_per_node"])
        for program in list(docs_lib.PROGRAMS) + ["ddprun-launch"]:
            self.assertTrue(os.path.exists("/usr/share/bash-completion/completions/" + program))
        if shutil.which("zsh"):
            run(["zsh", "-fc", "autoload -U compinit && compinit -u -D && "
                 "(( ${+_comps[ddprun]} && ${+_comps[ddprun-store]} && "
                 "${+_comps[ddprun-launch]} ))"])
        if shutil.which("fish"):  # with fish's own config (its completion path), no user's
            with tempfile.TemporaryDirectory() as home:
                fish_env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=home, XDG_DATA_HOME=home)
                out = run(["fish", "-c", "complete -C 'ddprun --nnod'"], env=fish_env).stdout
                self.assertEqual(out.split("\t")[0], "--nnodes")
                out = run(["fish", "-c", "complete -C 'ddprun-launch --nproc'"],
                          env=fish_env).stdout
            self.assertIn("--nproc-per-node", [line.split("\t")[0] for line in out.splitlines()])

    def check_example(self):
        with tempfile.TemporaryDirectory(prefix="ddprun-example-") as work:
            build = os.path.join(work, "cmake")
            run(["cmake", "-S", EXAMPLE, "-B", build, "-DCMAKE_BUILD_TYPE=Release"])
            run(["cmake", "--build", build])
            flags = run(["pkg-config", "--cflags", "--libs", "ddprun"]).stdout.split()
            pkg_binary = os.path.join(work, "pkgconfig_example")
            run(["g++", "-std=c++20", "-O1", os.path.join(EXAMPLE, "allreduce_example.cc"), "-o",
                 pkg_binary] + flags)
            # Every installed header compiles on its own.
            for header in sorted(path for path in self.entries
                                 if path.startswith("/usr/include/ddprun/") and
                                 path.endswith(".h")):
                run(["g++", "-std=c++20", "-fsyntax-only", "-x", "c++", "-include", header,
                     "/dev/null"] + [flag for flag in flags if flag.startswith("-I")])
            for binary in (os.path.join(build, "allreduce_example"), pkg_binary):
                result = run(["ddprun", "--standalone", "--nproc-per-node=3", binary], cwd=work,
                             env=SYSTEM_ENV)
                lines = re.findall(r"^rank [0-2]/3 ok: allreduce sum 6 \(expected 6\), store says "
                                   r"'hello from rank 0' \[libddprun_worker %s " % re.escape(
                                       self.version), result.stdout, re.M)
                self.assertEqual(len(lines), 3, result.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
