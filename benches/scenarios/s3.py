"""Scenario 3: cold and hot over a local S3 server, with each engine's requests counted there.

The data goes into a bucket on MinIO (scripts/minio.sh, 127.0.0.1:--minio-port); the engines
reach it only through the counting proxy (tests/servers/s3_proxy.py), which adds --s3-latency
ms before each request and caps each connection at --s3-bandwidth MB/s, so that a request
costs about what it costs against real S3 (tens of ms to the first byte, tens of MB/s per
connection). The proxy counts every request by its S3 API and the bytes it sent; its counts
are reset before and read after each run, so the numbers are the server's, not the engines'.

Queries: TPC-H Q1, Q6, Q12, Q14 on the single-file layout (each with views over only the
tables it reads: lineitem, and orders or part), and the
listing query `SELECT DISTINCT _file` over TPC-H's many-file lineitem (8 files) and over the
small files of scenario 4 (no hive columns). Each engine and query:

- cold: a fresh session (a new `quiver` process; a new connection for the others), MinIO's
  files of the bucket evicted from the page cache just before; setup (the views) included.
- hot: the same query again in the same session, timed alone; whatever the engine caches
  (Quiver: footers and fetched blocks; DuckDB: its external file cache; DataFusion: the
  listing and footers of its external tables) is warm. For Quiver that is a second statement
  in the same process: the run is a process running the query twice, its time is the second
  statement's `time plan` + `time execute` (--profile), its requests the process's count minus
  the cold process's.

Engines: Quiver as is and with coalescing off (`--coalesce-gap 0`: only byte ranges that touch
are merged, so nothing is read that the query does not need); chDB through its s3() table function; DataFusion through an AmazonS3 object store;
DuckDB through httpfs (downloaded at run time; on a closed network DuckDB 1.4.4, for which
PyPI ships httpfs, installed under the data folder: engines.DuckDB.over_s3). Results are checked against DuckDB reading the local copies of
the same files, before any time counts.
"""
import os

from tpch.tables import query_sql

from benches import charts, data, measure, objectstore, report
from benches.engines import EngineError, Quiver, add_s3_peer

NAME = "s3"
TITLE = "Over a local S3 server: cold and hot, requests per engine"
KINDS = ("cold", "hot")
TPCH = {"q01": 1, "q06": 6, "q12": 12, "q14": 14}
TABLES = {1: ["lineitem"], 6: ["lineitem"], 12: ["lineitem", "orders"], 14: ["lineitem", "part"]}
LISTING = "SELECT DISTINCT _file FROM {table} ORDER BY _file"
NOCOALESCE = "quiver-nocoalesce"
NOCOALESCE_LABEL = "Quiver, gap 0"
HOW = {
    "quiver": "`read_parquet('s3://bucket/key')`; `AWS_ENDPOINT_URL` and keys in the "
              "environment (path-style)",
    NOCOALESCE: "the same with `--coalesce-gap 0`: coalescing off, no byte read that the query "
                "does not need; ranges that touch (adjacent column chunks of a row group) still "
                "go in one request",
    "quiver-fragments": "as Quiver, `--executor fragments`",
    "chdb": "`s3('http://proxy/bucket/key', key, secret, 'Parquet')`, `_path`/`_file` its "
            "virtual columns",
    "datafusion": "`AmazonS3(endpoint=proxy, allow_http=True)` registered for `s3://bucket`, "
                  "`CREATE EXTERNAL TABLE ... LOCATION 's3://bucket/key'` (a glob becomes its "
                  "folder); `_file` from `input_file_name()`",
    "duckdb": "httpfs, `CREATE SECRET (TYPE s3, ENDPOINT, URL_STYLE 'path', USE_SSL false)`, "
              "`read_parquet('s3://bucket/key', filename = true)`",
}


