#!/usr/bin/env bash
# The libFuzzer stage (make fuzz; docs/reliability.md). Usage:
#   scripts/run-fuzz.sh build BUILD_DIR   configure BUILD_DIR with clang and DDPRUN_FUZZ=ON, build
#                                         the fuzz_* programs
#   scripts/run-fuzz.sh run BUILD_DIR     replay every input of fuzz/regressions/<target>/, then
#                                         fuzz each target for FUZZ_SECONDS (default 60),
#                                         FUZZ_JOBS (default 2) at a time, from the seeds in
#                                         fuzz/corpus/<target>/
# New corpus entries, logs and crash reproducers go to FUZZ_WORK (default BUILD_DIR/fuzz-runs),
# never into the repository; the corpus found there is kept for the next run. Prints per target
# the executions and exec/s (libFuzzer's final stats), new crashes and failing regression
# inputs; exits 1 on any of either.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
build_dir="${2:-build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"
jobs="${FUZZ_JOBS:-2}"
work="${FUZZ_WORK:-$build_dir/fuzz-runs}"
targets=(store_protocol rdzv_state cli cli_values slurm_hostlist env_presets)

build() {
  CC="${FUZZ_CC:-clang}" CXX="${FUZZ_CXX:-clang++}" cmake -S . -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPRUN_FUZZ=ON -DCMAKE_UNITY_BUILD=ON  # as the sanitizer trees
  cmake --build "$build_dir" --target ddprun_fuzzers -j"$(nproc 2>/dev/null || echo 2)"
  echo "run-fuzz: build took $SECONDS s"
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Replays each regression input on its own; writes the ones that fail to $work/<target>/failed.
replay() {
  local target="$1" program="$2" out="$work/$1" input
  : >"$out/failed"
  [ -d "fuzz/regressions/$target" ] || return 0
  while IFS= read -r input; do
    if ! "$program" -timeout=10 "$input" >>"$out/replay.log" 2>&1; then
      echo "$input" >>"$out/failed"
    fi
  done < <(find "fuzz/regressions/$target" -type f | sort)
}

# One target: replay, then fuzz from the seed corpus; writes $work/<target>/result as
# "executions exec/s crashes failed-regressions".
fuzz_one() {
  local target="$1" program="$build_dir/fuzz/fuzz_$1" out="$work/$1"
  rm -rf "$out/artifacts" "$out/log" "$out/replay.log" "$out/failed" "$out/result"
  mkdir -p "$out/corpus" "$out/artifacts"
  replay "$target" "$program"
  local options=() status=0
  [ -f "fuzz/$target.dict" ] && options+=("-dict=fuzz/$target.dict")
  # The first folder receives the new corpus entries; the seeds are only read.
  "$program" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/" "${options[@]}" \
    "$out/corpus" "fuzz/corpus/$target" >"$out/log" 2>&1 || status=$?
  local execs rate crashes
  execs="$(awk '/^stat::number_of_executed_units:/ {print $2}' "$out/log" | tail -n 1)"
  rate="$(awk '/^stat::average_exec_per_sec:/ {print $2}' "$out/log" | tail -n 1)"
  crashes="$(find "$out/artifacts" -type f | wc -l)"
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # failed, no reproducer
  echo "${execs:--} ${rate:--} $crashes $(wc -l <"$out/failed")" >"$out/result"
}

run() {
  for target in "${targets[@]}"; do
    if [ ! -x "$build_dir/fuzz/fuzz_$target" ]; then
      echo "run-fuzz: $build_dir/fuzz/fuzz_$target is missing: run with 'build' first" >&2
      exit 1
    fi
  done
  mkdir -p "$work"
  echo "run-fuzz: ${#targets[@]} targets, $seconds s each, $jobs at a time; work in $work"
  local running=0
  for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
    fuzz_one "$target" &
    running=$((running + 1))
  done
  wait
  echo "run-fuzz: replay and fuzzing took $SECONDS s"
  report
}

report() {
  local failed=0 execs rate crashes regressions
  printf '%-16s %12s %8s %8s %12s\n' target executions exec/s crashes regressions
  for target in "${targets[@]}"; do
    read -r execs rate crashes regressions <"$work/$target/result"
    printf '%-16s %12s %8s %8s %12s\n' "$target" "$execs" "$rate" "$crashes" \
      "$regressions failed"
  done
  for target in "${targets[@]}"; do
    read -r execs rate crashes regressions <"$work/$target/result"
    if [ "$regressions" -gt 0 ]; then
      failed=1
      echo "---- $target: regression inputs that still fail (log $work/$target/replay.log):"
      sed 's/^/  /' "$work/$target/failed"
    fi
    if [ "$crashes" -gt 0 ]; then
      failed=1
      echo "---- $target: new crash; reproducer in $work/$target/artifacts/, log $work/$target/log:"
      # From the first report line (sanitizer, broken invariant, uncaught exception, libFuzzer).
      awk '/^==[0-9]+==|runtime error|^fuzz: |^terminate called|^ERROR: libFuzzer/ {on = 1}
           on && !/^(#[0-9]|MS:|base unit:|0x)/' "$work/$target/log" | head -n 60
    fi
  done
  if [ "$failed" -ne 0 ]; then
    echo "run-fuzz: FAILED: fix each bug and keep its input in fuzz/regressions/<target>/" >&2
    exit 1
  fi
  echo "run-fuzz: no crashes"
}

case "$mode" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run [BUILD_DIR]" >&2; exit 2 ;;
esac
