#!/usr/bin/env bash
# Installs what the build and the tests need; safe to run again (skips what is there).
#   Python: duckdb, pyarrow, tpchgen-cli, pytest, boto3, cargo-lambda (its wheel holds the
#           binary: `cargo lambda watch` runs the Lambda functions in the tests), pyiceberg
#           (writes the Iceberg tables of tests/test_iceberg.py; pinned, with the sqlite
#           catalog and pyiceberg-core for the day()/bucket() transforms)
#   MinIO:  the S3 server of the remote-read tests (scripts/minio.sh install: go install, ~8 min)
#   Rust:   stable clippy/rustfmt and the wasm32 target; the pinned nightly with rust-src
#   C:      clang (zstd-sys needs it for wasm32)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

say() { echo "setup: $*"; }

PYICEBERG='pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]==0.12.0'
if python3 -c 'import duckdb, pyarrow, pytest, boto3, sqlalchemy, pyiceberg_core, pyiceberg; assert pyiceberg.__version__ == "0.12.0"' 2>/dev/null && python3 -m pip show -q tpchgen-cli >/dev/null 2>&1 && command -v cargo-lambda >/dev/null; then
  say "python packages present"
else
  say "installing python packages (duckdb pyarrow tpchgen-cli pytest boto3 cargo-lambda $PYICEBERG)"
  python3 -m pip install -q duckdb pyarrow tpchgen-cli pytest boto3 cargo-lambda "$PYICEBERG"
fi

# MinIO for the S3 tests (the pytest fixtures start and stop it); needs Go 1.24+.
scripts/minio.sh install

if ! rustup component list --installed | grep -q '^clippy' || ! rustup component list --installed | grep -q '^rustfmt'; then
  say "adding clippy and rustfmt"
  rustup component add clippy rustfmt
fi

scripts/setup-wasm-toolchain.sh
say "done"
