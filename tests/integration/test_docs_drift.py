"""Drift between each installed program's --help and its man page and completion scripts.

Every option (every spelling) that `<program> --help` lists, and for ddprun-store every
subcommand and every option of each subcommand's --help, must appear in the built man page
(build/man/<program>.1.gz) and be offered by the program's bash, zsh and fish completion
(build/completion/scripts/). A new option without documentation fails `make check` here.
ddprun-launch (the link to ddprun, torch.distributed.launch's personality) has completion
scripts of its own, for its own name, checked the same way against `ddprun-launch --help`; its
man page is ddprun's.
bash and fish are driven for real (the scripts as the shells load them); the zsh script is
checked by `zsh -n` and for a spec of every option. The values of enumerated options, argparse
prefixes, and "no more options after the training script" are checked on ddprun's scripts.
"""
import os
import shutil
import subprocess
import unittest

import docs_lib
from ddprun_testlib import BUILD_DIR

SCRIPTS = os.path.join(BUILD_DIR, "completion", "scripts")
# The programs with completion scripts: every installed program, and the ddprun-launch link.
COMPLETED = dict(docs_lib.PROGRAMS,
                 **{"ddprun-launch": os.path.join("launcher", "ddprun-launch")})


def built(program):
    path = os.path.join(BUILD_DIR, COMPLETED[program])
    if not os.path.exists(path):
        raise unittest.SkipTest("%s is not built (no gloo?)" % path)
    return path


def script(shell, program):
    name = {"bash": program, "zsh": "_" + program, "fish": program + ".fish"}[shell]
    path = os.path.join(SCRIPTS, shell, name)
    if not os.path.exists(path):
        raise AssertionError("%s is missing: the build makes it (completion/scripts/)" % path)
    return path


def option_lines(program, options):
    """One command line per (subcommand, option name), the option being completed."""
    return [" ".join(filter(None, [program, sub, name])) for sub, names in options.items()
            for name in names]


