#!/usr/bin/env bash
# Builds the browser module twice with wasm-pack (--target web) into web/public/wasm/:
#   threads/  nightly, +atomics,+bulk-memory, -Z build-std: rayon on Web Workers
#             (wasm-bindgen-rayon); needs a cross-origin isolated page
#   single/   stable, no atomics: the fallback for pages that are not isolated
# Both may grow their memory to 4 GiB (crates/quiver-wasm/build.rs).
#
#   scripts/build-wasm.sh [--dev|--release]   (default --release; the tests use --dev)
#
# Each build has its own target dir under $CARGO_TARGET_DIR, so their RUSTFLAGS never
# invalidate the native build's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # QUIVER_NIGHTLY, CARGO_TARGET_DIR, QUIVER_TOOLS on PATH

mode="${1:---release}"
case "$mode" in
  --dev) profile=(--dev) ;;
  # Cargo.toml's profile.wasm-release: opt-level "s", fat LTO, no name section.
  --release) profile=(--profile wasm-release) ;;
  *) echo "usage: $0 [--dev|--release]" >&2; exit 2 ;;
esac
out=web/public/wasm
common='--cfg getrandom_backend="wasm_js"'
# Debug info would make the dev module several times larger, for nothing the tests use.
export CARGO_PROFILE_DEV_DEBUG=false

build() {
  local name=$1; shift
  echo "build-wasm: $name ($mode)"
  wasm-pack build crates/quiver-wasm "${profile[@]}" --target web --no-typescript --no-pack \
    --out-dir "$PWD/$out/$name" "$@"
  rm -f "$out/$name/.gitignore"
}

CARGO_TARGET_DIR="$CARGO_TARGET_DIR/wasm" \
RUSTFLAGS="-C target-feature=+atomics,+bulk-memory $common" \
RUSTUP_TOOLCHAIN="$QUIVER_NIGHTLY" \
  build threads -- -Z build-std=panic_abort,std

CARGO_TARGET_DIR="$CARGO_TARGET_DIR/wasm-single" \
RUSTFLAGS="$common" \
  build single

ls -l "$out"/*/quiver_wasm_bg.wasm
