"""hardening-check (devscripts) over the ELF files a package installs.

missing_protections(root) runs `hardening-check` on every ELF file under `root` (an unpacked
package) and returns {path under root: [what it reports as missing]}; empty when every file has
every protection. hardening-check's own semantics decide what "missing" is:

- "no, ..." (not followed by "(ignored)") is missing: PIE, stack protector, fortify ("no, only
  unprotected functions found!"), RELRO, BIND_NOW, control flow integrity (x86 IBT/SHSTK);
- "unknown, ..." is not: fortify when the file calls no fortifiable libc function at all (nothing
  to protect), the stack protector when there are no symbols, and stack clash protection, which
  hardening-check only finds as a probe loop in a function with a large frame;
- a shared library is "no, regular shared library (ignored)" for PIE: not an executable.

Control flow integrity is only asked for where the distribution's own hardened flags ask for it
(`dpkg-buildflags` with hardening=+all gives -fcf-protection): Debian 12's do not, and could not,
since its glibc's crt1.o and crti.o carry no IBT/SHSTK property, so the linker drops it from every
program (even `hardening-check /usr/bin/ls` fails it there). Elsewhere --nocfprotection is left
out, and its absence fails like the others.

EXEMPT names the one file hardening-check cannot judge, with the check it skips and why; every
other protection is still required of it.
"""
import os
import subprocess

ELF_MAGIC = b"\x7fELF"

# basename -> (hardening-check options, why). Also in packaging/debian/lintian-overrides.
EXEMPT = {
    "libddprun_worker_nccl.so": (
        ["--nofortify"],
        "compiled with -D_FORTIFY_SOURCE=2 like the rest, but its own code's memcpy/memset/"
        "snprintf calls write to buffers of sizes unknown at compile time (no __*_chk call to "
        "see), and NVIDIA's prebuilt libcudart_static.a, linked in, brings unprotected calls: "
        "hardening-check's heuristic then says \"no, only unprotected functions found\""),
}


def elf_files(root):
    """Every regular ELF file under root (links are skipped: they point at one of these)."""
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) == ELF_MAGIC:
                    found.append(path)
    return sorted(found)


def distribution_asks_for_cf_protection():
    flags = subprocess.run(["dpkg-buildflags", "--get", "CXXFLAGS"], stdout=subprocess.PIPE,
                           text=True, check=True,
                           env=dict(os.environ, DEB_BUILD_MAINT_OPTIONS="hardening=+all")).stdout
    return "-fcf-protection" in flags.split()


def hardening_check_argv():
    argv = ["hardening-check"]
    if not distribution_asks_for_cf_protection():
        argv.append("--nocfprotection")
    return argv


def missing_protections(root):
    """({relative path: [missing protection lines]}, the full report text)."""
    files = elf_files(root)
    if not files:
        raise AssertionError("no ELF file under %s" % root)
    argv = hardening_check_argv()
    missing, report = {}, []
    for path in files:
        extra = EXEMPT.get(os.path.basename(path), ([], ""))[0]
        result = subprocess.run(argv + extra + [path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        report.append(result.stdout + result.stderr)
        bad = [line.strip() for line in result.stdout.splitlines()[1:]
               if ": no," in line and not line.rstrip().endswith("(ignored)")]
        if result.returncode != 0 and not bad:  # failed without a "no": say so, do not pass
            bad = ["hardening-check exited %d: %s" % (result.returncode, result.stderr.strip())]
        if bad:
            missing[os.path.relpath(path, root)] = bad
    return missing, "".join(report)
