#!/usr/bin/env bash
# Builds the Lambda functions for AWS: `cargo lambda build --release --arm64`, packaged as
# dist/lambda/worker/bootstrap.zip and dist/lambda/coordinator/bootstrap.zip (runtime
# provided.al2023, arm64), which infra/ deploys. Installs cargo-lambda (PyPI wheel, with zig
# for the cross build) and the aarch64 target when missing. A cold release build of
# DataFusion for arm64 takes about half an hour on 2 cores.
#   scripts/build-lambda.sh            # release, arm64 (what infra/ expects)
#   scripts/build-lambda.sh --x86-64   # for x86_64 functions instead
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

arch=--arm64
target=aarch64-unknown-linux-gnu
if [[ "${1:-}" == "--x86-64" ]]; then
  arch=--x86-64
  target=x86_64-unknown-linux-gnu
fi

command -v cargo-lambda >/dev/null || python3 -m pip install -q cargo-lambda
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

cargo lambda build --release "$arch" --package quiver-lambda --output-format zip \
  --lambda-dir dist/lambda
for function in worker coordinator; do
  zip="dist/lambda/$function/bootstrap.zip"
  [[ -s "$zip" ]] || { echo "build-lambda: $zip missing" >&2; exit 1; }
  echo "build-lambda: $zip ($(du -h "$zip" | cut -f1))"
done