def run(bench):
    options = bench.options
    sf, n_small = bench.mode.sf, bench.mode.small_files
    root, small_root = data.tpch(sf), data.small_files(n_small)
    latency, bandwidth = options.s3_latency / 1e3, options.s3_bandwidth * 1e6

    # what goes into the bucket: {key: local path}, and each table as (key glob, local glob)
    prefix, small_prefix = f"tpch-sf{sf}/", f"small-{n_small}/"
    single = sorted({t for needed in TABLES.values() for t in needed})
    objects = {prefix + f"single/{t}.parquet": os.path.join(root, "single", f"{t}.parquet")
               for t in single}
    many = os.path.join(root, "many", "lineitem")
    objects.update({prefix + f"many/lineitem/{f}": os.path.join(many, f)
                    for f in sorted(os.listdir(many)) if f.endswith(".parquet")})
    for path in data.parquet_files(os.path.join(small_root, "events")):
        objects[small_prefix + os.path.relpath(path, small_root).replace(os.sep, "/")] = path
    tables = {t: (prefix + f"single/{t}.parquet", os.path.join(root, "single", f"{t}.parquet"))
              for t in single}
    files_tables = {
        "lineitem_files": (prefix + "many/lineitem/*.parquet", os.path.join(many, "*.parquet")),
        "events": (small_prefix + "events/*/*.parquet",
                   os.path.join(small_root, "events", "*", "*.parquet")),
    }
    queries = {q: (query_sql(n), TABLES[n]) for q, n in TPCH.items()}
    queries["listing, 8 files"] = (LISTING.format(table="lineitem_files"), ["lineitem_files"])
    queries[f"listing, {n_small:,} files"] = (LISTING.format(table="events"), ["events"])

    try:
        with objectstore.bucket_behind_proxy(options, objects, NAME) as (minio, proxy, endpoint):
            engines, unsupported = _engines(bench, endpoint)
            results = _measure_all(bench, engines, unsupported, queries, tables, files_tables,
                                   endpoint, proxy.counter, minio)
    except objectstore.ServerError as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])
    return _section(bench, engines, results, sf, n_small, latency, bandwidth, root, small_root,
                    minio, objects)


def _engines(bench, endpoint):
    """The engines over S3, in order, and {name: reason} for those that cannot run here."""
    engines, unsupported = [], {}
    for e in bench.engines:
        if isinstance(e, Quiver):
            env = endpoint.env()
            engines.append(Quiver(e.binary, e.timeout, e.executor, e.args, env, e.name, e.label))
            if e.name == "quiver":
                engines.append(Quiver(e.binary, e.timeout, e.executor,
                                      e.args + ["--coalesce-gap", "0"], env, NOCOALESCE,
                                      NOCOALESCE_LABEL))
        else:
            add_s3_peer(e, engines, unsupported)
    return engines, unsupported


def _measure_all(bench, engines, unsupported, queries, tables, files_tables, endpoint, counter,
                 minio):
    reference = next(e for e in bench.engines if e.name == "duckdb")
    evict_files = minio.bucket_files(objectstore.BUCKET)
    results = {}
    for label, (sql, needed) in queries.items():
        files = any(t in files_tables for t in needed)
        source = files_tables if files else tables
        local = [s for t in needed for s in reference.view(t, source[t][1], files=files)]
        try:
            expected, problem = reference.run(local, sql).rows, None
        except EngineError as e:
            expected, problem = None, f"DuckDB on the local files failed: {e}"
        outcomes = {}
        for e in engines:
            if e.name in unsupported:
                outcomes[e.name] = measure.Outcome("n/a", note=unsupported[e.name])
                continue
            setup = _unique([s for t in needed for s in e.s3_view(t, source[t][0], endpoint,
                                                                  files=files)])
            outcomes[e.name] = _measure(e, setup, sql, expected, problem, counter,
                                        lambda: bench.cache.evict(evict_files))
        cells = "  ".join(f"{e.name} {_progress(outcomes[e.name])}" for e in engines)
        print(f"  {NAME} {label}: {cells}", flush=True)
        results[label] = outcomes
    return results


def _unique(statements):
    seen, kept = set(), []
    for s in statements:
        key = repr(s)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    return kept


def _measure(engine, setup, sql, expected, problem, counter, evict):
    """Outcome of a cold and a hot run in one session, both checked against `expected`.
    stats: {"cold": server counts, "hot": server counts, "profile": Quiver's last --profile}."""
    evict()
    try:
        cold, hot = engine.session_runs(setup, sql, count=2, counter=counter)
    except EngineError as e:
        return measure.Outcome("error", note=str(e))
    stats = {"cold": cold.server, "hot": hot.server, "profile": hot.stats}
    if expected is None:
        return measure.Outcome("unchecked", note=problem, stats=stats)
    for kind, result in (("cold", cold), ("hot", hot)):
        wrong = measure.check(expected, result.rows)
        if wrong is not None:
            return measure.Outcome("wrong", note=f"{kind} run: {wrong}", stats=stats)
    return measure.Outcome("ok", cold=cold.seconds, hot=hot.seconds, stats=stats)


