"""The same command line under torchrun and ddprun: every worker's environment (and argv) must be
equal, variable by variable and rank by rank, except values random by nature and the explicit
table of known torchrun version differences below. Exit 77 (skipped) without torch.
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ddprun_testlib as lib  # noqa: E402

lib.exit_if_no_torch()

DUMP_ENV = os.path.join(lib.INTEROP_DIR, "dump_env.py")
NPROC = 3
TIMEOUT = 120

# Random by nature: checked for form, not compared.
RANDOM = {
    "MASTER_PORT",                # a free port chosen at run time
    "TORCHELASTIC_ERROR_FILE",    # <temp log dir>/<run_id>_<random>/attempt_0/<r>/error.json:
                                  # only the "attempt_0/<r>/error.json" tail is compared
}
RANDOM_STANDALONE = {"TORCHELASTIC_RUN_ID"}  # uuid4 per job with --standalone

# Known differences between Debian's torchrun 1.13 (the reference available here) and current
# torchrun, which ddprun follows. name -> (value under torchrun 1.13, value under ddprun);
# None = the variable is absent. Verified by running torchrun 1.13 on this machine.
KNOWN_DIFFERENCES_1_13 = {
    # Renamed in the PyTorch 2.2 era; current torchrun exports only the TORCH_ name.
    "NCCL_ASYNC_ERROR_HANDLING": ("1", None),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": (None, "1"),
    # 1.13: only the static backend let workers use the agent's store; for c10d/standalone the
    # rank-0 worker hosted it ("False"). Since 2.4 the c10d agent hosts a store for the workers
    # ("True"), which ddprun serves itself.
    "TORCHELASTIC_USE_AGENT_STORE": ("False", "True"),
    # Exported by torchrun since PR #160690 (Aug 2025, --signals-to-handle); absent in 1.13.
    "TORCHELASTIC_SIGNALS_TO_HANDLE": (None, "SIGTERM,SIGINT,SIGHUP,SIGQUIT"),
}


def _nccl_dump_prefix(env):
    """<attempt dir>/<local rank>/nccl_trace_rank_: next to the worker's error file."""
    return os.path.join(os.path.dirname(env.get("TORCHELASTIC_ERROR_FILE", "")),
                        "nccl_trace_rank_")


# ddprun-only: set by ddprun (unless the user set them), never by torchrun, whatever its version.
# name -> (value under ddprun, or a function of the ddprun worker's environment giving it; reason).
DDPRUN_ONLY = {
    "PYTHONFAULTHANDLER": ("1", "every thread's stack on SIGABRT/a crash, for the failure "
                                "summary and hang reports (issue 24)"),
    # The flight recorder's current names only: current PyTorch warns in every worker that the
    # older TORCH_NCCL_ names are deprecated.
    "TORCH_FR_BUFFER_SIZE": ("2000", "NCCL flight recorder on, so a collective hang leaves a "
                                     "trace (issue 24)"),
    "TORCH_FR_DUMP_ON_TIMEOUT": ("1", "the flight recorder dumps when a collective times out"),
    "TORCH_FR_DUMP_TEMP_FILE": (_nccl_dump_prefix, "the dumps go into the worker's log folder, "
                                                   "next to error.json"),
    # DDPRUN_PULSE_FILE (--hang_timeout) and TORCHELASTIC_TIMER_FILE (file timer on) are not set
    # by the command lines below.
}

# Not differences, for the record: LC_CTYPE=C.UTF-8 appears in a Python worker's os.environ under
# both launchers when the launcher's environment has no usable locale (Python's PEP 538 locale
# coercion runs in torchrun itself and again in the worker interpreter), so it compares equal;
# test_no_locale_env checks that. MASTER_ADDR is socket.getfqdn() of the rank-0 agent in 1.13
# and in current torchrun ("localhost" on a host whose name resolves to 127.0.0.1).


