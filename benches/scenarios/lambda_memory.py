"""Scenario `lambda_memory`: scenario memory_limit's sort and group-by over TPC-H lineitem, on
Lambda workers whose function has 512 MB. The real coordinator and worker functions run under
cargo-lambda's emulator (dev profile, as the tests build them), told that memory
(AWS_LAMBDA_FUNCTION_MEMORY_SIZE), and read lineitem from MinIO directly. A worker's memory
limit is then its default, 80% of the function's; a sort spills to the temporary folder, and
an output bigger than a response is encoded to disk before it is put under the result prefix.

Nothing here enforces the 512 MB, as Lambda would: each worker measures its own peak resident
memory (VmHWM, reset when an invocation starts) and the coordinator reports the largest. With
1 worker, that worker sorts all of lineitem; with 4, a quarter each. The answer is checked
against DuckDB over the local file (row count and checksums; for the sort, that the rows come
in order) before anything counts. Times are the whole invoke (the coordinator merges and hands
the answer over through S3) and the slowest worker's, on this machine's 2 cores shared by every
function instance.
"""
import importlib
import os

import duckdb
import numpy as np

from benches import data, objectstore, report
from benches.engines import EngineError
from benches.scenarios import memory_limit

# `lambda` is a Python keyword: its module is imported by name.
lambda_workers = importlib.import_module("benches.scenarios.lambda")

NAME = "lambda_memory"
TITLE = "Sort and group-by on 512 MB Lambda workers (emulated)"
FUNCTION_MB = 512
WORKERS = (1, 4)
KEY = "lineitem.parquet"


def run(bench):
    sf = bench.mode.sf
    local = os.path.join(data.tpch(sf), "single", "lineitem.parquet")
    key = f"tpch-sf{sf}/single/{KEY}"
    rows, failure = [], None
    try:
        with lambda_workers.emulated(bench, {key: local}, "lambda-memory-emulator.log",
                                     memory_mb=FUNCTION_MB) as (endpoint, emulator):
            source = f"read_parquet('{endpoint.s3_url(key)}')"
            for workers in WORKERS:
                for work, sql in memory_limit.WORK.items():
                    row = [work, f"SF {sf}", workers, FUNCTION_MB]
                    row += _run(emulator, work, sql, source, local, workers)
                    rows.append(row)
                    print(f"  {NAME} {work}, {workers} worker(s): {row[4:]}", flush=True)
    except objectstore.ServerError as e:
        failure = str(e)
        print(f"  {NAME}: not run (further): {failure}", flush=True)
    if not rows:
        return report.Section(NAME, TITLE, f"Not run: {failure}\n", [], [f"not run: {failure}"])
    body = (__doc__.split("\n\n", 1)[1] + "\n"
            + report.table(["work", "data", "workers", "function MB", "largest worker peak MB",
                            "invoke s", "slowest worker s", "checked"], rows)
            + (f"\nFailed: {failure}\n" if failure else ""))
    summary = [f"{r[0]} of SF {sf} lineitem on {r[2]} worker(s) of {FUNCTION_MB} MB: the "
               f"largest peaked at {r[4]} MB" for r in rows]
    return report.Section(NAME, TITLE, body, [], summary)


def _run(emulator, work, sql, source, local, workers):
    """The cells of one run: the largest worker's peak MB, the invoke's seconds, the slowest
    worker's, the check."""
    settings = {"lambda.workers": str(workers), "lambda.retries": "0"}
    try:
        answer, seconds, metrics, _ = emulator.query_table(
            sql.format(source=source), settings, lambda_workers.NoCounter())
    except EngineError as e:
        return ["failed", "-", "-", f"**failed**: {str(e)[:300]}"]
    peak = (metrics.get("workers") or {}).get("peak_memory", 0) / 2**20
    slowest = metrics["log"].get("slowest_ms")
    return [f"{peak:.0f}", report.seconds(seconds),
            report.seconds(slowest / 1e3) if slowest else "-",
            _check(work, answer, sql.format(source=f"read_parquet('{local}')"))]


def _check(work, answer, local_sql):
    """"yes" when the answer has DuckDB's count and checksums (and, for the sort, its order)."""
    check = memory_limit.CHECK[work]
    ours = duckdb.sql(f"SELECT {check} FROM answer").fetchall()
    theirs = duckdb.sql(f"SELECT {check} FROM ({local_sql})").fetchall()
    if ours != theirs:
        return f"**no**: {ours} vs {theirs}"
    if work == "sort" and not _in_order(answer):
        return "**no**: rows out of order"
    return "yes"


def _in_order(table):
    """Whether rows come by (l_shipdate, l_orderkey, l_linenumber), as the sort asks."""
    keys = [table.column(c).to_numpy().astype("int64") if c != "l_shipdate"
            else table.column(c).cast("int32").to_numpy().astype("int64")
            for c in ("l_shipdate", "l_orderkey", "l_linenumber")]
    later = np.zeros(len(table) - 1, dtype=bool)   # some key already rose
    for key in keys:
        step = np.diff(key)
        if np.any((step < 0) & ~later):
            return False
        later |= step > 0
    return True
