"""What the drift test (test_docs_drift.py) and the package test (tests/package) share: the
installed programs, the options their --help lists, man page text, and driving a bash completion
script the way bash does (stdlib only).

- help_options(program) -> {"": [names], "<subcommand>": [names], ...}: every spelling in the
  first column of the option lines of `program --help` (CLI11's layout, which ddprun's own help
  uses too) and, for each subcommand listed, of `program <subcommand> --help`.
- man_text(path): a built man page (.1 or .1.gz) as plain text (roff fonts and escapes removed).
- bash_complete(script, program, lines): COMPREPLY for each command line, cursor at its end.
"""
import gzip
import os
import re
import subprocess

PROGRAMS = {  # installed program -> its path in the build tree
    "ddprun": os.path.join("launcher", "ddprun"),
    "ddprun-store": os.path.join("tools", "ddprun-store"),
    "ddprun-allreduce-check": os.path.join("worker", "ddprun-allreduce-check"),
    "ddprun-allreduce-perf": os.path.join("worker", "ddprun-allreduce-perf"),
}

_OPTION_NAME = re.compile(r"^--?[A-Za-z0-9][\w-]*$")


def _run_help(argv):
    result = subprocess.run(argv + ["--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=30)
    if result.returncode != 0:
        raise AssertionError("%s --help exited %d: %s" % (" ".join(argv), result.returncode,
                                                          result.stderr))
    return result.stdout


def _parse_help(text):
    """(option names, subcommand names) of one --help text."""
    names, subcommands, section = [], [], ""
    for line in text.splitlines():
        if line and not line[0].isspace():
            section = line[:-1] if line.endswith(":") else ""
            continue
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if not stripped or indent > 2:
            continue
        if section == "Subcommands":
            subcommands.append(stripped.split()[0])
        elif section != "Positionals" and stripped.startswith("-"):
            for name in stripped.split()[0].split(","):
                if _OPTION_NAME.match(name) and name not in names:
                    names.append(name)
    return names, subcommands


def help_options(program):
    names, subcommands = _parse_help(_run_help([program]))
    options = {"": names}
    for sub in subcommands:
        options[sub] = _parse_help(_run_help([program, sub]))[0]
    return options


def man_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        roff = f.read()
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\%", "", roff)
    text = text.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")
    return text


def mentions(text, word):
    """True when `word` (an option or command name) appears in `text` on its own."""
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


_BASH_DRIVER = r'''
__drive() {  # $1: the completion function; then one command line per argument
  local fn="$1" line; shift
  for line in "$@"; do
    COMP_LINE="$line"; COMP_POINT=${#line}
    read -ra COMP_WORDS <<< "$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    "$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\x1f' "${COMPREPLY[@]}"
    printf '\x1e'
  done
}
'''


def bash_complete(program, lines, script=None, loader=False):
    """COMPREPLY (a list) for each line. The completion is `script` sourced, or with
    loader=True the one bash-completion loads for `program` from its directories."""
    if loader:
        setup = ("source /usr/share/bash-completion/bash_completion\n"
                 "__load_completion %s || exit 3\n" % program)
    else:
        setup = "source '%s'\n" % script
    body = (setup + _BASH_DRIVER +
            "fn=$(complete -p %s | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')\n" % program +
            '[[ -n $fn ]] || exit 4\n__drive "$fn" "$@"\n')
    result = subprocess.run(["bash", "-c", body, "bash"] + list(lines), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError("bash completion of %s failed (%d): %s" % (program, result.returncode,
                                                                       result.stderr))
    records = result.stdout.split("\x1e")[:-1]
    return [[word for word in record.split("\x1f") if word] for record in records]


def fish_complete(program, lines, script=None):
    """fish's candidates (first column of `complete -C`) for each line."""
    setup = "source '%s'\n" % script if script else ""
    body = setup + "for line in $argv\n  complete -C $line\n  echo \\x1e\nend\n"
    result = subprocess.run(["fish", "--no-config", "-c", body] + list(lines),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError("fish completion of %s failed: %s" % (program, result.stderr))
    records = result.stdout.split("\x1e\n")[:-1]
    return [[entry.split("\t")[0] for entry in record.splitlines() if entry] for record in records]