def torch_version():
    out = subprocess.run([lib.SYSTEM_PYTHON, "-c", "import torch; print(torch.__version__)"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=120)
    return out.stdout.strip()


class EnvVsTorchrunTest(lib.DdprunTestCase):

    require_binaries = (lib.DDPRUN,)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not lib.torchrun_available():
            raise unittest.SkipTest("%s not installed" % lib.TORCHRUN)
        version = torch_version()
        cls.known = KNOWN_DIFFERENCES_1_13 if version.startswith("1.13") else {}

    def launch(self, launcher, flags, out_dir, env):
        os.makedirs(out_dir)
        args = launcher + list(flags) + [DUMP_ENV, out_dir, "x${local_rank}y", "a$$b", "${rank}",
                                         "--nnodes", "7"]
        result = self.run_launcher(args, env=env, timeout=TIMEOUT)
        self.assertExit(result, 0)
        records = []
        for rank in range(NPROC):
            path = os.path.join(out_dir, "env_%d.json" % rank)
            self.assertTrue(os.path.exists(path), "rank %d wrote nothing\n%s" % (
                rank, result.describe()))
            records.append(lib.read_json(path))
        return records

    def run_both(self, flags_for, env):
        """flags_for(launcher_name) -> launcher flags; returns (torchrun records, ddprun records).

        DDPRUN_PYTHON names Debian's interpreter (torchrun uses it as sys.executable); it is set
        for both launchers, so it is inherited identically."""
        env = dict(env, DDPRUN_PYTHON=lib.SYSTEM_PYTHON)
        ref = self.launch(lib.torchrun_prefix(), flags_for("torchrun"), self.path("torchrun"), env)
        ours = self.launch([lib.DDPRUN], flags_for("ddprun"), self.path("ddprun"), env)
        return ref, ours

    def compare(self, ref, ours, random_keys):
        problems = []
        for rank, (r, o) in enumerate(zip(ref, ours)):
            if r["argv"][1:] != o["argv"][1:]:  # argv[0] is each run's own output dir
                problems.append("rank %d argv: torchrun %r, ddprun %r" % (rank, r["argv"],
                                                                           o["argv"]))
            renv, oenv = r["env"], o["env"]
            for key in sorted(set(renv) | set(oenv) | set(self.known) | set(DDPRUN_ONLY)):
                rv, ov = renv.get(key), oenv.get(key)
                if key in DDPRUN_ONLY:
                    want = DDPRUN_ONLY[key][0]
                    want = want(oenv) if callable(want) else want
                    if rv is not None or ov != want:
                        problems.append("rank %d %s: torchrun %r ddprun %r, want absent / %r" % (
                            rank, key, rv, ov, want))
                    continue
                if key in self.known:
                    want_r, want_o = self.known[key]
                    if (rv, ov) != (want_r, want_o):
                        problems.append("rank %d %s: torchrun %r ddprun %r, table says %r / %r" % (
                            rank, key, rv, ov, want_r, want_o))
                    continue
                if key in random_keys:
                    problem = self.check_random(key, rv, ov, rank, renv, oenv)
                    if problem:
                        problems.append("rank %d %s" % (rank, problem))
                    continue
                if rv != ov:
                    problems.append("rank %d %s: torchrun %s, ddprun %s" % (
                        rank, key, "absent" if rv is None else repr(rv),
                        "absent" if ov is None else repr(ov)))
        self.assertEqual(problems, [], "environment differences:\n  " + "\n  ".join(problems))

    @staticmethod
    def check_random(key, rv, ov, rank, renv, oenv):
        if rv is None or ov is None:
            return "%s: torchrun %r, ddprun %r (one is missing)" % (key, rv, ov)
        if key == "MASTER_PORT":
            if not (ov.isdigit() and 0 < int(ov) < 65536):
                return "MASTER_PORT: ddprun %r is not a port" % ov
        elif key == "TORCHELASTIC_RUN_ID":
            pattern = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
            if not (re.match(pattern, rv) and re.match(pattern, ov)):
                return "TORCHELASTIC_RUN_ID: torchrun %r, ddprun %r (not uuids)" % (rv, ov)
        elif key == "TORCHELASTIC_ERROR_FILE":
            tail = "attempt_0/%d/error.json" % rank
            for name, value, env in (("torchrun", rv, renv), ("ddprun", ov, oenv)):
                parts = value.split("/")
                if "/".join(parts[-3:]) != tail or not os.path.isabs(value):
                    return "error file: %s %r does not end in %s" % (name, value, tail)
                if not parts[-4].startswith(env["TORCHELASTIC_RUN_ID"] + "_"):
                    return "error file: %s %r: run dir is not <run_id>_*" % (name, value)
        return None

    def test_c10d_rendezvous(self):
        def flags(_):
            return lib.TORCHRUN_COMPAT_FLAGS + [
                "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:%d" % lib.free_port(),
                "--rdzv_id=envcmp", "--nnodes=1", "--nproc_per_node=%d" % NPROC]
        ref, ours = self.run_both(flags, self.env())
        self.compare(ref, ours, RANDOM)

    def test_c10d_with_role_restarts_and_parent_values(self):
        def flags(_):
            return lib.TORCHRUN_COMPAT_FLAGS + [
                "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:%d" % lib.free_port(),
                "--rdzv_id=envcmp2", "--nnodes=1:1", "--nproc_per_node=%d" % NPROC,  # 1.13 has no dashed forms
                "--role", "trainer", "--max_restarts=3"]
        env = self.env({"OMP_NUM_THREADS": "5", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
                        "NCCL_ASYNC_ERROR_HANDLING": "0", "CUSTOM_VAR": "kept"})
        ref, ours = self.run_both(flags, env)
        # With parent values set, the renamed NCCL variables are inherited identically.
        saved = self.known
        self.known = {k: v for k, v in saved.items() if "NCCL" not in k}
        try:
            self.compare(ref, ours, RANDOM)
        finally:
            self.known = saved

    def test_standalone(self):
        # torchrun 1.13's --standalone always hosts its store on localhost:29400: serialise the
        # runs that use that port and skip when something else holds it.
        with lib.PortLock(29400):
            if not lib.port_is_free(29400):
                self.skipTest("port 29400 (torchrun 1.13 --standalone) is in use")
            ref, ours = self.run_both(
                lambda _: lib.TORCHRUN_COMPAT_FLAGS + ["--standalone",
                                                       "--nproc_per_node=%d" % NPROC],
                self.env())
        self.compare(ref, ours, RANDOM | RANDOM_STANDALONE)

    def test_no_locale_env(self):
        env = self.env(drop=[k for k in os.environ if k.startswith("LC_") or k in ("LANG",
                                                                                  "LANGUAGE")])
        ref, ours = self.run_both(
            lambda _: lib.TORCHRUN_COMPAT_FLAGS + [
                "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:%d" % lib.free_port(),
                "--rdzv_id=envcmp3", "--nnodes=1", "--nproc_per_node=%d" % NPROC], env)
        self.compare(ref, ours, RANDOM)


if __name__ == "__main__":
    unittest.main()
