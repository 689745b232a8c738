"""The data sets, generated on first use under ~/.cache/quiver-data (QUIVER_BENCH_DATA moves it).

tpch(sf):        scripts/gen_tpch.py's layouts single/, many/, hive/ in tpch-sf<SF>/ (the folder
                 the end-to-end tests use too).
split16(sf):     TPC-H lineitem cut into 16 files of equal row count (row groups of at most
                 100,000 rows, as in single/lineitem.parquet), in split16-sf<SF>/lineitem/.
small_files(n):  n small files in a hive layout, smallfiles-<n>/events/date=YYYY-MM-DD/
                 part-K-NNNNN.parquet: four files a day from 2024-01-01, 1,000 rows each
                 (id, user_id, amount, category); the date lives only in the path.
day_files(n):    n files in dayfiles-<n>/days/fNNNNN.parquet, one day each from 2024-01-01 (date,
                 id, value; 1,000 rows), days dealt to names in a shuffled order: no name or
                 folder tells a file's date (the persistent index's scenario).
A folder is complete when its .done marker exists; generation writes to a temporary folder first.
"""
import datetime
import functools
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.environ.get("QUIVER_BENCH_DATA", os.path.expanduser("~/.cache/quiver-data"))
SPLIT_FILES = 16
ROW_GROUP = 100_000
SMALL_FILE_ROWS = 1_000
FILES_PER_DAY = 4
FIRST_DAY = datetime.date(2024, 1, 1)
CATEGORIES = ["books", "games", "garden", "home", "music", "sports", "tools", "toys"]


@functools.cache
def tpch(sf):
    root = os.path.join(ROOT, f"tpch-sf{sf}")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_tpch.py"), sf, root],
                   check=True)
    return root


def tpchgen(sf):
    """TPC-H as tpchgen-cli writes it (parquet-rs, decimals as INT64, one file per table)."""
    def write(out):
        subprocess.run(["tpchgen-cli", "parquet", "-s", sf, "--output-dir", out], check=True)
    return generate(f"tpchgen-sf{sf}", f"tpchgen-cli parquet -s {sf}", write)


def tpcds(sf):
    """TPC-DS as tpcgen-cli writes it: one Parquet file per table (24 tables)."""
    def write(out):
        subprocess.run(["tpcgen-cli", "tpcds", "parquet", "-s", sf, "--output-dir", out],
                       check=True)
    return generate(f"tpcds-sf{sf}", f"tpcgen-cli tpcds parquet -s {sf}", write)


def split16(sf):
    source = os.path.join(tpch(sf), "single", "lineitem.parquet")
    stamp = os.stat(source)
    key = f"{source} {stamp.st_size} {stamp.st_mtime_ns}"
    return generate(f"split16-sf{sf}", key, lambda tmp: _split(source, tmp))


def small_files(n):
    return generate(f"smallfiles-{n}", str(n), lambda tmp: _small_files(n, tmp))


def day_files(n):
    return generate(f"dayfiles-{n}", str(n), lambda tmp: _day_files(n, tmp))


def _day_files(n, out):
    rng = np.random.default_rng(n)
    names = rng.permutation(n)
    os.makedirs(os.path.join(out, "days"))
    for day, name in enumerate(names):
        date = FIRST_DAY + datetime.timedelta(days=int(day))
        table = pa.table({
            "date": pa.array([date] * SMALL_FILE_ROWS, pa.date32()),
            "id": pa.array(np.arange(day * SMALL_FILE_ROWS, (day + 1) * SMALL_FILE_ROWS)),
            "value": pa.array(np.round(rng.uniform(0, 100, SMALL_FILE_ROWS), 2)),
        })
        pq.write_table(table, os.path.join(out, "days", f"f{name:05d}.parquet"))


def parquet_files(folder):
    """Every .parquet file under folder (for evicting them before a cold run)."""
    return [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names
            if f.endswith(".parquet")]


def generate(name, key, write):
    """The folder `name` under ROOT, written by `write(folder)` unless it holds what `key` names."""
    folder = os.path.join(ROOT, name)
    done = os.path.join(folder, ".done")
    if os.path.exists(done):
        with open(done) as f:
            if f.read() == key:
                return folder
    print(f"bench: generating {folder}", flush=True)
    tmp = folder + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write(tmp)
    with open(os.path.join(tmp, ".done"), "w") as f:
        f.write(key)
    shutil.rmtree(folder, ignore_errors=True)
    os.rename(tmp, folder)
    return folder


def _split(source, out):
    """Stream the file into SPLIT_FILES files of equal row count; one file's rows in memory."""
    folder = os.path.join(out, "lineitem")
    os.makedirs(folder)
    reader = pq.ParquetFile(source)
    per_file = -(-reader.metadata.num_rows // SPLIT_FILES)
    pending, count, index = [], 0, 0

    def flush():
        nonlocal pending, count, index
        path = os.path.join(folder, f"part-{index:02d}.parquet")
        pq.write_table(pa.Table.from_batches(pending), path, row_group_size=ROW_GROUP,
                       compression="snappy")
        pending, count, index = [], 0, index + 1

    for batch in reader.iter_batches(batch_size=ROW_GROUP):
        while batch.num_rows:
            take = min(per_file - count, batch.num_rows)
            pending.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == per_file:
                flush()
    if pending:
        flush()


def _small_files(n, out):
    rng = np.random.default_rng(n)
    categories = pa.array(CATEGORIES)
    for i in range(n):
        day = FIRST_DAY + datetime.timedelta(days=i // FILES_PER_DAY)
        folder = os.path.join(out, "events", f"date={day.isoformat()}")
        os.makedirs(folder, exist_ok=True)
        table = pa.table({
            "id": pa.array(np.arange(i * SMALL_FILE_ROWS, (i + 1) * SMALL_FILE_ROWS)),
            "user_id": pa.array(rng.integers(1, 10_000, SMALL_FILE_ROWS)),
            "amount": pa.array(np.round(rng.uniform(0, 500, SMALL_FILE_ROWS), 2)),
            "category": categories.take(rng.integers(0, len(CATEGORIES), SMALL_FILE_ROWS)),
        })
        path = os.path.join(folder, f"part-{i % FILES_PER_DAY}-{i:05d}.parquet")
        pq.write_table(table, path, compression="snappy")
