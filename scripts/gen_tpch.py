#!/usr/bin/env python3
"""Generate TPC-H data as Parquet in three layouts, for the end-to-end tests.

usage: gen_tpch.py SF OUTDIR

  OUTDIR/single/<table>.parquet        one file per table; lineitem has many row groups
  OUTDIR/many/<table>/part-N.parquet   each table split into several files, small row groups
  OUTDIR/hive/<table>/...              lineitem by l_returnflag=X/, orders by o_orderstatus=X/
                                       (the key column removed from the files); others as `many`

tpchgen-cli writes the raw tables; single/ keeps its files (Arrow schema string_view, decimals
as INT64) except lineitem. pyarrow rewrites the rest (string, decimals as FIXED_LEN_BYTE_ARRAY).
Skipped when OUTDIR/.done holds SF.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
# files per table in the `many` layout
MANY_FILES = {"region": 1, "nation": 1, "supplier": 2, "customer": 4, "part": 4,
              "partsupp": 4, "orders": 6, "lineitem": 8}
HIVE_KEYS = {"lineitem": "l_returnflag", "orders": "o_orderstatus"}
SINGLE_LINEITEM_ROW_GROUP = 100_000
MANY_ROW_GROUP = 20_000


def tpchgen_cli():
    exe = shutil.which("tpchgen-cli")
    if exe is None:  # pip's script folder may not be on PATH
        exe = os.path.join(sysconfig.get_path("scripts"), "tpchgen-cli")
    if not os.path.exists(exe):
        sys.exit("gen_tpch: tpchgen-cli not found; run scripts/setup.sh")
    return exe


def plain_strings(table):
    """tpchgen's files say string_view in their Arrow schema; files we rewrite say string."""
    fields = [pa.field(f.name, pa.string(), f.nullable) if f.type == pa.string_view() else f
              for f in table.schema]
    return table.cast(pa.schema(fields))


def write(table, path, row_group_size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size, compression="snappy")


def split(table, n):
    """n contiguous slices of nearly equal size (fewer when the table is tiny)."""
    n = max(1, min(n, table.num_rows))
    step = -(-table.num_rows // n)
    return [table.slice(i * step, step) for i in range(n)]


def write_many(table, folder, n):
    for i, part in enumerate(split(table, n)):
        write(part, os.path.join(folder, f"part-{i}.parquet"), MANY_ROW_GROUP)


def generate(sf, outdir):
    raw = tempfile.mkdtemp(prefix="raw-", dir=outdir)
    try:
        subprocess.run([tpchgen_cli(), "parquet", "-s", str(sf), "-o", raw, "-q"], check=True)
        for name in TABLES:
            src = os.path.join(raw, f"{name}.parquet")
            table = plain_strings(pq.read_table(src))
            # single: tpchgen's own file, but lineitem rewritten with fixed-size row groups
            single = os.path.join(outdir, "single", f"{name}.parquet")
            if name == "lineitem":
                write(table, single, SINGLE_LINEITEM_ROW_GROUP)
            else:
                os.makedirs(os.path.dirname(single), exist_ok=True)
                shutil.copyfile(src, single)
            # many
            many = os.path.join(outdir, "many", name)
            write_many(table, many, MANY_FILES[name])
            # hive
            hive = os.path.join(outdir, "hive", name)
            key = HIVE_KEYS.get(name)
            if key is None:
                shutil.copytree(many, hive)
                continue
            for value in sorted(pc.unique(table[key]).to_pylist()):
                rows = table.filter(pc.equal(table[key], value)).drop_columns([key])
                write_many(rows, os.path.join(hive, f"{key}={value}"), 2)
    finally:
        shutil.rmtree(raw)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sf, outdir = sys.argv[1], os.path.abspath(sys.argv[2])
    done = os.path.join(outdir, ".done")
    if os.path.exists(done) and open(done).read().strip() == sf:
        print(f"gen_tpch: SF {sf} already in {outdir}")
        return
    os.makedirs(outdir, exist_ok=True)
    for name in ["single", "many", "hive"] + [d for d in os.listdir(outdir) if d.startswith("raw-")]:
        shutil.rmtree(os.path.join(outdir, name), ignore_errors=True)
    if os.path.exists(done):
        os.remove(done)
    start = time.time()
    generate(sf, outdir)
    with open(done, "w") as f:
        f.write(sf + "\n")
    print(f"gen_tpch: SF {sf} in {outdir} ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
