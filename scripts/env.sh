# Shared settings for the scripts in this folder; source it, don't run it.
# The pinned nightly toolchain is used only for the wasm32 build (-Z build-std).

QUIVER_NIGHTLY=nightly-2026-05-20
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quiver-target}"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
# Tools built from crates.io for the browser build (wasm-pack, wasm-bindgen); outside the
# clone, so CI reuses them.
export QUIVER_TOOLS="${QUIVER_TOOLS:-$HOME/.cache/quiver-tools}"
export PATH="$QUIVER_TOOLS/bin:$PATH"
