"""What a portable wheel's ELF files may need (issue 38, docs/packaging.md): libraries of glibc
only (libc, libm, libpthread, libdl, librt, libutil, the dynamic loader), no glibc symbol version
above 2.28, no other versioned dependency (GLIBCXX, CXXABI, GCC: the C++ runtime must be linked
in), and the wheel's own architecture.

    python wheel_elf.py WHEEL_OR_ELF...   prints one line per problem; exit 1 when there is one.

Needs pyelftools (auditwheel's dependency: the wheel tools venv has it).
"""
import io
import re
import sys
import zipfile

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

GLIBC_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}
GLIBC_FLOOR = (2, 28)
MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


def elf_problems(name, data, arch=None):
    """The problems of one ELF image `data` (bytes) named `name`: a list of one-line strings."""
    elf = ELFFile(io.BytesIO(data))
    problems = []
    if arch and elf["e_machine"] != MACHINES[arch]:
        problems.append(f"{name}: machine {elf['e_machine']}, not {arch}")
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags("DT_NEEDED"):
                if tag.needed not in GLIBC_LIBRARIES:
                    problems.append(f"{name}: needs {tag.needed}, which is not part of glibc")
            for tag in section.iter_tags():
                if tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                    problems.append(f"{name}: has {tag.entry.d_tag} (a path of the build machine)")
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    problems.extend(version_problems(name, verneed.name, aux.name))
    return problems


def version_problems(name, library, version):
    match = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", version)
    if match is None:
        if version.startswith("GLIBC_PRIVATE"):
            return [f"{name}: uses {version} of {library}"]
        return [f"{name}: needs {version} of {library} (only glibc's symbol versions are allowed)"]
    if (int(match.group(1)), int(match.group(2))) > GLIBC_FLOOR:
        return [f"{name}: needs {version} of {library}, above glibc {GLIBC_FLOOR[0]}.{GLIBC_FLOOR[1]}"]
    return []


def wheel_arch(path):
    for arch in MACHINES:
        if path.endswith(f"_{arch}.whl"):
            return arch
    return None


def wheel_elves(path):
    """(member name, bytes) of every ELF file in the wheel at `path`."""
    with zipfile.ZipFile(path) as wheel:
        for member in wheel.namelist():
            data = wheel.read(member)
            if data[:4] == b"\x7fELF":
                yield member, data


def problems_of(path):
    """(problems, number of ELF files checked) of a wheel or of one ELF file."""
    if path.endswith(".whl"):
        elves = list(wheel_elves(path))
        arch = wheel_arch(path)
        problems = [p for member, data in elves for p in elf_problems(member, data, arch)]
        if not elves:
            problems.append(f"{path}: no ELF file in the wheel")
        return problems, len(elves)
    with open(path, "rb") as f:
        return elf_problems(path, f.read()), 1


def main(paths):
    failed = False
    for path in paths:
        problems, count = problems_of(path)
        for problem in problems:
            print(problem)
        print(f"{path}: {count} ELF file(s), {len(problems)} problem(s)")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
