#!/usr/bin/env bash
# Installs everything Mibyan needs to build and test on Debian 12, from
# Debian's own packages. Idempotent: does nothing when all are present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache git ca-certificates
  libcaf-dev libsimdjson-dev libcurl4-openssl-dev liblmdb-dev libgit2-dev
  libyaml-cpp-dev libboost-test-dev libhowardhinnant-date-dev tzdata
  libpq-dev
  python3 ripgrep procps
  bubblewrap
  nodejs
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm ships inside some nodejs builds (nodesource) and apart in Debian's.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
