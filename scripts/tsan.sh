#!/usr/bin/env bash
# Runs the actor-heavy test suites under ThreadSanitizer (docs/testing.md,
# "Sanitizers"): builds them with -DMIBYAN_SANITIZE=thread (g++) into
# $TSAN_BUILD_DIR (default build-tsan) and runs each with the suppression
# list scripts/tsan.supp, which covers only the uninstrumented CAF library
# (Debian's build is not compiled with -fsanitize=thread).
#
#   bash scripts/tsan.sh [SUITE ...]      default: the list below
#
# Environment:
#   JOBS                 build parallelism (default: nproc)
#   TSAN_BUILD_DIR       build directory (default build-tsan)
#   TSAN_SUPPRESSIONS    suppression file (default scripts/tsan.supp);
#                        "none" runs without any, to see the raw reports
#   TSAN_SUITE_TIMEOUT   seconds one suite may run (default 1800)
#
# Reports go to $BUILD/tsan-logs/<suite>.<pid> (TSan's log_path), so those
# of child processes (serve_test runs the TSan-built `mibyan` binary) are
# counted too; a suite's own output is in $BUILD/tsan-logs/<suite>.out.
# Ends with a summary table. Exit status: 0 when every suite passed with no
# report left after suppression; 1 when there is a report (each one is in
# our code or in a frame the suppression list does not cover) or a suite
# failed or timed out.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
BUILD="${TSAN_BUILD_DIR:-build-tsan}"
JOBS="${JOBS:-$(nproc)}"
SUPP="${TSAN_SUPPRESSIONS:-$PWD/scripts/tsan.supp}"
SUITE_TIMEOUT="${TSAN_SUITE_TIMEOUT:-1800}"
SUITES=("$@")
if [ ${#SUITES[@]} -eq 0 ]; then
  # Actors and the runtime; kernels, the RPC bridge and execute_code; the
  # threads of our own (blocking pool, curl-multi, subprocess and MCP
  # readers); the HTTP server and the cluster (BASP, TLS).
  SUITES=(blocking_pool_test runtime_test embedding_test provider_actor_test
          session_writer_test agent_loop_test agent_loop_limits_test
          agent_delegate_test
          agent_session_e2e_test kernel_stop_test rpc_limits_test
          bridge_fast_path_test execute_code_test interpreter_cache_test
          process_tool_test subprocess_test terminal_test http_client_test
          mcp_stdio_test mcp_agent_test serve_test cluster_test)
fi
bash scripts/install-deps.sh >/dev/null
bash scripts/install-test-deps.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMIBYAN_SANITIZE=thread -DMIBYAN_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target mibyan "${SUITES[@]}"
build_s=$((SECONDS - start))

# TSan maps its shadow memory at fixed addresses; with a high mmap
# randomisation (vm.mmap_rnd_bits > 28 on newer kernels) GCC 12's runtime
# aborts with "unexpected memory mapping". setarch -R turns address
# randomisation off for the suite and its children; where setarch is missing
# or the personality call is refused (some containers) the suites run
# without it.
setarch_cmd=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  setarch_cmd=(setarch "$(uname -m)" -R)
fi
timeout_cmd=()
if command -v timeout >/dev/null 2>&1; then
  timeout_cmd=(timeout -k 30 "$SUITE_TIMEOUT")
fi

logs="$BUILD/tsan-logs"
rm -rf "$logs"
mkdir -p "$logs"
logs="$(cd "$logs" && pwd)"
opts="halt_on_error=0:exitcode=66:second_deadlock_stack=1:report_signal_unsafe=0"
opts="$opts:history_size=4:print_suppressions=1"
[ "$SUPP" != none ] && opts="suppressions=$SUPP:$opts"

reports=0 failed=0
rows=()
for s in "${SUITES[@]}"; do
  t0=$SECONDS
  status=0
  (cd "$BUILD/tests" &&
   TSAN_OPTIONS="$opts:log_path=$logs/$s" \
     "${timeout_cmd[@]}" "${setarch_cmd[@]}" "./$s" >"$logs/$s.out" 2>&1) || status=$?
  secs=$((SECONDS - t0))
  n=0 used=0
  for f in "$logs/$s".[0-9]*; do
    [ -e "$f" ] || continue
    n=$((n + $(grep -c '^WARNING: ThreadSanitizer' "$f" || true)))
    # "ThreadSanitizer: Matched K suppressions" is followed by one
    # "<hits> <type>:<pattern>" line per suppression that matched.
    used=$((used + $(awk '/^ThreadSanitizer: Matched/ {m = 1; next}
                          m && /^[0-9]+ [a-z_]+:/ {s += $1; next} {m = 0}
                          END {print s + 0}' "$f")))
  done
  reports=$((reports + n))
  # TSan turns the exit status of a process with reports into 66, also
  # when a test failed: Boost.Test's own summary tells those apart.
  verdict=ok
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    verdict="TIMEOUT"; failed=$((failed + 1))
  elif { [ "$status" -ne 0 ] && [ "$status" -ne 66 ]; } ||
       grep -Eq '\*\*\* [0-9]+ failures? (is|are) detected' "$logs/$s.out"; then
    verdict="FAILED"; failed=$((failed + 1))
  elif [ "$n" -gt 0 ]; then
    verdict="REPORTS"
  fi
  rows+=("$(printf '%-24s %-8s exit %-4s reports %-4s suppressed %-6s %5ss' \
            "$s" "$verdict" "$status" "$n" "$used" "$secs")")
  echo "${rows[-1]}"
  if [ "$n" -gt 0 ]; then
    for f in "$logs/$s".[0-9]*; do
      grep -q '^WARNING: ThreadSanitizer' "$f" 2>/dev/null || continue
      echo "--- $f"
      grep -B1 -A40 '^WARNING: ThreadSanitizer' "$f" | head -200 || true
    done
  fi
  if [ "$verdict" = FAILED ] || [ "$verdict" = TIMEOUT ]; then
    tail -20 "$logs/$s.out"
  fi
done

echo
echo "== ThreadSanitizer summary (suppressions: $SUPP)"
printf '%s\n' "${rows[@]}"
echo "suites: ${#SUITES[@]}, failed or timed out: $failed, reports: $reports," \
     "build ${build_s}s, total $((SECONDS - start))s; logs in $logs"
if [ "$reports" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "tsan: PASS"
  exit 0
fi
echo "tsan: FAIL"
exit 1
