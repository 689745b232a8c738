"""Scenario `clickbench_s3`: ClickBench over S3 (MinIO behind the proxy), cold, one big file:
time, GETs and bytes beside DuckDB's httpfs and chDB (and DataFusion), where Quiver should be
faster than both.

ClickBench's 43 queries over the one file of scenario `clickbench` (benches/clickbench.py: 23
row groups), put on MinIO as scenario `disk_cache` puts it, every engine reaching it only
through the counting proxy of scenario `s3` (--s3-latency ms before each request,
--s3-bandwidth per connection). Every run is cold: a fresh session (a new `quiver` process,
its disk cache off; a new connection for the others), MinIO's file evicted from the page cache
just before. Per query and engine: the seconds, and the GETs and bytes the proxy counted for
that run; answers checked against DuckDB on the local file (where a LIMIT may keep either of
tied groups, the counts that order them: clickbench.KEYS). A run that fails or times out
(--timeout) is an error for that query; an engine that timed out on two queries is not run on
the rest (disk_cache._measure_all).
"""
import os

from benches import clickbench, objectstore, report
from benches.scenarios import disk_cache
from benches.scenarios import s3 as s3_scenario

NAME = "clickbench_s3"
TITLE = "ClickBench over S3 (MinIO behind the proxy), cold, one big file: time, GETs and bytes"
KINDS = ("cold",)
RIVALS = ("duckdb", "chdb")  # the "faster than both"


def run(bench):
    options = bench.options
    local = os.path.join(clickbench.hits(bench.mode.name), "one", "hits.parquet")
    engines = []
    try:
        with objectstore.bucket_behind_proxy(options, {disk_cache.KEY: local}, NAME) as (
                minio, proxy, endpoint):
            engines, unsupported = s3_scenario._engines(bench, endpoint)
            engines = [e for e in engines if e.name != s3_scenario.NOCOALESCE]
            results = disk_cache._measure_all(bench, NAME, engines, unsupported, local,
                                              endpoint, proxy.counter, minio, KINDS)
    except objectstore.ServerError as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])
    finally:
        for e in engines:  # workers started for this scenario only (DuckDB with httpfs)
            if e not in bench.engines:
                e.close()
    return _section(bench, engines, results, local)


def _requests_table(results, engines):
    """Queries down; each engine's GETs and MB for its run, counted by the proxy, across."""
    header = ["query"] + [f"{e.label} {what}" for e in engines for what in ("GETs", "MB")]
    rows = []
    for q, outcomes in results.items():
        row = [q]
        for e in engines:
            o = outcomes[e.name]
            row += ([s3_scenario._count(o, "cold"), f"{s3_scenario._megabytes(o, 'cold'):.1f}"]
                    if o.stats.get("cold") else [report.STATUS_CELL.get(o.status, "-"), "-"])
        rows.append(row)
    return report.table(header, rows)


def _verdict(results, base, peers):
    """Whether the base is faster than DuckDB's httpfs and chDB, cold, by total and geomean."""
    rivals = [p for p in peers if p.name in RIVALS]
    ratios = [(p, report.ratio(results, base.name, p.name, "cold")) for p in rivals]
    holds = len(rivals) == len(RIVALS) and all(
        n and total < 1 and gm < 1 for _, (total, gm, n) in ratios)
    parts = "; ".join(f"{base.label} / {p.label} {report.times(total)} total, "
                      f"{report.times(gm)} geomean ({n} queries)" for p, (total, gm, n) in ratios)
    return (f"{base.label} faster than both DuckDB (httpfs) and chDB, cold: "
            f"**{'yes' if holds else 'no'}** ({parts or 'neither ran'})")


def _section(bench, engines, results, local):
    options = bench.options
    base = next((e for e in engines if e.name == "quiver"), engines[0])
    peers = [e for e in engines if e is not base
             and not all(o[e.name].status == "n/a" for o in results.values())]
    cap = (f"{options.s3_bandwidth:g} MB/s per connection" if options.s3_bandwidth
           else "no bandwidth cap")
    rows = clickbench.ROWS[bench.mode.name]
    totals_table, totals = report.request_totals(results, engines, "engine", KINDS)
    verdict = _verdict(results, base, peers)
    body = (
        f"ClickBench's 43 queries (scenario `clickbench`'s spellings) over `{local}` "
        f"({os.path.getsize(local) / 1e6:.0f} MB, {rows:,} rows, "
        f"{clickbench.ONE_FILE_ROW_GROUPS} row groups) as "
        f"`s3://{objectstore.BUCKET}/{disk_cache.KEY}` on MinIO, reached only through the "
        f"counting proxy: **{options.s3_latency:g} ms before each request**, {cap}. Every run "
        f"is cold: a fresh session (a new `quiver` process, its disk cache off; a new "
        f"connection for the others), MinIO's file evicted from the page cache just before, "
        f"the view created in the run. Each engine reads S3 as in scenario `s3`: Quiver "
        f"`read_parquet('s3://...')` with `AWS_ENDPOINT_URL` and keys in its environment, "
        f"DuckDB httpfs with a path-style secret, chDB `s3()`, DataFusion an `AmazonS3` object "
        f"store. Answers are checked against DuckDB on the local file; a run that fails or "
        f"passes `--timeout` ({options.timeout:g} s) is an error.\n\n{verdict}.\n"
        + "\n### Cold: seconds\n\n" + report.time_table(results, engines, "cold")
        + "\n### GETs and MB per query, counted by the proxy\n\n"
          "GETs are GetObject requests; MB is what the proxy sent, bodies only. Counted for "
          "each run, even when its result was wrong.\n\n" + _requests_table(results, engines)
        + "\nTotals over the queries each engine got right:\n\n" + totals_table
        + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
        + report.ratio_table(results, base, peers, KINDS)
        + "\n### Notes\n\n" + report.notes_or_na(results, engines))
    summary = [verdict] + report.ratio_lines(results, base, peers, KINDS)
    for e in engines:
        if (e.name, "cold") in totals and any(o[e.name].ok for o in results.values()):
            gets, mb = totals[(e.name, "cold")]
            summary.append(f"{e.label}: {gets} GETs / {mb:.1f} MB (queries it got right)")
    title = f"{TITLE} ({rows:,} rows, {options.s3_latency:g} ms, {cap})"
    return report.Section(NAME, title, body, [], summary)
