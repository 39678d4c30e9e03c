#!/usr/bin/env bash
# Installs what the fuzz targets need on top of scripts/install-deps.sh:
# clang and its runtime libraries (libFuzzer, ASan, UBSan), from Debian.
# Idempotent: does nothing when all are present. Used by scripts/fuzz.sh.
set -euo pipefail

PACKAGES=(clang libclang-rt-dev llvm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-fuzz-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-fuzz-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
