#!/usr/bin/env bash
# The OTLP receiver of crates/steadfast-cli/tests/otel.rs: a venv in target/otlp-receiver/venv
# with the official `opentelemetry-proto` messages from PyPI (first run only), and
# scripts/otlp-receiver.py, which decodes each ExportTraceServiceRequest into JSON lines.
# `scripts/otlp-receiver.sh --install` only installs it and prints the interpreter's path (CI sets
# STEADFAST_TEST_OTLP to it); without --install it runs the ignored tests of tests/otel.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/otlp-receiver/venv
if [ ! -x "$VENV/bin/python" ]; then
  timeout 120 python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
  timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check "opentelemetry-proto==1.38.0" >&2
fi
export STEADFAST_TEST_OTLP="$PWD/$VENV/bin/python"
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_OTLP"
  exit 0
fi
export STEADFAST_TEST_MCP_PYTHON="${STEADFAST_TEST_MCP_PYTHON:-$(bash scripts/tasks-sdk.sh --install)}"
timeout 1800 cargo test -p steadfast-cli --features otel --test otel -- --include-ignored
