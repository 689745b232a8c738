#!/usr/bin/env bash
# Installs what the browser build and its tests need; safe to run again (skips what is there).
#   rust:  the wasm32 target, the pinned nightly with rust-src, clang (setup-wasm-toolchain.sh)
#   apt:   chromium (Debian's; Playwright drives it, no browser is ever downloaded)
#   cargo: wasm-bindgen-cli at the version in Cargo.lock, and wasm-pack, into
#          ~/.cache/quiver-tools (outside the clone, so CI reuses them)
#   npm:   the root package.json (vite, typescript, playwright-core, @duckdb/duckdb-wasm)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # QUIVER_TOOLS on PATH

say() { echo "setup-web: $*"; }

scripts/setup-wasm-toolchain.sh

if [ -x /usr/bin/chromium ]; then
  say "chromium present"
else
  say "installing chromium (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $bindgen_version"; then
  say "wasm-bindgen $bindgen_version present"
else
  say "building wasm-bindgen-cli $bindgen_version (~3 min)"
  cargo install -q --root "$QUIVER_TOOLS" wasm-bindgen-cli --version "$bindgen_version"
fi
if command -v wasm-pack >/dev/null; then
  say "wasm-pack present"
else
  say "building wasm-pack (~3 min)"
  cargo install -q --root "$QUIVER_TOOLS" wasm-pack
fi

if [ -d node_modules/playwright-core ] && [ -d node_modules/vite ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  say "npm packages present"
else
  say "installing npm packages"
  # `npm install`, not `npm ci`: the registry this machine reaches leaves rollup's optional
  # per-platform packages out of the lock file, which `npm ci` then refuses.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error
fi
say "done"
