#!/usr/bin/env bash
# The one command that sets up and runs every check: formatting, lints, Rust tests, the
# end-to-end Python tests against the built `quiver`, the browser build and its tests in
# Chromium, and the Terraform checks. Stops at the first
# failure. The cargo target dir lives outside the repo (default ~/.cache/quiver-target) so that
# fresh clones (CI) reuse the build.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # QUIVER_NIGHTLY, CARGO_TARGET_DIR

START=$SECONDS
CURRENT=""
trap 'echo "==> FAILED: $CURRENT after $((SECONDS - START)) s total"' ERR

phase() {
  CURRENT=$1; shift
  echo "==> $CURRENT"
  local t0=$SECONDS
  "$@"
  echo "==> $CURRENT ok ($((SECONDS - t0)) s)"
}

phase setup      scripts/setup.sh
# One direction, no import circle, no long room (see the script's header).
phase house      python3 scripts/check-house.py
phase fmt        cargo fmt --all -- --check
phase clippy     cargo clippy --workspace --all-targets -- -D warnings
phase cargo-test cargo test --workspace
phase build-cli  cargo build -p quiver-cli -p quiver-lambda
export QUIVER_BIN="$CARGO_TARGET_DIR/debug/quiver"
# pytest's fixtures start MinIO (scripts/minio.sh, installed by setup), the S3 proxy, the
# HTTP server and cargo-lambda's emulator (over the functions just built) on loopback, and
# stop them at the end; AWS_* settings of this shell are not used.
phase pytest     env PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider tests/
phase setup-web  scripts/setup-web.sh
phase wasm       scripts/build-wasm.sh --dev
phase web        npm run --silent build:web
# Chromium (Debian's) against MinIO and an HTTP server, both with CORS; screenshots land
# in test-results/browser/.
phase browser    npm run --silent test:browser
phase infra      scripts/check-infra.sh

echo "==> all checks passed ($((SECONDS - START)) s)"
