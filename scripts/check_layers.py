#!/usr/bin/env python3
"""Fails when a dependency goes up the layers (docs/architecture.md, "Layers").

Three checks over the source tree, stdlib only:
- includes: every `#include "folder/..."` of a file under one of the project's folders names
  its own folder or one that folder may use (LAYERS below);
- links: every ddprun_* library a folder's CMakeLists.txt links (target_link_libraries) belongs
  to its own folder or one it may use;
- namespaces: every `namespace ddprun...` a file opens is its folder's (or nested inside it).

Usage: check_layers.py [SOURCE_DIR]   (default: the tree this script is in)
Prints one line per violation, "file:line: what, and what the folder may use", and exits 1 if
there is any; prints a one-line summary and exits 0 otherwise.
"""
import pathlib
import re
import sys

# Each folder and the folders it may use directly (not counting itself). A folder may use what
# a folder it may use may use only by naming it here too: the table is the whole picture.
LAYERS = {
    "common": [],
    "completion": [],
    "store": ["common"],
    "store/etcd": ["store", "common"],
    "rendezvous": ["store", "common"],
    "elastic": ["rendezvous", "store", "common"],
    "cli": ["elastic", "store", "common", "completion"],
    "launcher/process": ["elastic", "common"],
    "launcher/backend": ["elastic", "rendezvous", "store/etcd", "store", "common"],
    "launcher/telemetry": ["elastic", "common"],
    "launcher": ["launcher/backend", "launcher/process", "launcher/telemetry", "cli", "elastic", "rendezvous", "store",
                 "common", "completion"],
    "worker": ["store", "common"],
    "tools": ["cli", "rendezvous", "store", "common"],
}

# The static library each folder builds, as CMake names it.
LIBRARIES = {
    "ddprun_common": "common", "ddprun_version": "common", "ddprun_completion": "completion",
    "ddprun_store": "store", "ddprun_etcd": "store/etcd", "ddprun_rendezvous": "rendezvous",
    "ddprun_elastic": "elastic", "ddprun_cli": "cli", "ddprun_process": "launcher/process",
    "ddprun_backend": "launcher/backend", "ddprun_telemetry": "launcher/telemetry", "ddprun_launcher": "launcher",
    "ddprun_worker": "worker",
}

# The namespace of each folder's code: ddprun::<folder path with '/' as '::'>, common's is ddprun.
def folder_namespace(folder):
    return "ddprun" if folder == "common" else "ddprun::" + folder.replace("/", "::")


def folder_of(path):
    """The deepest folder of LAYERS that holds `path` (relative, '/'-separated), or None."""
    best = None
    for folder in LAYERS:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def allowed(folder, used):
    return used == folder or used in LAYERS[folder]


def uses_text(folder):
    return "; %s may use %s" % (folder, ", ".join(LAYERS[folder]) or "nothing else")


def check_includes(root, rel, text, problems):
    folder = folder_of(rel)
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not match:
            continue
        used = folder_of(match.group(1))
        if used is not None and not allowed(folder, used):
            problems.append('%s:%d: includes "%s" (%s)%s' % (
                rel, number, match.group(1), used, uses_text(folder)))


def check_namespaces(rel, text, problems):
    folder = folder_of(rel)
    expected = folder_namespace(folder)
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"\s*namespace\s+(ddprun(?:::\w+)*)\s*\{", line)
        if not match:
            continue
        name = match.group(1)
        # Another folder's namespace may be opened to forward-declare what this folder may use.
        declares_used = any(name == folder_namespace(used) for used in LAYERS[folder])
        if name != expected and not name.startswith(expected + "::") and not declares_used:
            problems.append("%s:%d: opens namespace %s; code in %s/ is in %s" % (
                rel, number, name, folder, expected))


def check_links(root, problems):
    for folder in LAYERS:
        cmake = root / folder / "CMakeLists.txt"
        if not cmake.exists():
            continue
        text = cmake.read_text()
        for call in re.finditer(r"target_link_libraries\(\s*(\S+)([^)]*)\)", text):
            target, arguments = call.group(1), call.group(2)
            if LIBRARIES.get(target) != folder:
                continue  # programs and tests of the folder are checked by their includes
            number = text.count("\n", 0, call.start()) + 1
            for library in re.findall(r"\bddprun_\w+\b", arguments):
                used = LIBRARIES.get(library)
                if used is not None and not allowed(folder, used):
                    problems.append("%s/CMakeLists.txt:%d: %s links %s (%s)%s" % (
                        folder, number, target, library, used, uses_text(folder)))


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    problems = []
    files = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".h", ".cc") or folder_of(rel) is None or "/package/" in rel:
            continue
        text = path.read_text(errors="replace")
        check_includes(root, rel, text, problems)
        check_namespaces(rel, text, problems)
        files += 1
    check_links(root, problems)
    for problem in problems:
        print(problem)
    if problems:
        print("check_layers: %d dependenc%s up the layers (scripts/check_layers.py, LAYERS)" % (
            len(problems), "y goes" if len(problems) == 1 else "ies go"), file=sys.stderr)
        return 1
    print("check_layers: %d files in %d folders, every include, link and namespace points down" % (
        files, len(LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
