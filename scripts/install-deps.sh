#!/usr/bin/env bash
# Installs the Debian packages tenantd builds and tests with, skipping what is
# already present. Idempotent; run as root (or with sudo available).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libfyaml-dev libjansson-dev libsqlite3-dev
      libuv1-dev libhttp-parser-dev libssl-dev libcmocka-dev libhiredis-dev
      curl openssl sqlite3 clang libclang-rt-14-dev redis-server valgrind
      chromium python3)
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
