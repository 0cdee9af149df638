#!/usr/bin/env python3
"""The C++ sources are clang-formatted (.clang-format at the top of the tree).

Runs `clang-format --dry-run -Werror` on every *.cc and *.h under SOURCE_DIR (build trees, dist/
and hidden folders left out), a batch of files per call. Prints each file that differs, with
clang-format's first complaint, and the fix (`make format`); exits 1 when any differs, 0 with a
one-line summary otherwise; 2 when clang-format is missing.

Usage: check_format.py [SOURCE_DIR]   (default: the tree this script is in)
       check_format.py --fix [SOURCE_DIR]   rewrites the files in place (make format)
"""
import pathlib
import re
import shutil
import subprocess
import sys

SKIPPED = re.compile(r"^(build[^/]*|dist|\..*)$")  # top-level folders that are not sources
BATCH = 64


def sources(root):
    """Every C++ file of the tree, sorted, as paths relative to `root`."""
    found = []
    for top in sorted(root.iterdir()):
        if SKIPPED.match(top.name):
            continue
        if top.is_file() and top.suffix in (".cc", ".h"):
            found.append(top)
        elif top.is_dir():
            found.extend(p for p in top.rglob("*") if p.suffix in (".cc", ".h") and p.is_file())
    return sorted(p.relative_to(root) for p in found)


def clang_format():
    for name in ("clang-format", "clang-format-14"):
        if shutil.which(name):
            return name
    return None


def main(argv):
    fix = "--fix" in argv
    args = [a for a in argv if a != "--fix"]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    tool = clang_format()
    if tool is None:
        print("clang-format not found: install it (scripts/install-deps.sh: apt-get install "
              "clang-format)", file=sys.stderr)
        return 2
    files = [str(p) for p in sources(root)]
    mode = ["-i"] if fix else ["--dry-run", "-Werror"]
    complaints = {}
    for start in range(0, len(files), BATCH):
        batch = files[start:start + BATCH]
        result = subprocess.run([tool, "--style=file", *mode, *batch], cwd=root,
                                capture_output=True, text=True, timeout=300)
        for line in result.stderr.splitlines():
            match = re.match(r"^(.+?):(\d+):\d+: (?:error|warning): (.*)$", line)
            if match and match.group(1) not in complaints:
                complaints[match.group(1)] = "%s:%s: %s" % match.groups()
    if fix:
        print("clang-format: %d C++ files formatted" % len(files))
        return 0
    for path in sorted(complaints):
        print(complaints[path])
    if complaints:
        print("%d of %d C++ files are not clang-formatted; run `make format` (or "
              "scripts/check_format.py --fix)" % (len(complaints), len(files)), file=sys.stderr)
        return 1
    print("clang-format: all %d C++ files formatted" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
