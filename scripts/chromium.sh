#!/usr/bin/env bash
# Debian's Chromium and its WebDriver (chromedriver), for the console's browser test
# (crates/steadfast-console/tests/browser.rs): installed from Debian's packages when the
# machine lacks them, nothing downloaded at test time.
# `scripts/chromium.sh --install` only installs them and prints chromedriver's path (CI sets
# STEADFAST_TEST_CHROMEDRIVER to it and runs the test with the rest of the suite); without
# arguments it also runs that test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 $SUDO apt-get install -y -q chromium chromium-driver >&2 \
    || { timeout 300 $SUDO apt-get update -q >&2 && timeout 600 $SUDO apt-get install -y -q chromium chromium-driver >&2; }
fi
# axe-core (npm, pinned), the accessibility check the browser test runs in each page.
if [ ! -f target/axe/node_modules/axe-core/axe.min.js ]; then
  mkdir -p target/axe
  (cd target/axe && timeout 300 npm install --silent --no-audit --no-fund axe-core@4.10.3 >&2)
fi
STEADFAST_TEST_CHROMEDRIVER="$(command -v chromedriver)"
export STEADFAST_TEST_CHROMEDRIVER
if [ "${1:-}" = "--install" ]; then
  echo "$STEADFAST_TEST_CHROMEDRIVER"
  exit 0
fi
export STEADFAST_TEST_POSTGRES_URL="${STEADFAST_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
timeout 1800 cargo test -p steadfast-console --features gateway --test browser -- --include-ignored
