#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) into
# $FUZZ_BUILD_DIR (default build-fuzz) and runs each for SECONDS (default
# 60), one after another (docs/testing.md, "Fuzzing").
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET_REGEX]
#
# Each target first replays its regression inputs (fuzz/regressions/<t>/),
# then fuzzes from its seeds (fuzz/corpus/<t>/) and a working corpus in the
# build directory that grows across runs. A crash input is kept as
# $FUZZ_BUILD_DIR/crashes/<t>-crash-<sha1>. Exit 0 only if no target found
# anything.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
FILTER="${2:-.}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
JOBS="${JOBS:-$(nproc)}"

bash scripts/install-deps.sh >/dev/null
bash scripts/install-fuzz-deps.sh
CXX=clang++ cmake -S fuzz -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS" >"$BUILD/build.log" 2>&1 || { tail -50 "$BUILD/build.log"; exit 1; }

mkdir -p "$BUILD/crashes" "$BUILD/work"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
printf '%-26s %10s %8s %6s  %s\n' target execs cov ft result
for bin in "$BUILD"/*_fuzz; do
  t="$(basename "$bin")"
  [[ "$t" =~ $FILTER ]] || continue
  seeds="fuzz/corpus/$t"
  work="$BUILD/work/$t"
  mkdir -p "$work"
  log="$BUILD/$t.log"
  result=ok
  # Regression inputs: each must run clean.
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    if ! "$bin" fuzz/regressions/"$t"/* >"$log.regressions" 2>&1; then
      result="REGRESSION"
    fi
  fi
  if [ "$result" = ok ]; then
    if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
         -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
         -artifact_prefix="$BUILD/crashes/$t-" "$work" \
         $( [ -d "$seeds" ] && echo "$seeds" ) >"$log" 2>&1; then
      result="CRASH"
    fi
  fi
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' || true)"
  cov="$(grep -o 'cov: [0-9]*' "$log" 2>/dev/null | tail -1 | grep -o '[0-9]*' || true)"
  ft="$(grep -o 'ft: [0-9]*' "$log" 2>/dev/null | tail -1 | grep -o '[0-9]*' || true)"
  printf '%-26s %10s %8s %6s  %s\n' "$t" "${execs:--}" "${cov:--}" "${ft:--}" "$result"
  if [ "$result" != ok ]; then
    failed+=("$t")
    tail -40 "$log"* | sed 's/^/    /'
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $BUILD/crashes/)"
  exit 1
fi
echo "fuzz: no findings"
