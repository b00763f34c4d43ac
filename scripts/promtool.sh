#!/usr/bin/env bash
# promtool, Prometheus's rule checker, for the ops test (crates/steadfast-cli/tests/ops_rules.rs):
# the one on PATH, else the binary unpacked from Debian's `prometheus` package into
# target/promtool (downloaded, not installed: no service is started, nothing outside target/).
# `scripts/promtool.sh --install` only installs it and prints the binary's path (CI sets
# STEADFAST_TEST_PROMTOOL to it); without arguments it also checks ops/prometheus/alerts.yml
# and runs the test.
set -euo pipefail
cd "$(dirname "$0")/.."
PROMTOOL="$(command -v promtool || true)"
if [ -z "$PROMTOOL" ]; then
  PROMTOOL="$PWD/target/promtool/promtool"
  if [ ! -x "$PROMTOOL" ]; then
    dir="$(mktemp -d)"
    trap 'rm -rf "$dir"' EXIT
    # apt's sandbox user cannot write into a private temp dir; the download is one .deb.
    chmod 755 "$dir"
    ( cd "$dir" && { timeout 300 apt-get download -q prometheus >&2 \
        || { timeout 300 apt-get update -q >&2 && timeout 300 apt-get download -q prometheus >&2; }; } )
    mkdir -p "$(dirname "$PROMTOOL")"
    dpkg -x "$dir"/prometheus_*.deb "$dir/x"
    install -m 755 "$dir/x/usr/bin/promtool" "$PROMTOOL"
  fi
fi
"$PROMTOOL" --version >/dev/null
STEADFAST_TEST_PROMTOOL="$PROMTOOL"
export STEADFAST_TEST_PROMTOOL
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_PROMTOOL"
  exit 0
fi
"$PROMTOOL" check rules ops/prometheus/alerts.yml
timeout 900 cargo test -p steadfast-cli --all-features --test ops_rules
