#!/usr/bin/env bash
# Installs the test-only dependencies that are not Debian packages, pinned
# in tests/node/package.json: the stock `openai` npm client that
# tests/serve_test.cpp drives against `mibyan serve`, and the MCP servers
# `@modelcontextprotocol/server-filesystem` and
# `@modelcontextprotocol/server-everything` that the MCP tests connect to
# (docs/mcp.md). They go into tests/node/node_modules (ignored by git).
# Idempotent; fails loudly when npm or the registry is unreachable.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
# Prints every dependency whose installed version differs from the pin.
missing=$(node -e '
const deps = require("./package.json").dependencies;
for (const [name, want] of Object.entries(deps)) {
  let have = "";
  try { have = require("./node_modules/" + name + "/package.json").version; } catch (e) {}
  if (have !== want) console.log(name + "@" + want);
}' 2>/dev/null || echo "all")
if [ -z "$missing" ]; then
  echo "install-test-deps: pinned npm packages present"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "install-test-deps: npm is missing (scripts/install-deps.sh installs nodejs and npm)" >&2
  exit 1
fi
echo "install-test-deps: installing into tests/node/node_modules:" $missing
npm install --no-audit --no-fund --loglevel=error
