"""Scenario `lambda_joins`: what the Lambda workers send back to the coordinator for each of
the 22 TPC-H queries, in three places: every join on the coordinator
(`quiver.broadcast_bytes = 0`, `lambda.exchange_joins = false`: how Quiver ran before
2026-11-25); small build sides on the workers (they travel inside the probe side's fragment,
see crates/quiver-core/src/exec/broadcast.rs; no exchange, as on 2026-11-25); and the default,
where joins of two big scans also run on the workers, through an exchange under the result
prefix (crates/quiver-core/src/exec/exchange.rs). "MB exchanged" is what the workers wrote to
and read from the exchange's objects; the ratio is the default's bytes out over the first's.

The real coordinator and worker functions run under cargo-lambda's emulator, built with the
dev profile (optimised, as the tests build them) and read TPC-H (one file per table) from MinIO directly. Every query is a direct
invoke of the coordinator with `lambda.workers = 4`; its answer is checked against DuckDB's
over the local files before anything counts. Rows and bytes out are the workers' own counts
(Arrow IPC, before base64), summed over every scan of the query; the time is the whole
invoke, one run after a warm-up query, on this machine's 2 cores shared by every function
instance, so it shows how work moved, not Lambda's speed.
"""
import importlib
import os

from tpch.tables import QUERIES, TABLES, query_sql

from benches import data, measure, objectstore, report
from benches.engines import EngineError

# `lambda` is a Python keyword: its module is imported by name.
lambda_workers = importlib.import_module("benches.scenarios.lambda")

NAME = "lambda_joins"
TITLE = "Joins on the Lambda workers: what the workers send back"
PLACES = {"coordinator": {"quiver.broadcast_bytes": "0", "lambda.exchange_joins": "false"},
          "broadcast": {"lambda.exchange_joins": "false"},
          "default": {}}
SETTINGS = {"lambda.workers": "4", "lambda.retries": "0"}


def run(bench):
    sf = bench.mode.sf
    folder = os.path.join(data.tpch(sf), "single")
    duckdb = next(e for e in bench.engines if e.name == "duckdb")
    local_views = [s for t in TABLES for s in duckdb.view(t, os.path.join(folder, f"{t}.parquet"))]
    rows, failure = [], None
    files = {f"tpch-sf{sf}/single/{t}.parquet": os.path.join(folder, f"{t}.parquet")
             for t in TABLES}
    try:
        with lambda_workers.emulated(bench, files, "lambda-joins-emulator.log") as (endpoint,
                                                                                    emulator):
            views = "".join(f"CREATE OR REPLACE VIEW {t} AS SELECT * FROM read_parquet("
                            f"'{endpoint.s3_url(f'tpch-sf{sf}/single/{t}.parquet')}');\n"
                            for t in TABLES)
            counter = lambda_workers.NoCounter()
            emulator.query(views + "SELECT count(*) FROM nation", SETTINGS, counter)  # warm-up
            for n in QUERIES:
                sql = query_sql(n)
                expected = duckdb.run(local_views, sql).rows
                row = [f"q{n:02d}"]
                outcomes = {}
                for place, extra in PLACES.items():
                    try:
                        result = emulator.query(views + sql, {**SETTINGS, **extra}, counter)
                        problem = measure.check(expected, result.rows)
                    except EngineError as e:
                        result, problem = None, str(e)
                    outcomes[place] = (result, problem)
                row += _cells(outcomes)
                rows.append(row)
                print(f"  {NAME} q{n:02d}: " + " | ".join(str(c) for c in row[1:]), flush=True)
    except objectstore.ServerError as e:
        failure = str(e)
        print(f"  {NAME}: not run (further): {failure}", flush=True)
    if not rows:
        return report.Section(NAME, TITLE, f"Not run: {failure}\n", [], [f"not run: {failure}"])
    header = (["query"] + [f"MB out ({p})" for p in PLACES] + ["MB exchanged (default)",
              "bytes ratio"] + [f"seconds ({p})" for p in PLACES] + ["check"])
    at = header.index("bytes ratio")
    fell = [r for r in rows if isinstance(r[at], str) and r[at].endswith("x")
            and float(r[at][:-1]) < 0.5]
    body = (__doc__.split("\n\n", 1)[1] + f"\nTPC-H SF {sf}, {len(rows)} queries.\n\n"
            + report.table(header, rows)
            + (f"\nFailed: {failure}\n" if failure else ""))
    summary = [f"{len(fell)} of {len(rows)} TPC-H queries return less than half the bytes "
               f"with joins on the workers (broadcast and exchange)"]
    return report.Section(NAME, TITLE, body, [], summary)


def _cells(outcomes):
    """MB out (each place), MB exchanged (default), the bytes ratio, seconds (each place),
    the check."""
    def workers(place, key):
        result, problem = outcomes[place]
        if result is None or problem:
            return None
        return (result.stats.get("workers") or {}).get(key)

    places = list(PLACES)
    out = [workers(p, "bytes") for p in places]
    exchanged = workers(places[-1], "exchanged")
    seconds = [outcomes[p][0].seconds if outcomes[p][0] is not None else None for p in places]
    ratio = f"{out[-1] / out[0]:.3f}x" if out[0] and out[-1] is not None else "-"
    problems = [f"{p}: {outcomes[p][1][:120]}" for p in places if outcomes[p][1]]
    megabytes = lambda v: f"{v / 1e6:.3f}"  # noqa: E731
    return ([_or_dash(b, megabytes) for b in out] + [_or_dash(exchanged, megabytes), ratio]
            + [report.seconds(s) for s in seconds]
            + ["; ".join(problems) or "equal to DuckDB"])


def _or_dash(value, fmt=str):
    return "-" if value is None else fmt(value)
