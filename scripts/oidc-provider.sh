#!/usr/bin/env bash
# A real OpenID provider for the steadfast-oauth integration test: installs the npm
# `oidc-provider` (version pinned in crates/steadfast-oauth/tests/support/package-lock.json) into
# that directory (first run only), then runs the ignored test of
# crates/steadfast-oauth/tests/oidc_provider.rs and the gateway's crates/steadfast-cli/tests/auth.rs
# (but its tests that also need the Python SDK or Redis).
# `scripts/oidc-provider.sh --install` only installs it and prints the directory to use (CI sets
# STEADFAST_TEST_OIDC to it and runs the test with the rest of the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
SUPPORT=crates/steadfast-oauth/tests/support
if [ ! -f "$SUPPORT/node_modules/oidc-provider/package.json" ]; then
  (cd "$SUPPORT" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >&2)
fi
export STEADFAST_TEST_OIDC="$PWD/$SUPPORT"
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_OIDC"
  exit 0
fi
timeout 600 cargo test -p steadfast-oauth --test oidc_provider -- --include-ignored
timeout 900 cargo test -p steadfast-cli --test auth -- --include-ignored --skip python_sdk --skip sharing_redis
