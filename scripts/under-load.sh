#!/usr/bin/env bash
# Runs a command RUNS times in a row beside a CPU burner (one busy process per core), the page
# cache dropped before each run (root only; skipped otherwise), and prints one line per run and
# a table row: how docs/reliability.md's "No test fails by chance" figures are taken.
#   scripts/under-load.sh RUNS COMMAND [ARGS...]
# Exit status: 0 when every run passed, else 1. The burners are killed on any exit.
set -uo pipefail
runs="${1:?usage: under-load.sh RUNS COMMAND [ARGS...]}"
shift
[ "$#" -gt 0 ] || { echo "under-load.sh: no command given" >&2; exit 2; }
burners=()
trap 'kill "${burners[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq "$(nproc)"); do
  python3 -c 'while True: pass' &
  burners+=("$!")
done
passed=0
for run in $(seq "$runs"); do
  if [ "$(id -u)" -eq 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  start=$SECONDS
  if "$@"; then status=pass; passed=$((passed + 1)); else status=FAIL; fi
  echo "under-load: run $run of $runs: $status in $((SECONDS - start)) s"
done
echo "under-load: $passed of $runs runs passed beside $(nproc) busy processes: $*"
[ "$passed" -eq "$runs" ]
