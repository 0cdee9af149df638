"""Writes this worker's whole environment to <outdir>/env_<RANK>.json (used by interop tests).

Stdlib only, so it runs under any interpreter; usage: dump_env.py OUTDIR [extra args...].
Extra args are recorded too (key "__argv__") so that argument handling can be compared.
"""
import json
import os
import sys


def main():
    out_dir = sys.argv[1]
    env = dict(os.environ)
    record = {"env": env, "argv": sys.argv[1:]}
    rank = env.get("RANK", "norank")
    tmp = os.path.join(out_dir, "env_%s.json.tmp" % rank)
    with open(tmp, "w") as f:
        json.dump(record, f, sort_keys=True, indent=1)
    os.replace(tmp, os.path.join(out_dir, "env_%s.json" % rank))


if __name__ == "__main__":
    main()
