#!/usr/bin/env bash
# The proxy against public MCP servers (npm and PyPI), direct vs through `steadfast proxy`.
#
#   scripts/realworld.sh [--only NAME]... [--no-http] [--json FILE]
#
# Installs the pinned servers (scripts/realworld/package-lock.json, requirements.txt) into
# target/realworld/ (npm --prefix, a Python venv), builds the binary unless STEADFAST_BIN is set,
# then runs scripts/realworld.py, which prints a table and exits non-zero on any difference.
# Every step is bounded by a timeout. Needs node/npm and python3 (3.10+) on PATH, and network
# access to the registries on the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RW="${REALWORLD_DIR:-$ROOT/target/realworld}"
mkdir -p "$RW"

# npm: exactly the lock's versions (npm ci), re-run only when the lock changed.
if ! cmp -s scripts/realworld/package-lock.json "$RW/package-lock.json" || [ ! -d "$RW/node_modules" ]; then
  echo "== npm ci (target/realworld)" >&2
  cp scripts/realworld/package.json scripts/realworld/package-lock.json "$RW/"
  timeout 600 npm ci --prefix "$RW" --no-audit --no-fund --loglevel=error >&2
fi

# PyPI: a venv with the pinned requirements.
if [ ! -x "$RW/venv/bin/python" ]; then
  echo "== python venv (target/realworld/venv)" >&2
  timeout 120 python3 -m venv "$RW/venv"
fi
if ! cmp -s scripts/realworld/requirements.txt "$RW/venv/.requirements.txt"; then
  echo "== pip install -r scripts/realworld/requirements.txt" >&2
  timeout 600 "$RW/venv/bin/pip" install --quiet --disable-pip-version-check \
    -r scripts/realworld/requirements.txt >&2
  cp scripts/realworld/requirements.txt "$RW/venv/.requirements.txt"
fi

if [ -z "${STEADFAST_BIN:-}" ]; then
  echo "== cargo build -p steadfast-cli" >&2
  timeout 1800 cargo build --quiet -p steadfast-cli >&2
  export STEADFAST_BIN="$ROOT/target/debug/steadfast"
fi
export REALWORLD_DIR="$RW"

# The whole comparison is bounded too (each request inside it has its own timeout).
exec timeout 900 "$RW/venv/bin/python" scripts/realworld.py "$@"
