"""Worker for the torch.distributed.launch lines of test_real_world_lines.py (those with
expect.local_rank_arg): usage local_rank_arg_worker.py --local_rank=N OUTDIR.

Reads its local rank as AzureML's samples and torch.distributed.launch's documentation do: an
argparse option --local_rank (with torch 2's spelling --local-rank), here required, so that a
launcher that does not pass it fails the run (argparse's error, exit 2). A value other than
LOCAL_RANK exits 4. Then it is report_env_worker.py: its record holds the arguments as given, so
the test sees where the flag was put and how it was spelled.
"""
import argparse
import os
import sys

import report_env_worker

LOCAL_RANK_MISMATCH_EXIT = 4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local-rank", "--local_rank", type=int, required=True)
    parser.add_argument("out_dir")
    args = parser.parse_args()
    if args.local_rank != int(os.environ["LOCAL_RANK"]):
        print("--local_rank=%d but LOCAL_RANK=%s" % (args.local_rank, os.environ["LOCAL_RANK"]),
              file=sys.stderr)
        return LOCAL_RANK_MISMATCH_EXIT
    return report_env_worker.main(args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