def _progress(outcome, kinds=KINDS):
    if not outcome.ok:
        return outcome.status
    gets = "/".join(str(_count(outcome, kind, "GetObject")) for kind in kinds)
    times = "/".join(report.seconds(outcome.time(kind)) for kind in kinds)
    return f"{times} s ({gets} GETs)"


def _count(outcome, kind, what="GetObject"):
    """Requests of one S3 API (or "other": every API but GetObject) in a run, or None."""
    counts = outcome.stats.get(kind, {}).get("counts")
    if counts is None:
        return None
    if what == "other":
        return sum(v for k, v in counts.items() if k != "GetObject")
    return counts.get(what, 0)


def _megabytes(outcome, kind):
    sent = outcome.stats.get(kind, {}).get("bytes")
    return None if sent is None else sum(sent.values()) / 1e6


def _requests_table(results, engines):
    """ClickHouse PR 104230's table, per query and engine: requests and bytes, cold and hot."""
    header = ["query", "engine"]
    for kind in KINDS:
        header += [f"{kind} GETs", f"{kind} other", f"{kind} MB"]
    rows = []
    for q, outcomes in results.items():
        for e in engines:
            o = outcomes[e.name]
            row = [q, e.label]
            for kind in KINDS:
                if o.status in ("ok", "wrong", "unchecked") and o.stats.get(kind):
                    row += [_count(o, kind), _count(o, kind, "other"),
                            f"{_megabytes(o, kind):.2f}"]
                else:
                    row += [report.STATUS_CELL.get(o.status, "-")] + ["-", "-"]
            rows.append(row)
    return report.table(header, rows)


def _coalescing_table(results):
    """Quiver with coalescing on against off: GETs and seconds, cold and hot."""
    rows = []
    for q, o in results.items():
        on, off = o.get("quiver"), o.get(NOCOALESCE)
        if on is None or off is None:
            return ""
        row = [q]
        for kind in KINDS:
            row += [f"{_count(on, kind) if on.ok else on.status} / "
                    f"{_count(off, kind) if off.ok else off.status}",
                    f"{report.cell(on, kind)} / {report.cell(off, kind)}"]
        rows.append(row)
    header = ["query", "cold GETs on / off", "cold s on / off", "hot GETs on / off",
              "hot s on / off"]
    return report.table(header, rows)


def _cross_check(results):
    """Quiver's own request count for the hot statement (--profile) against the proxy's."""
    lines = []
    for q, o in results.items():
        for name in ("quiver", NOCOALESCE):
            outcome = o.get(name)
            if outcome is None or not outcome.ok:
                continue
            own = outcome.stats.get("profile", {}).get("requests", "").split(" ")[0]
            server = _count(outcome, "hot")
            if own.isdigit() and int(own) != server:
                lines.append(f"- {q}, {name}: the proxy counted {server} GETs on the hot run, "
                             f"Quiver's --profile says `requests: "
                             f"{outcome.stats['profile']['requests']}`")
    return lines


