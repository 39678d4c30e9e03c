#!/usr/bin/env bash
# Regenerates the dashboard screenshots that docs/dashboard.md shows: runs
# the browser tests (tests/dashboard_browser_test.cpp, and
# tests/jobs_browser_test.cpp for the Jobs pages) against a real
# `mibyan serve` with MIBYAN_DASHBOARD_SCREENSHOTS=docs/images, which saves
# docs/images/dashboard-<page>.png (1280x800 PNG) as the test visits each
# page. Needs Debian's chromium and the pinned npm packages
# (scripts/install-test-deps.sh). Builds only the targets it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-2}"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$JOBS" --target mibyan dashboard_browser_test jobs_browser_test
out="$(pwd)/docs/images"
mkdir -p "$out"
rm -f "$out"/dashboard-*.png
set +e
MIBYAN_DASHBOARD_SCREENSHOTS="$out" "$BUILD_DIR/tests/dashboard_browser_test" --log_level=test_suite
status=$?
if [ "$status" -eq 0 ]; then
  MIBYAN_DASHBOARD_SCREENSHOTS="$out" "$BUILD_DIR/tests/jobs_browser_test" --log_level=test_suite
  status=$?
fi
set -e
if [ "$status" -eq 77 ]; then
  echo "dashboard-screenshots: skipped: no Chromium (scripts/install-test-deps.sh)" >&2
  exit 77
fi
ls -l "$out"/dashboard-*.png
if [ "$status" -ne 0 ]; then
  echo "dashboard-screenshots: the browser test failed (exit $status); the screenshots may be incomplete" >&2
fi
exit "$status"
