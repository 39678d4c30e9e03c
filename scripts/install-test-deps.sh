#!/usr/bin/env bash
# Installs the test-only dependencies that are not Debian packages: the
# stock `openai` npm client (pinned in tests/node/package.json) that
# tests/serve_test.cpp drives against `mibyan serve`. It goes into
# tests/node/node_modules (ignored by git). Idempotent; fails loudly when
# npm or the registry is unreachable.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
want=$(node -e 'console.log(require("./package.json").dependencies.openai)')
have=$(node -e 'try{console.log(require("./node_modules/openai/package.json").version)}catch(e){console.log("")}' 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "install-test-deps: openai@$have present"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "install-test-deps: npm is missing (scripts/install-deps.sh installs nodejs and npm)" >&2
  exit 1
fi
echo "install-test-deps: installing openai@$want into tests/node/node_modules"
npm install --no-audit --no-fund --no-save --loglevel=error "openai@$want"
