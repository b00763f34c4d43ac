#!/usr/bin/env bash
# Durable tool calls driven by the Python MCP SDK's task client (mcp 1.30.0, the last release
# with the MCP 2025-11-25 tasks API): installs it into target/tasks-sdk/venv (first run only),
# then runs the ignored SDK test of crates/steadfast-cli/tests/durable_tasks.rs.
# `scripts/tasks-sdk.sh --install` only installs it and prints the interpreter's path (CI sets
# STEADFAST_TEST_MCP_PYTHON to it and runs the test with the rest of the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/tasks-sdk/venv
if [ ! -x "$VENV/bin/python" ]; then
  timeout 120 python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "1.30.0"' 2>/dev/null; then
  timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check "mcp==1.30.0" >&2
fi
export STEADFAST_TEST_MCP_PYTHON="$PWD/$VENV/bin/python"
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_MCP_PYTHON"
  exit 0
fi
timeout 1800 cargo test -p steadfast-cli --test durable_tasks -- --include-ignored python_sdk
