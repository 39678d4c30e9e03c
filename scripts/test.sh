#!/usr/bin/env bash
# README command (2): installs the dependencies, builds everything and runs
# the whole test suite under ctest. Exit code 0 only if every test passed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/install-test-deps.sh
export BUILD_DIR="${BUILD_DIR:-build}"
bash scripts/build.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j "${TEST_JOBS:-2}" --timeout 600