def _section(bench, engines, results, sf, n_small, latency, bandwidth, root, small_root, minio,
             objects):
    base = next((e for e in engines if e.name == "quiver"), engines[0])
    # peers for the ratios: not Quiver's own variant (its own table), nor an engine that could
    # run nothing here (n/a everywhere: its line in the notes says why)
    peers = [e for e in engines if e is not base and e.name != NOCOALESCE
             and not all(o[e.name].status == "n/a" for o in results.values())]
    size = sum(os.path.getsize(p) for p in objects.values()) / 1e6
    cap = f"{bandwidth / 1e6:g} MB/s per connection" if bandwidth else "no bandwidth cap"
    queries = "".join(
        f"- {q}: " + (f"TPC-H Q{TPCH[q]} (`tests/tpch/queries/q{TPCH[q]:02d}.sql`)"
                      if q in TPCH else f"`{_listing_sql(q)}`") + "\n" for q in results)
    how = "".join(f"- {e.label}: {HOW.get(e.name, '?')}\n" for e in engines)
    totals_table, totals = report.request_totals(results, engines, "engine", KINDS)
    coalescing = _coalescing_table(results)
    mismatches = _cross_check(results)
    body = (
        f"{len(objects):,} objects ({size:.0f} MB) in `s3://{objectstore.BUCKET}` on MinIO "
        f"({minio.endpoint}): TPC-H SF {sf} `lineitem`, `orders`, `part` from `{root}/single`, "
        f"the 8 files of `{root}/many/lineitem`, and {n_small:,} small files from "
        f"`{small_root}/events`. Every engine reaches MinIO through the counting proxy "
        f"(`tests/servers/s3_proxy.py`), which adds **{latency * 1e3:g} ms before each "
        f"request** and caps answers at **{cap}** (flags `--s3-latency`, `--s3-bandwidth`), "
        f"and counts every request by its S3 API and the bytes it sent.\n\n"
        f"**Cold**: a fresh session, MinIO's files evicted from the page cache just before, the "
        f"views created in the run. **Hot**: the same query again in the same session, timed "
        f"alone (Quiver: a second statement in the same process, timed by its --profile). "
        f"Requests are the proxy's counts for that run alone. Results are checked against "
        f"DuckDB on the local copies of the same files.\n\n" + queries
        + "\nHow each engine reads S3:\n\n" + how
        + "\n### Cold: seconds\n\n" + report.time_table(results, engines, "cold")
        + "\n### Hot: seconds\n\n" + report.time_table(results, engines, "hot")
        + "\n### Requests and bytes per engine, counted by the proxy\n\n"
          "GETs are GetObject requests (ranged or whole); other is every other request (HEAD, "
          "ListObjectsV2, ...); MB is what the proxy sent, bodies only. Counted for each run "
          "even when its result was wrong.\n\n"
        + _requests_table(results, engines)
        + "\nTotals over the queries each engine got right:\n\n" + totals_table
        + ("\n### Quiver's coalescing on and off\n\n" + coalescing if coalescing else "")
        + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
        + report.ratio_table(results, base, peers, KINDS)
        + "\n### Notes\n\n" + report.notes_or_na(results, engines)
        + ("\nQuiver's own count disagrees with the proxy's:\n\n" + "\n".join(mismatches) + "\n"
           if mismatches else
           "\nOn every hot run Quiver's own count (`requests:` of --profile) equals the "
           "proxy's.\n"))

    chart = f"{NAME}.png"
    categories = list(results)
    panels = [(f"{kind}, seconds (lower is better)",
               {e.label: (e.name, [o[e.name].time(kind) for o in results.values()])
                for e in engines}, "seconds") for kind in KINDS]
    panels += [(f"{kind}, GET requests counted by the proxy",
                {e.label: (e.name, [_count(o[e.name], kind) if o[e.name].ok else None
                                    for o in results.values()]) for e in engines},
                "GETs", "symlog") for kind in KINDS]
    charts.grouped_bars(os.path.join(bench.results, chart),
                        f"Over local S3 ({latency * 1e3:g} ms a request, {cap}), TPC-H SF {sf}",
                        categories, panels, "seconds")

    summary = report.ratio_lines(results, base, peers, KINDS)
    if all(NOCOALESCE in o for o in results.values()):
        total, _, n = report.ratio(results, "quiver", NOCOALESCE, "cold")
        if n:
            summary.append(f"{base.label} / {NOCOALESCE_LABEL} (coalescing off): cold "
                           f"{report.times(total)} (total over {n} queries)")
    for e in engines:
        if (e.name, "cold") in totals and any(o[e.name].ok for o in results.values()):
            (cg, cm), (hg, hm) = totals[(e.name, "cold")], totals[(e.name, "hot")]
            summary.append(f"{e.label}: {cg} GETs / {cm:.1f} MB cold, {hg} GETs / {hm:.1f} MB "
                           f"hot (over the queries it got right)")
        elif all(o[e.name].status == "n/a" for o in results.values()):
            summary.append(f"{e.label}: n/a ({next(iter(results.values()))[e.name].note})")
    return report.Section(NAME, f"{TITLE} (TPC-H SF {sf}, {latency * 1e3:g} ms, {cap})", body,
                          [chart], summary)


def _listing_sql(label):
    table = "lineitem_files" if "8 files" in label else "events"
    return LISTING.format(table=table)
