#!/usr/bin/env bash
# HAProxy, the load balancer of the replicas test (crates/steadfast-cli/tests/replicas.rs):
# installed from Debian's packages when the machine lacks it.
# `scripts/haproxy.sh --install` only installs it and prints the binary's path (CI sets
# STEADFAST_TEST_HAPROXY to it and runs the test with the rest of the suite); without
# arguments it also runs that test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v haproxy >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 $SUDO apt-get install -y -q haproxy >&2 \
    || { timeout 300 $SUDO apt-get update -q >&2 && timeout 300 $SUDO apt-get install -y -q haproxy >&2; }
fi
# Debian's package starts a system service on the default config; the tests start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet haproxy 2>/dev/null; then
  systemctl stop haproxy >/dev/null 2>&1 || true
fi
STEADFAST_TEST_HAPROXY="$(command -v haproxy)"
export STEADFAST_TEST_HAPROXY
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_HAPROXY"
  exit 0
fi
export STEADFAST_TEST_POSTGRES_URL="${STEADFAST_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export STEADFAST_TEST_REDIS_URL="${STEADFAST_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
timeout 1800 cargo test -p steadfast-cli --all-features --test replicas -- --include-ignored
