#!/usr/bin/env bash
# Runs the actor-heavy test suites under ThreadSanitizer (docs/testing.md,
# "Sanitizers"): builds them with -DMIBYAN_SANITIZE=thread (g++) into
# $TSAN_BUILD_DIR (default build-tsan) and runs each with the suppression
# list scripts/tsan.supp, which covers the CAF library (Debian's build is
# not instrumented). Prints every report and exits 1 when there is any.
#
#   bash scripts/tsan.sh [SUITE ...]      default: the list below
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${TSAN_BUILD_DIR:-build-tsan}"
JOBS="${JOBS:-$(nproc)}"
SUITES=("$@")
if [ ${#SUITES[@]} -eq 0 ]; then
  SUITES=(runtime_test embedding_test provider_actor_test session_writer_test
          agent_loop_test kernel_stop_test rpc_limits_test serve_test)
fi
bash scripts/install-deps.sh >/dev/null
bash scripts/install-test-deps.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMIBYAN_SANITIZE=thread -DMIBYAN_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target mibyan "${SUITES[@]}"
# TSan needs a fixed address layout; without it some kernels refuse.
setarch_cmd=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  setarch_cmd=(setarch "$(uname -m)" -R)
fi
export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp:halt_on_error=0:second_deadlock_stack=1:report_signal_unsafe=0:history_size=4"
reports=0
for s in "${SUITES[@]}"; do
  log="$BUILD/$s.tsan.log"
  status=0
  (cd "$BUILD/tests" && "${setarch_cmd[@]}" "./$s" >"$PWD/../$s.tsan.log" 2>&1) || status=$?
  n="$(grep -c '^WARNING: ThreadSanitizer' "$log" || true)"
  reports=$((reports + n))
  printf '%-24s exit %-3s reports %s\n' "$s" "$status" "$n"
  if [ "$n" -gt 0 ] || [ "$status" -ne 0 ]; then
    grep -A30 '^WARNING: ThreadSanitizer' "$log" | head -120 || true
    [ "$status" -ne 0 ] && tail -20 "$log"
  fi
done
echo "tsan: $reports report(s)"
[ "$reports" -eq 0 ]
