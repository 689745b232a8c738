#!/usr/bin/env bash
# What the wasm32 build needs of Rust and C, for scripts/setup.sh and scripts/setup-web.sh alike
# (each README section must work alone): the wasm32 target, the pinned nightly with rust-src
# (-Z build-std for the threaded module) and clang (C dependencies built for wasm32). Safe to
# run again: skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # QUIVER_NIGHTLY

say() { echo "setup: $*"; }

if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "wasm32-unknown-unknown target present"
else
  say "adding wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if rustup component list --toolchain "$QUIVER_NIGHTLY" --installed 2>/dev/null | grep -q '^rust-src'; then
  say "$QUIVER_NIGHTLY with rust-src present"
else
  say "installing $QUIVER_NIGHTLY with rust-src"
  rustup toolchain install "$QUIVER_NIGHTLY" --profile minimal --component rust-src
fi

if command -v clang >/dev/null; then
  say "clang present"
else
  say "installing clang"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq clang >/dev/null
fi
