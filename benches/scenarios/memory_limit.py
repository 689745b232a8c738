"""Scenario 8: bounded memory. A sort and a group-by over TPC-H lineitem written to Parquet
with a memory limit (Quiver's `quiver.memory_limit`, DuckDB's `memory_limit`, both 256 MB)
and without; then `SELECT * FROM lineitem` exported to CSV and to Parquet at SF 0.1 and at
the run's scale factor (Quiver streams rows to its writer; DuckDB's COPY).

Each run is a fresh process under `/usr/bin/time`: peak RSS and wall time, one run, the input
in the page cache. Quiver's outputs are checked against DuckDB's by row count and a checksum.
chDB and DataFusion are left out: this is about what each engine does under its own limit.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import duckdb

from benches import data, report
from benches.memory import TIME

NAME = "memory_limit"
TITLE = "Bounded memory"
LIMIT = "256MB"  # 256,000,000 bytes in both engines

SOURCE = "read_parquet('{path}')"
WORK = {
    "sort": "SELECT * FROM {source} ORDER BY l_shipdate, l_orderkey, l_linenumber",
    "group-by": ("SELECT l_orderkey, sum(l_quantity) AS quantity, avg(l_extendedprice) AS price,"
                 " count(*) AS n FROM {source} GROUP BY l_orderkey"),
}
EXPORT = "SELECT * FROM {source}"
# What both engines' outputs must agree on.
CHECK = {"sort": "count(*), sum(l_orderkey), sum(l_linenumber)",
         "group-by": "count(*), sum(l_orderkey), sum(n)",
         "export": "count(*), sum(l_orderkey), sum(l_linenumber)"}

# DuckDB in a fresh interpreter: the statements are its arguments.
_DUCKDB = """
import sys, duckdb
con = duckdb.connect()
for statement in sys.argv[1:]:
    con.execute(statement)
"""


def run(bench):
    if not os.access(TIME, os.X_OK):
        return report.Section(NAME, TITLE, f"Not run: {TIME} is missing.\n")
    quiver = bench.base.binary
    scratch = tempfile.mkdtemp(prefix="quiver-memory-")
    rows, summary = [], []
    try:
        lineitem = os.path.join(data.tpch(bench.mode.sf), "single", "lineitem.parquet")
        for work, sql in WORK.items():
            for limited in (True, False):
                measured = _pair(quiver, scratch, sql.format(source=SOURCE.format(path=lineitem)),
                                 "parquet", limited, CHECK[work])
                rows.append([work, f"SF {bench.mode.sf}", "parquet",
                             LIMIT if limited else "none", *measured])
                print(f"  {work} limit={LIMIT if limited else 'none'}: {measured}", flush=True)
        for sf in sorted({"0.1", bench.mode.sf}, key=float):
            path = os.path.join(data.tpch(sf), "single", "lineitem.parquet")
            for fmt in ("csv", "parquet"):
                measured = _pair(quiver, scratch, EXPORT.format(source=SOURCE.format(path=path)),
                                 fmt, False, CHECK["export"])
                rows.append(["export", f"SF {sf}", fmt, "none", *measured])
                print(f"  export SF {sf} {fmt}: {measured}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    body = (f"TPC-H lineitem (`single` layout), one fresh process per cell, input in the page "
            f"cache; peak RSS from `/usr/bin/time -f %M` (DuckDB's includes the Python "
            f"interpreter, about 60 MB). Limit: `quiver.memory_limit` / DuckDB `memory_limit` = "
            f"{LIMIT}; both spill to a temporary folder. \"checked\": Quiver's output has "
            f"DuckDB's row count and checksum ({'; '.join(f'{k}: {v}' for k, v in CHECK.items())})."
            f"\n\n" + report.table(
                ["work", "data", "to", "limit", "Quiver peak MB", "DuckDB peak MB",
                 "Quiver s", "DuckDB s", "checked"], rows))
    for row in rows:
        if row[3] != "none" or row[0] == "export":
            summary.append(f"{row[0]} {row[1]} to {row[2]}, limit {row[3]}: Quiver {row[4]} MB "
                           f"in {row[6]} s, DuckDB {row[5]} MB in {row[7]} s")
    return report.Section(NAME, f"{TITLE}: spilling under {LIMIT}, streamed exports", body,
                          [], summary)


def _pair(quiver, scratch, sql, fmt, limited, check):
    """(Quiver MB, DuckDB MB, Quiver s, DuckDB s, checked) for one query to one format."""
    ours = os.path.join(scratch, f"quiver.{fmt}")
    theirs = os.path.join(scratch, f"duckdb.{fmt}")
    spill = os.path.join(scratch, "spill")
    args = [quiver, "query", "--format", fmt, "--output", ours]
    if limited:
        args += ["--set", f"quiver.memory_limit={LIMIT}"]
    try:
        q_mb, q_s = _measure([*args, sql], env={**os.environ, "TMPDIR": spill})
    except RuntimeError as e:  # reported in the table, the other cells still run
        lines = str(e).splitlines()
        failure = next((l for l in lines if l.lower().startswith("error")), lines[-1])[:300]
        q_mb = q_s = None
    else:
        failure = None
    options = "FORMAT parquet" if fmt == "parquet" else "FORMAT csv, HEADER"
    statements = [f"SET temp_directory = '{spill}'"]
    if limited:
        statements.append(f"SET memory_limit = '{LIMIT}'")
    statements.append(f"COPY ({sql}) TO '{theirs}' ({options})")
    d_mb, d_s = _measure([sys.executable, "-c", _DUCKDB, *statements])
    if failure is not None:
        os.remove(theirs)
        return ("failed", f"{d_mb:.0f}", "failed", report.seconds(d_s), f"**Quiver failed**: {failure}")
    checked = _same(ours, theirs, fmt, check)
    for path in (ours, theirs):
        os.remove(path)
    return (f"{q_mb:.0f}", f"{d_mb:.0f}", report.seconds(q_s), report.seconds(d_s), checked)


def _measure(args, env=None):
    """Peak RSS (MB) and wall time (s) of one process; fails loudly on an error."""
    os.makedirs(env["TMPDIR"] if env else tempfile.gettempdir(), exist_ok=True)
    started = time.time()
    proc = subprocess.run([TIME, "-f", "peak-kb %M", *args], capture_output=True, text=True,
                          env=env)
    took = time.time() - started
    peak = next((line for line in reversed(proc.stderr.splitlines())
                 if line.startswith("peak-kb ")), None)
    if proc.returncode != 0 or peak is None:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return int(peak.split()[1]) / 1024, took


def _same(ours, theirs, fmt, check):
    read = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    a, b = (duckdb.sql(f"SELECT {check} FROM {read}('{path}')").fetchall()
            for path in (ours, theirs))
    return "yes" if a == b else f"**no**: {a} vs {b}"
