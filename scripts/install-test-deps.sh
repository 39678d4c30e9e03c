#!/usr/bin/env bash
# Installs the test-only dependencies:
# * Debian's `chromium`, the browser tests/dashboard_browser_test.cpp drives
#   (docs/dashboard.md); installed with apt-get when missing;
# * Debian's `postgresql` (15), the server tests/support/pg_server.cpp
#   starts as a throw-away instance for the PostgreSQL store tests
#   (docs/testing.md, "PostgreSQL"), and, when run as root, the system user
#   `mibyan-pg` that server runs as (PostgreSQL refuses to run as root);
# * the npm packages pinned in tests/node/package.json: the stock `openai`
#   npm client that tests/serve_test.cpp drives against `mibyan serve`, the
#   MCP servers `@modelcontextprotocol/server-filesystem` and
#   `@modelcontextprotocol/server-everything` that the MCP tests connect to
#   (docs/mcp.md), and `puppeteer-core`, which drives that Chromium (it
#   never downloads a browser of its own, so PUPPETEER_SKIP_DOWNLOAD does
#   not matter). They go into tests/node/node_modules (ignored by git).
# Idempotent; fails loudly when apt, npm or the registry is unreachable.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "install-test-deps: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium
fi
if [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "install-test-deps: installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends postgresql
fi
if [ "$(id -u)" -eq 0 ] && ! getent passwd mibyan-pg >/dev/null; then
  echo "install-test-deps: creating the system user mibyan-pg (runs the test PostgreSQL)"
  useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin mibyan-pg
fi
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
