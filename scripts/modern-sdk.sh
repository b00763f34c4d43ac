#!/usr/bin/env bash
# MCP 2026-07-28 clients and servers through the gateway, with the Python MCP SDK 2.x
# (mcp 2.3.0, which speaks both eras: its client probes with server/discover and falls back to
# initialize): installs it into target/modern-sdk/venv (first run only), then runs the ignored
# SDK tests of crates/steadfast-cli/tests/modern_sdk.rs; server-everything (npm) goes into
# target/modern-sdk/node_modules.
# `scripts/modern-sdk.sh --install` only installs it and prints the interpreter's path (CI sets
# STEADFAST_TEST_MCP2_PYTHON to it and runs the tests with the rest of the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/modern-sdk/venv
if [ ! -x "$VENV/bin/python" ]; then
  timeout 120 python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' 2>/dev/null; then
  timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check "mcp==2.3.0" >&2
fi
# server-everything (npm), pinned by the real-world check's lock, into target/modern-sdk/.
NPM=target/modern-sdk
if ! cmp -s scripts/realworld/package-lock.json "$NPM/package-lock.json" || [ ! -d "$NPM/node_modules" ]; then
  cp scripts/realworld/package.json scripts/realworld/package-lock.json "$NPM/"
  timeout 600 npm ci --prefix "$NPM" --no-audit --no-fund --loglevel=error >&2
fi
export STEADFAST_TEST_MCP2_PYTHON="$PWD/$VENV/bin/python"
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_MCP2_PYTHON"
  exit 0
fi
timeout 1800 cargo test -p steadfast-cli --test modern_sdk -- --include-ignored
