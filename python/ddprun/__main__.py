"""`python -m ddprun ARGS`: runs the installed ddprun program with ARGS (it replaces this process)."""
import os
import sys

from ddprun import program_path


def main():
    try:
        program = program_path("ddprun")
    except FileNotFoundError as error:
        print(f"python -m ddprun: {error}", file=sys.stderr)
        return 127
    os.execv(program, [program] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