class ManPages(unittest.TestCase):
    def check_page(self, program):
        page = os.path.join(BUILD_DIR, "man", program + ".1.gz")
        self.assertTrue(os.path.exists(page), "%s is missing: is scdoc installed (make deps)?"
                        % page)
        text = docs_lib.man_text(page)
        options = docs_lib.help_options(built(program))
        missing = list(dict.fromkeys(name for names in options.values() for name in names
                                     if not docs_lib.mentions(text, name)))
        missing += [sub for sub in options if sub and not docs_lib.mentions(text, sub)]
        self.assertEqual(missing, [], "in %s --help but not in man/%s.1.scd" % (program, program))
        for section in ("SYNOPSIS", "OPTIONS", "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
            self.assertIn(".SH %s" % section, text, program)

    def test_ddprun(self):
        self.check_page("ddprun")
        text = docs_lib.man_text(os.path.join(BUILD_DIR, "man", "ddprun.1.gz"))
        for section in ("ENVIRONMENT", "DIFFERENCES FROM TORCHRUN"):
            self.assertIn(".SH %s" % section, text)

    def test_ddprun_store(self):
        self.check_page("ddprun-store")

    def test_ddprun_allreduce_check(self):
        self.check_page("ddprun-allreduce-check")

    def test_ddprun_allreduce_perf(self):
        self.check_page("ddprun-allreduce-perf")


class BashCompletion(unittest.TestCase):
    def check_offers_every_option(self, program):
        options = docs_lib.help_options(built(program))
        lines = option_lines(program, options)
        replies = docs_lib.bash_complete(program, lines, script=script("bash", program))
        missing = [line for line, reply in zip(lines, replies) if line.split()[-1] not in reply]
        self.assertEqual(missing, [], "bash completion does not offer these")
        subs = [sub for sub in options if sub]
        if subs:
            self.assertEqual(sorted(docs_lib.bash_complete(
                program, [program + " "], script=script("bash", program))[0]), sorted(subs))

    def test_every_program(self):
        for program in COMPLETED:
            with self.subTest(program=program):
                self.check_offers_every_option(program)

    def test_ddprun_values_prefixes_and_script(self):
        cases = {
            "ddprun --nnod": ["--nnodes"],
            "ddprun --rdzv-backend ": ["static", "c10d", "etcd", "etcd-v2"],
            "ddprun --rdzv_backend=c": ["c10d"],
            "ddprun --rdzv_backend=e": ["etcd", "etcd-v2"],
            "ddprun --rdzv-back s": ["static"],  # an argparse prefix takes its value too
            "ddprun --nproc-per-node ": ["auto", "cpu", "gpu"],
            "ddprun -t ": ["0", "1", "2", "3"],
            "ddprun --env-preset s": ["skypilot", "slurm"],
            "ddprun --print-completion ": ["bash", "zsh", "fish"],
            "ddprun --start-method f": ["fork", "forkserver"],
            "ddprun --standalone train_does_not_exist.py --nn": [],  # the script's own args
            "ddprun --nproc-per-node 2 --": sorted(set(
                name for name in docs_lib.help_options(built("ddprun"))[""]
                if name.startswith("--"))),
        }
        replies = docs_lib.bash_complete("ddprun", list(cases), script=script("bash", "ddprun"))
        for (line, expected), reply in zip(cases.items(), replies):
            self.assertEqual(sorted(reply), sorted(expected), line)

    def test_ddprun_launch(self):
        # The prefix ddprun-launch's users type (argparse's), and a value: its own script, for its
        # own name (a script registered for ddprun only would make bash_complete exit 4).
        cases = {
            "ddprun-launch --nproc": ["--nproc-per-node", "--nproc_per_node"],
            "ddprun-launch --rdzv-backend ": ["static", "c10d", "etcd", "etcd-v2"],
            "ddprun-launch --use": ["--use-env", "--use_env"],
            "ddprun-launch train_does_not_exist.py --nn": [],
        }
        replies = docs_lib.bash_complete("ddprun-launch", list(cases),
                                         script=script("bash", "ddprun-launch"))
        for (line, expected), reply in zip(cases.items(), replies):
            self.assertEqual(sorted(reply), sorted(expected), line)

    def test_companion_values(self):
        perf = docs_lib.bash_complete("ddprun-allreduce-perf",
                                      ["ddprun-allreduce-perf -d ",
                                       "ddprun-allreduce-perf --backend=n"],
                                      script=script("bash", "ddprun-allreduce-perf"))
        self.assertEqual(sorted(perf[0]), ["double", "float", "int32", "int64"])
        self.assertEqual(perf[1], ["nccl"])
        store = docs_lib.bash_complete("ddprun-store", ["ddprun-store rdzv --rdzv", "ddprun-store q"],
                                       script=script("bash", "ddprun-store"))
        self.assertEqual(sorted(store[0]), ["--rdzv-endpoint", "--rdzv-id", "--rdzv_endpoint",
                                            "--rdzv_id"])
        self.assertEqual(sorted(store[1]), ["queue-len", "queue-pop", "queue-push"])


class ZshCompletion(unittest.TestCase):
    def setUp(self):
        if shutil.which("zsh") is None:
            self.skipTest("zsh is not installed (make deps installs it)")

    def test_every_program(self):
        for program in COMPLETED:
            with self.subTest(program=program):
                path = script("zsh", program)
                result = subprocess.run(["zsh", "-n", path], stderr=subprocess.PIPE, text=True)
                self.assertEqual(result.returncode, 0, result.stderr)
                with open(path) as f:
                    text = f.read()
                self.assertTrue(text.startswith("#compdef %s\n" % program))
                options = docs_lib.help_options(built(program))
                missing = [name for names in options.values() for name in names
                           if not docs_lib.mentions(text, name)]
                missing += [sub for sub in options if sub and not docs_lib.mentions(text, sub)]
                self.assertEqual(missing, [], "not in the zsh completion of " + program)


class FishCompletion(unittest.TestCase):
    def setUp(self):
        if shutil.which("fish") is None:
            self.skipTest("fish is not installed (make deps installs it)")

    def test_every_program(self):
        for program in COMPLETED:
            with self.subTest(program=program):
                options = docs_lib.help_options(built(program))
                lines = [line for line in option_lines(program, options)
                         if line.split()[-1].startswith("--")]
                replies = docs_lib.fish_complete(program, lines, script=script("fish", program))
                missing = [line for line, reply in zip(lines, replies)
                           if line.split()[-1] not in reply]
                self.assertEqual(missing, [], "fish completion does not offer these")

    def test_ddprun_values_and_script(self):
        cases = {
            "ddprun --rdzv-backend ": ["c10d", "etcd", "etcd-v2", "static"],
            "ddprun --rdzv-backend=": ["--rdzv-backend=c10d", "--rdzv-backend=etcd",
                                       "--rdzv-backend=etcd-v2", "--rdzv-backend=static"],
            "ddprun --standalone x.py --nnod": [],
        }
        replies = docs_lib.fish_complete("ddprun", list(cases), script=script("fish", "ddprun"))
        for (line, expected), reply in zip(cases.items(), replies):
            self.assertEqual(sorted(reply), expected, line)


if __name__ == "__main__":
    unittest.main()
