#!/usr/bin/env bash
# README command (1): installs the dependencies, builds Mibyan and runs a
# first real job: tool calls through the runtime, without any model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BIN="${BUILD_DIR:-build}/mibyan"
echo
echo "== mibyan config check"
"$BIN" config check
echo
echo "== mibyan tool terminal"
"$BIN" tool terminal '{"command": "echo hello from $(uname -s); ls | head -3"}'
echo
echo "== mibyan tool search_files"
"$BIN" tool search_files '{"pattern": "class runtime", "path": "runtime", "limit": 3}'
echo
echo "== mibyan tool read_file"
"$BIN" tool read_file '{"path": "README.md", "limit": 5}'
