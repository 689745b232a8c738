"""Scenario `disk_cache`: what a cache that outlives the process is worth. ClickBench's 43
queries over its one big file (benches/clickbench.py) on MinIO behind the counting proxy (its
latency and bandwidth as scenario s3's), each query run twice, each run a fresh process: for
Quiver the first starts from an empty disk cache and the second reads what the first kept
there (`~/.cache/quiver` by default, a folder of this scenario's here); DuckDB (whose external
file cache lives in memory) and chDB start from nothing both times. Per run: the proxy's GETs
and MB, and the seconds, with answers checked against DuckDB on the local file.

In the tables "cold" is the first run and "hot" the second, both fresh processes.
"""
import os
import shutil
import tempfile

from benches import clickbench, measure, objectstore, report
from benches.engines import EngineError, Quiver, add_s3_peer
from benches.scenarios import s3 as s3_scenario

NAME = "disk_cache"
TITLE = "A disk cache between processes: ClickBench's one file over S3, first and second run"
KINDS = ("cold", "hot")
LABELS = {"cold": "first run", "hot": "second run"}
KEY = "clickbench/hits.parquet"
SKIP_AFTER = 2  # timeouts after which an engine's remaining queries are not run


def run(bench):
    options = bench.options
    local = os.path.join(clickbench.hits(bench.mode.name), "one", "hits.parquet")
    try:
        with objectstore.bucket_behind_proxy(options, {KEY: local}, NAME) as (
                minio, proxy, endpoint):
            folder = tempfile.mkdtemp(prefix="quiver-disk-cache-")
            try:
                engines, unsupported = _engines(bench, endpoint, folder)

                def empty(engine):  # Quiver's first run starts from an empty disk cache
                    if isinstance(engine, Quiver):
                        shutil.rmtree(folder, ignore_errors=True)

                results = _measure_all(bench, NAME, engines, unsupported, local, endpoint,
                                       proxy.counter, minio, KINDS, empty)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    except objectstore.ServerError as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])
    return _section(bench, engines, results, local, options)


def _engines(bench, endpoint, folder):
    """Quiver with its disk cache in `folder`, and the peers that read S3 here."""
    engines, unsupported = [], {}
    for e in bench.engines:
        if isinstance(e, Quiver):
            if e.executor != "datafusion":
                continue
            env = {**endpoint.env(), "QUIVER_DISK_CACHE_BYTES": str(16 << 30),
                   "XDG_CACHE_HOME": folder}
            engines.append(Quiver(e.binary, e.timeout, e.executor, e.args, env, e.name, e.label))
        elif e.name in ("duckdb", "chdb"):
            add_s3_peer(e, engines, unsupported)
    return engines, unsupported


def _measure_all(bench, name, engines, unsupported, local, endpoint, counter, minio, kinds,
                 fresh=lambda engine: None):
    """{query: {engine name: Outcome}} for ClickBench's queries over s3://BUCKET/KEY: for each
    engine MinIO's file evicted and `fresh(engine)` called, then one run per kind, each a
    fresh session, checked against DuckDB on `local`. An engine that timed out on SKIP_AFTER
    queries is not run on the rest (an error each), so one slow engine cannot stall the run.
    Scenario clickbench_s3 shares it (one run: cold)."""
    reference = next(e for e in bench.engines if e.name == "duckdb")
    evict_files = minio.bucket_files(objectstore.BUCKET)
    results, timeouts = {}, dict.fromkeys((e.name for e in engines), 0)
    for label, spellings in clickbench.queries().items():
        try:
            expected = reference.run(reference.view("hits", local), spellings["duckdb"]).rows
        except EngineError as e:
            expected = None
            print(f"  {name} {label}: DuckDB on the local file failed: {e}", flush=True)
        outcomes = {}
        for e in engines:
            if e.name in unsupported:
                outcomes[e.name] = measure.Outcome("n/a", note=unsupported[e.name])
                continue
            if timeouts[e.name] >= SKIP_AFTER:
                outcomes[e.name] = measure.Outcome(
                    "error", note=f"not run: timed out on {SKIP_AFTER} queries before")
                continue
            fresh(e)
            bench.cache.evict(evict_files)
            outcomes[e.name] = _runs(e, e.s3_view("hits", KEY, endpoint), spellings[e.name],
                                     expected, clickbench.KEYS.get(label), counter, kinds)
            if outcomes[e.name].note.startswith("timed out"):
                timeouts[e.name] += 1
        cells = "  ".join(f"{e.name} {s3_scenario._progress(outcomes[e.name], kinds)}"
                          for e in engines)
        print(f"  {name} {label}: {cells}", flush=True)
        results[label] = outcomes
    return results


def _runs(engine, setup, sql, expected, keys, counter, kinds):
    """One run per kind, each a fresh session (for Quiver a fresh process), all checked."""
    try:
        runs = [engine.session_runs(setup, sql, count=1, counter=counter)[0] for _ in kinds]
    except EngineError as e:
        return measure.Outcome("error", note=str(e))
    stats = {kind: result.server for kind, result in zip(kinds, runs)}
    stats["profile"] = runs[-1].stats
    if expected is None:
        return measure.Outcome("unchecked", stats=stats)
    for kind, result in zip(kinds, runs):
        wrong = measure.check(expected, result.rows, keys)
        if wrong is not None:
            where = f"{LABELS[kind]}: " if len(kinds) > 1 else ""
            return measure.Outcome("wrong", note=where + wrong, stats=stats)
    return measure.Outcome("ok", stats=stats, **{k: r.seconds for k, r in zip(kinds, runs)})


def _section(bench, engines, results, local, options):
    base = next(e for e in engines if e.name == "quiver")
    peers = [e for e in engines if e is not base
             and not all(o[e.name].status == "n/a" for o in results.values())]
    cap = (f"{options.s3_bandwidth:g} MB/s per connection" if options.s3_bandwidth
           else "no bandwidth cap")
    totals_table, totals = report.request_totals(results, engines, "engine", KINDS, LABELS)
    body = (
        f"`{local}` ({os.path.getsize(local) / 1e6:.0f} MB, "
        f"{clickbench.ROWS[bench.mode.name]:,} rows) as `s3://{objectstore.BUCKET}/{KEY}` on "
        f"MinIO, reached through the counting proxy: **{options.s3_latency:g} ms before each "
        f"request**, {cap}. Each query runs twice, each run a fresh process (DuckDB, chDB: a "
        f"fresh connection), MinIO's file evicted from the page cache before the first. "
        f"Quiver's disk cache is emptied before the first run; its second run reads what the "
        f"first kept. In the tables, cold is the first run and hot the second.\n\n"
        + "### First run: seconds\n\n" + report.time_table(results, engines, "cold")
        + "\n### Second run: seconds\n\n" + report.time_table(results, engines, "hot")
        + "\n### GETs and MB, counted by the proxy (queries each engine got right)\n\n"
        + totals_table
        + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
        + report.ratio_table(results, base, peers, KINDS)
        + "\n### Notes\n\n" + report.notes(results, engines))
    summary = report.ratio_lines(results, base, peers, KINDS)
    for e in engines:
        if (e.name, "cold") in totals:
            (fg, fm), (sg, sm) = totals[(e.name, "cold")], totals[(e.name, "hot")]
            summary.append(f"{e.label}: {fg} GETs / {fm:.1f} MB first run, {sg} GETs / "
                           f"{sm:.1f} MB second run")
    return report.Section(NAME, TITLE, body, [], summary)
