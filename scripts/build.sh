#!/usr/bin/env bash
# Configures and builds Mibyan into $BUILD_DIR (default: build).
#
# The default build type is RelWithDebInfo with line tables only (-g1):
# full debug info (-g) makes the CAF-heavy sources compile about 1.4x as
# long on 2 cores, and line tables are enough for backtraces and perf.
# BUILD_TYPE=Debug (or CXXFLAGS) gives the full information.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
