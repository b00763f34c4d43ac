#!/usr/bin/env bash
# The cost of a pipe: what a proxy adds to each MCP call, measured with a raw JSON-RPC driver
# and a minimal echo upstream (crates/steadfast-bench-proxy), all processes pinned to one CPU.
#
#   scripts/bench-proxy.sh            # RUNS=5 SEQ=20000 CONC=200000 INFLIGHT=64 CPU=1
#
# Configurations, run interleaved in each round so that they share the machine's state:
#   direct      driver → echo-upstream
#   byte relay  driver → byte-relay → echo-upstream      (the floor for any process in a pipe)
#   steadfast   driver → steadfast proxy → echo-upstream (stdio front)
#   HTTP relay  driver ⇒ http-relay → echo-upstream: hyper relaying each POST's body over a pipe
#               (the floor for any HTTP front here; modern requests, no parsing)
#   steadfast HTTP (session)  driver ⇒ steadfast proxy --listen → echo-upstream: handshake-era
#               requests in one session, keep-alive connections (one per call in flight)
#   steadfast HTTP (modern)   the same with MCP 2026-07-28 requests: no session, `_meta` and
#               routing headers (`rpc-driver --modern`)
#   + any extra "label=command line" given in EXTRA (the upstream is appended after `--`), or
#     "label=http [--modern] /path/to/steadfast" for another build's HTTP front.
# HTTP=0 leaves the three HTTP rows out. Over HTTP the driver keeps one keep-alive connection for
# the sequential calls and INFLIGHT connections (tasks of one thread) for the calls in flight.
# Prints a markdown table: medians over the rounds of µs per sequential call, µs added per
# call vs direct, and calls/s with INFLIGHT in flight. Each run is bounded (DEADLINE seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
SEQ="${SEQ:-20000}"
WARMUP="${WARMUP:-2000}"
CONC="${CONC:-200000}"
INFLIGHT="${INFLIGHT:-64}"
CPU="${CPU:-1}"
DEADLINE="${DEADLINE:-120}"

if [ -z "${SKIP_BUILD:-}" ]; then
  timeout 3600 cargo build --quiet --release -p steadfast-bench-proxy -p steadfast-cli >&2
fi
B="${CARGO_TARGET_DIR:-$(pwd)/target}/release"
STEADFAST="${STEADFAST_BIN:-$B/steadfast}"

configs=("direct=" "byte relay=$B/byte-relay --" "steadfast proxy (stdio)=$STEADFAST proxy --")
if [ "${HTTP:-1}" != 0 ]; then
  configs+=("HTTP relay=http --modern $B/http-relay --listen 127.0.0.1:0"
    "steadfast HTTP (session)=http $STEADFAST" "steadfast HTTP (modern)=http --modern $STEADFAST")
fi
if [ -n "${EXTRA:-}" ]; then
  while IFS= read -r line; do [ -n "$line" ] && configs+=("$line"); done <<< "$EXTRA"
fi

out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT

# `http [--modern] BIN [ARGS…]`: the driver over HTTP against that binary's front (pinned to the
# same CPU), started on a free port for this run only; ARGS default to `proxy --listen
# 127.0.0.1:0` (a steadfast binary).
drive_http() {
  local modern="" bin
  if [ "$1" = --modern ]; then modern=--modern; shift; fi
  bin="$1"
  shift
  if [ $# = 0 ]; then set -- proxy --listen 127.0.0.1:0; fi
  taskset -c "$CPU" "$bin" "$@" -- "$B/echo-upstream" > /dev/null 2> "$log" &
  local pid=$! url=""
  for _ in $(seq 1 300); do
    url=$(sed -n 's|.*serving MCP at \(http://[^ ]*\).*|\1|p' "$log" | head -1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  local rc=1
  if [ -n "$url" ]; then
    # shellcheck disable=SC2086 # $modern is empty or one flag
    taskset -c "$CPU" timeout $((DEADLINE + 10)) "$B/rpc-driver" --http "$url" $modern \
      --warmup "$WARMUP" --seq "$SEQ" --conc "$CONC" --inflight "$INFLIGHT" --deadline "$DEADLINE" \
      && rc=0
  else
    echo "the HTTP front did not say where it listens: $(head -c 500 "$log")" >&2
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return $rc
}
for round in $(seq 1 "$RUNS"); do
  for cfg in "${configs[@]}"; do
    label="${cfg%%=*}"
    wrapper="${cfg#*=}"
    if [ "${wrapper%% *}" = http ]; then
      # shellcheck disable=SC2086 # the wrapper is a command line
      if result=$(drive_http ${wrapper#http }); then
        printf '%s\t%s\n' "$label" "$result" >> "$out"
        echo "round $round: $label: $result" >&2
      else
        printf '%s\t{"failed": true}\n' "$label" >> "$out"
        echo "round $round: $label: FAILED" >&2
      fi
      continue
    fi
    # shellcheck disable=SC2086 # the wrapper is a command line
    if result=$(taskset -c "$CPU" timeout $((DEADLINE + 10)) "$B/rpc-driver" \
        --warmup "$WARMUP" --seq "$SEQ" --conc "$CONC" --inflight "$INFLIGHT" --deadline "$DEADLINE" \
        -- $wrapper "$B/echo-upstream"); then
      printf '%s\t%s\n' "$label" "$result" >> "$out"
      echo "round $round: $label: $result" >&2
    else
      printf '%s\t{"failed": true}\n' "$label" >> "$out"
      echo "round $round: $label: FAILED" >&2
    fi
  done
done

python3 - "$out" "$INFLIGHT" "$RUNS" "$CPU" <<'PY'
import json, statistics, sys
path, inflight, runs, cpu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = {}
for line in open(path):
    label, data = line.rstrip("\n").split("\t", 1)
    rows.setdefault(label, []).append(json.loads(data))
def med(xs):
    return statistics.median(xs) if xs else float("nan")
ok = {k: [r for r in v if not r.get("failed")] for k, v in rows.items()}
base = med([r["seq_us_p50"] for r in ok.get("direct", [])])
base_mean = med([r["seq_us_mean"] for r in ok.get("direct", [])])
print(f"| pinned to CPU {cpu}, median of {runs} rounds | µs per sequential call: p50 (mean) | added vs direct: p50 (mean) | calls/s, {inflight} in flight (range) |")
print("|---|---|---|---|")
for label, rs in ok.items():
    if not rs:
        print(f"| {label} | failed | — | failed |")
        continue
    p50 = med([r["seq_us_p50"] for r in rs])
    mean = med([r["seq_us_mean"] for r in rs])
    cps = [r["calls_per_s"] for r in rs]
    added = "—" if label == "direct" else f"+{p50 - base:.1f} (+{mean - base_mean:.1f})"
    print(f"| {label} | {p50:.1f} ({mean:.1f}) | {added} | {med(cps):,.0f} ({min(cps):,.0f}–{max(cps):,.0f}) |")
PY
