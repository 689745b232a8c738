#!/usr/bin/env bash
# Portability gate: quiver-core must build for wasm32-unknown-unknown with threads (atomics),
# as the browser build needs. Uses the pinned nightly (-Z build-std) and its own target dir
# so that these RUSTFLAGS don't invalidate the native build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # QUIVER_NIGHTLY, CARGO_TARGET_DIR

export RUSTFLAGS='-C target-feature=+atomics,+bulk-memory --cfg getrandom_backend="wasm_js"'
exec cargo "+$QUIVER_NIGHTLY" build -p quiver-core \
  --target wasm32-unknown-unknown \
  --target-dir "$CARGO_TARGET_DIR/wasm" \
  -Z build-std=panic_abort,std
