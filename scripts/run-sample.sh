#!/usr/bin/env bash
# The main job, from a fresh machine: install the Python packages that make sample data,
# generate TPC-H (scale factor 0.1, or $1) as Parquet, build `quiver` in release mode and run
# a query on the data: the listing, footers, pruning, buckets and fetch all take part.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # CARGO_TARGET_DIR

SF="${1:-0.1}"
DATA="${QUIVER_DATA:-$HOME/.cache/quiver-data/tpch-sf$SF}"

if ! python3 -c 'import pyarrow' 2>/dev/null || ! python3 -m pip show -q tpchgen-cli >/dev/null 2>&1; then
  echo "sample: installing pyarrow and tpchgen-cli"
  python3 -m pip install -q pyarrow tpchgen-cli
fi
echo "sample: generating TPC-H SF $SF in $DATA"
python3 scripts/gen_tpch.py "$SF" "$DATA"

echo "sample: building quiver (release; the first build takes about 20 minutes on 2 cores)"
cargo build --release -q -p quiver-cli
QUIVER="$CARGO_TARGET_DIR/release/quiver"

SQL="SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       count(*) AS count_order
FROM '$DATA/single/lineitem.parquet'
WHERE l_shipdate <= date '1998-12-01' - interval '90' day
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus"

echo "sample: $QUIVER query --profile \"$SQL\""
"$QUIVER" query --profile "$SQL"
echo
echo "sample: the same data as hive-partitioned files, listing only (opens no Parquet file):"
"$QUIVER" query --profile "SELECT DISTINCT l_returnflag, _file FROM read_parquet('$DATA/hive/lineitem/**/*.parquet', hive_partitioning => true) ORDER BY 1, 2"
