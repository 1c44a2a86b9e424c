#!/usr/bin/env bash
# Installs the Debian packages tenantd builds and tests with, skipping what is
# already present. Idempotent; run as root (or with sudo available).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libfyaml-dev libjansson-dev libsqlite3-dev
      libuv1-dev libhttp-parser-dev libssl-dev libcmocka-dev libhiredis-dev libpq-dev zlib1g-dev
      curl openssl sqlite3 clang libclang-rt-14-dev redis-server valgrind
      chromium python3 python3-yaml prometheus postgresql)
# kubectl renders deploy/ in tests/integration/test_deploy.sh (kustomize v4+,
# kubectl >= 1.21). A kubectl already on PATH is kept. Else the package
# `kubectl` where an apt source has it; Debian itself has only
# kubernetes-client 1.20, whose kustomize is too old (the test then skips).
if ! command -v kubectl >/dev/null; then
    if apt-cache show kubectl >/dev/null 2>&1; then pkgs+=(kubectl); else pkgs+=(kubernetes-client); fi
fi
# postgresql is the server tests/integration/test_postgres.sh starts in a temp
# dir (initdb + pg_ctl as the postgres user); libpq-dev is the client library
# of the --database postgres:// backend. The package's own cluster is unused.
# prometheus brings promtool (check rules, test rules); --no-install-recommends
# keeps node-exporter out. Its postinst enables prometheus.service, which
# starts it where systemd runs (a container's policy-rc.d refuses); the
# tests need promtool only.
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
