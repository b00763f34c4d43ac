#!/usr/bin/env bash
# The TypeScript MCP SDK client (@modelcontextprotocol/client 2.x, which speaks both protocol
# eras) and the handshake-era @modelcontextprotocol/server-everything, versions pinned in
# crates/steadfast-cli/tests/support/ts-sdk/package-lock.json: installs them into target/ts-sdk
# (first run only), then runs the ignored tests of crates/steadfast-cli/tests/ts_sdk.rs.
# `scripts/ts-sdk.sh --install` only installs them and prints the directory (CI sets
# STEADFAST_TEST_TS_SDK to it and runs the tests with the rest of the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
SUPPORT=crates/steadfast-cli/tests/support/ts-sdk
DIR=target/ts-sdk
if ! cmp -s "$SUPPORT/package-lock.json" "$DIR/package-lock.json" \
  || [ ! -f "$DIR/node_modules/@modelcontextprotocol/client/package.json" ]; then
  mkdir -p "$DIR"
  cp "$SUPPORT/package.json" "$SUPPORT/package-lock.json" "$SUPPORT/client.mjs" "$DIR/"
  (cd "$DIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >&2)
fi
cp "$SUPPORT/client.mjs" "$DIR/"
export STEADFAST_TEST_TS_SDK="$PWD/$DIR"
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_TS_SDK"
  exit 0
fi
timeout 1800 cargo test -p steadfast-cli --test ts_sdk -- --include-ignored
