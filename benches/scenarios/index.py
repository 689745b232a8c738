"""Scenario 7: the story's query over many small files on S3, with and without the index.

N one-day files (2,000; 500 with --quick, 5,000 with --full; benches/data.py day_files) whose
days are dealt to their names in a shuffled order, so no glob or name rules a file out, on
MinIO behind the counting proxy of scenario 3 (--s3-latency ms before each request,
--s3-bandwidth per connection). Two queries over `s3://bucket/days-N/*.parquet`:

- "1% of the files": `count(*)` and `sum(value)` where `date` is in the last 1% of the days;
- "whole table": `count(*)`, `min(date)`, `max(date)`.

Engines: Quiver with its index (`quiver index build` once, untimed, before the runs: it writes
`days-N/_quiver_index`, which queries find by themselves), Quiver with `quiver.index=off`,
DuckDB (httpfs) and chDB (s3()). Cold is a fresh session with MinIO's files evicted; hot the
same query again in that session. Requests and bytes are the proxy's counts.
"""
import os
import subprocess

from benches import data, measure, objectstore, report
from benches.engines import Quiver, add_s3_peer
from benches.scenarios import s3 as s3_scenario

NAME = "index"
TITLE = "The persistent index: a filter over many files on S3, cold and hot"
KINDS = ("cold", "hot")
FILES = {"quick": 500, "default": 2000, "full": 5000}
NO_INDEX, NO_INDEX_LABEL = "quiver-noindex", "Quiver, index off"


def run(bench):
    options = bench.options
    n = FILES.get(bench.mode.name, FILES["default"])
    root = data.day_files(n)
    latency, bandwidth = options.s3_latency / 1e3, options.s3_bandwidth * 1e6
    prefix = f"days-{n}/"
    objects = {prefix + f: os.path.join(root, "days", f)
               for f in sorted(os.listdir(os.path.join(root, "days")))}
    first = data.FIRST_DAY.toordinal()
    cut = data.datetime.date.fromordinal(first + n - max(1, n // 100)).isoformat()
    queries = {
        "1% of the files": f"SELECT count(*) AS n, sum(value) AS s FROM days "
                           f"WHERE date >= '{cut}'",
        "whole table": "SELECT count(*) AS n, min(date) AS lo, max(date) AS hi FROM days",
    }
    try:
        with objectstore.bucket_behind_proxy(options, objects, NAME) as (minio, proxy, endpoint):
            engines, unsupported = _engines(bench, endpoint)
            index = _build_index(engines, endpoint, prefix)
            results = _measure_all(bench, engines, unsupported, queries, prefix, root,
                                   endpoint, proxy.counter, minio)
    except objectstore.ServerError as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])
    return _section(engines, results, queries, n, latency, bandwidth, index)


def _engines(bench, endpoint):
    """Quiver (index auto) and Quiver with the index off, then the peers over S3."""
    engines, unsupported = [], {}
    for e in bench.engines:
        if isinstance(e, Quiver):
            if e.name != "quiver":
                continue
            env = endpoint.env()
            engines.append(Quiver(e.binary, e.timeout, e.executor, e.args, env, e.name,
                                  "Quiver, with index"))
            engines.append(Quiver(e.binary, e.timeout, e.executor,
                                  e.args + ["--set", "quiver.index=off"], env, NO_INDEX,
                                  NO_INDEX_LABEL))
        elif e.name in ("duckdb", "chdb"):
            add_s3_peer(e, engines, unsupported)
    return engines, unsupported


def _build_index(engines, endpoint, prefix):
    """`quiver index build` over the files (untimed); its report, for the notes."""
    quiver = next(e for e in engines if e.name == "quiver")
    glob = endpoint.s3_url(prefix + "*.parquet")
    proc = subprocess.run([quiver.binary, "index", "build", glob], capture_output=True,
                          text=True, env={**os.environ, **quiver.env}, timeout=quiver.timeout)
    if proc.returncode != 0:
        raise objectstore.ServerError(f"quiver index build failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _measure_all(bench, engines, unsupported, queries, prefix, root, endpoint, counter, minio):
    reference = next(e for e in bench.engines if e.name == "duckdb")
    local = reference.view("days", os.path.join(root, "days", "*.parquet"))
    evict_files = minio.bucket_files(objectstore.BUCKET)
    results = {}
    for label, sql in queries.items():
        expected = reference.run(local, sql).rows
        outcomes = {}
        for e in engines:
            if e.name in unsupported:
                outcomes[e.name] = measure.Outcome("n/a", note=unsupported[e.name])
                continue
            setup = e.s3_view("days", prefix + "*.parquet", endpoint)
            outcomes[e.name] = s3_scenario._measure(e, setup, sql, expected, None, counter,
                                                    lambda: bench.cache.evict(evict_files))
        cells = "  ".join(f"{e.name} {s3_scenario._progress(outcomes[e.name])}"
                          for e in engines)
        print(f"  {NAME} {label}: {cells}", flush=True)
        results[label] = outcomes
    return results


def _section(engines, results, queries, n, latency, bandwidth, index):
    base = engines[0]
    peers = [e for e in engines[1:]
             if not all(o[e.name].status == "n/a" for o in results.values())]
    cap = f"{bandwidth / 1e6:g} MB/s per connection" if bandwidth else "no bandwidth cap"
    listed = "".join(f"- {q}: `{sql}`\n" for q, sql in queries.items())
    pruned = "".join(
        f"- {q}: Quiver with index, hot run's --profile: `files: "
        f"{o['quiver'].stats.get('profile', {}).get('files', '?')}`\n"
        for q, o in results.items() if o["quiver"].ok)
    body = (
        f"{n:,} files of one day each, names shuffled, on MinIO behind the counting proxy "
        f"(**{latency * 1e3:g} ms before each request**, {cap}). The index was built once "
        f"before the runs (untimed):\n\n```\n{index}\n```\n\n" + listed
        + "\n### Cold: seconds\n\n" + report.time_table(results, engines, "cold")
        + "\n### Hot: seconds\n\n" + report.time_table(results, engines, "hot")
        + "\n### Requests and bytes, counted by the proxy\n\n"
        + s3_scenario._requests_table(results, engines)
        + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
        + report.ratio_table(results, base, peers, KINDS)
        + "\n### Notes\n\n" + pruned + report.notes(results, engines))
    summary = report.ratio_lines(results, base, peers, KINDS)
    for q, o in results.items():
        gets = ", ".join(f"{e.label} {s3_scenario._count(o[e.name], 'cold')}"
                         for e in engines if o[e.name].ok)
        summary.append(f"{q}, cold GETs: {gets}")
    return report.Section(NAME, f"{TITLE} ({n:,} files, {latency * 1e3:g} ms)", body, [],
                          summary)
