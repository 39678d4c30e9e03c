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
"$BIN" tool search_files '{"pattern": "class runtime", "path": "include/mibyan", "limit": 3}'
echo
echo "== mibyan tool read_file"
"$BIN" tool read_file '{"path": "README.md", "limit": 5}'
echo
echo "== mibyan tool --stdin: execute_code scripts calling tools, state kept between calls"
printf '%s\n' \
  '{"tool":"execute_code","args":{"code":"import glob\nfrom mibyan_tools import read_file\nlines = {f: read_file(f, limit=1)[\"total_lines\"] for f in glob.glob(\"actors/*.cpp\")}\nprint(len(lines), \"files read through the bridge\")"}}' \
  '{"tool":"execute_code","args":{"code":"for f, n in sorted(lines.items(), key=lambda x: -x[1]):\n    print(f\"{n:5d}  {f}\")"}}' \
  | "$BIN" tool --stdin
