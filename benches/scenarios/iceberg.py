"""Scenario 13: an Apache Iceberg table on S3, cold. TPC-H lineitem (the mode's SF) written
by pyiceberg 0.12 into a SQL catalog (SQLite, under the data folder) whose warehouse is
s3://quiver-bench/iceberg-sf<SF>/ on the bench's MinIO, straight to MinIO (not through the
proxy): partitioned by month(l_shipdate), one append per ship year (1992 to 1998: seven
snapshots, seven manifests, twelve data files each). The table is kept between runs; it is
written again when the catalog, the table's objects on MinIO or the local lineitem.parquet
it came from do not match.

Queries: TPC-H Q6 (one ship year: the manifest list's partition summaries rule out six
manifests of seven), `count(*), sum(l_extendedprice)` over one ship month (one manifest, and
one of its twelve data files by their column bounds), TPC-H Q1 (nearly every row).

Engines, each reaching MinIO only through the counting proxy (--s3-latency, --s3-bandwidth),
each run cold: a fresh session (a new `quiver` process; a new connection for the others),
MinIO's files of the table evicted from the page cache just before, the view created in the
run, the proxy's counts reset before and read after:

- Quiver on the table: `iceberg_scan('s3://bucket/iceberg-sf<SF>/default/lineitem')`;
- Quiver on the same data files as a plain glob: `read_parquet('.../data/**/*.parquet')`,
  hive columns off (the folders `l_shipdate_month=YYYY-MM` give no column): every footer is
  read, row groups are pruned by their statistics;
- DuckDB 1.4.4 with its iceberg, avro and httpfs extensions from PyPI (`duckdb-ext-*`),
  installed once under the data folder (pip --target, like engines.DuckDB.over_s3's httpfs)
  and imported by its own worker: `iceberg_scan('s3://.../metadata/<current>.metadata.json')`
  with an S3 secret to the proxy (path style, no TLS);
- chDB: `icebergS3('http://proxy/bucket/.../lineitem/', key, secret)`, with its process-wide
  caches (Iceberg metadata, Parquet metadata, schema inference) off, since every session of
  the worker shares them.

Answers are checked against DuckDB (the harness's) over the local lineitem.parquet.
"""
import datetime
import os
import shutil
import subprocess
import sys
import time

from tpch.tables import query_sql

from benches import data, measure, objectstore, report
from benches.engines import ChDB, DuckDB, EngineError, Quiver, sql_string

NAME = "iceberg"
TITLE = "An Iceberg table on S3: Quiver's iceberg_scan against a plain glob and the peers, cold"
KINDS = ("cold",)
NAMESPACE, TABLE = "default", "lineitem"
PARTITION = "l_shipdate_month"
SOURCE_PROPERTY = "quiver.bench.source"  # LAYOUT and the lineitem.parquet it came from
LAYOUT = "month(l_shipdate) as spec 0, an append per ship year"  # change it to rewrite
PYICEBERG = "pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]==0.12.0"
DUCKDB_VERSION = "1.4.4"
DUCKDB_PACKAGES = [f"duckdb=={DUCKDB_VERSION}", "duckdb-ext-iceberg==1.4.4.20260205",
                   "duckdb-ext-avro==1.4.4.20260205", "duckdb-ext-httpfs==1.4.4.20260205"]
ICEBERG, GLOB = "quiver", "quiver-glob"
LABELS = {ICEBERG: "Quiver, iceberg_scan", GLOB: "Quiver, plain glob",
          "duckdb": f"DuckDB {DUCKDB_VERSION}, iceberg_scan", "chdb": "chDB, icebergS3"}
ONE_MONTH = ("SELECT count(*) AS n, sum(l_extendedprice) AS s FROM lineitem "
             "WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31'")
# chDB's caches that outlive a session (the worker is one process for all runs).
CHDB_COLD = ["SET use_iceberg_metadata_files_cache = 0", "SET use_parquet_metadata_cache = 0",
             "SET schema_inference_use_cache_for_s3 = 0",
             "SET schema_inference_use_cache_for_url = 0"]


class SetupError(Exception):
    """The table or an engine could not be set up; the message says why."""


# label: TPC-H query number, or None for QUERIES_SQL's own
QUERIES = {"Q6, one year": 6, "one month": None, "Q1, nearly all": 1}
QUERIES_SQL = {"one month": ONE_MONTH}
HOW = {
    ICEBERG: "`AWS_ENDPOINT_URL` (the proxy) and keys in the environment, path-style",
    GLOB: "the same; hive columns off (the folders `l_shipdate_month=YYYY-MM` give no "
          "column), so every footer is read and row groups are pruned by their statistics",
    "duckdb": "after `SET extension_directory` (PyPI's `duckdb-ext-*` folder), `LOAD httpfs`, "
              "`LOAD avro`, `LOAD iceberg` and `CREATE SECRET (TYPE s3, ENDPOINT proxy, "
              "URL_STYLE 'path', USE_SSL false)`; the view names the current metadata.json "
              "(DuckDB does not find it from the table folder without "
              "`unsafe_enable_version_guessing`)",
    "chdb": "after `SET use_iceberg_metadata_files_cache = 0, use_parquet_metadata_cache = 0, "
            "schema_inference_use_cache_for_s3 = 0, schema_inference_use_cache_for_url = 0` "
            "(its worker's caches outlive a session: off, every run is cold)",
}


def queries():
    """{label: SQL}"""
    return {q: query_sql(n) if n else QUERIES_SQL[q] for q, n in QUERIES.items()}


def _masked(statement, endpoint):
    """A statement for the report, the local server's keys replaced by key and secret."""
    return statement.replace(endpoint.secret_key, "secret").replace(endpoint.access_key, "key")


def run(bench):
    options = bench.options
    load = report.load()
    sf = bench.mode.sf
    lineitem = os.path.join(data.tpch(sf), "single", "lineitem.parquet")
    engines = []
    try:
        with objectstore.bucket_behind_proxy(options, {}, NAME) as (minio, proxy, endpoint):
            table = _table(minio, sf, lineitem)
            engines, setups, unsupported, absent = _engines(bench, endpoint, table)
            results = _measure_all(bench, engines, setups, unsupported, lineitem, minio,
                                   table, proxy.counter)
    except (objectstore.ServerError, SetupError) as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])
    finally:
        for e in engines:
            e.close()
    return _section(bench, engines, setups, results, table, absent, load, lineitem, endpoint)


# --- the table ---------------------------------------------------------------------------------

def _table(minio, sf, lineitem):
    """The Iceberg table on MinIO (reused when it matches, else written now): a dict with
    location, metadata_location, rows, snapshots, manifests, files, bytes, how (a line)."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError as e:
        raise SetupError(f"pyiceberg is missing ({e}); install it: pip install '{PYICEBERG}'")
    import pyarrow.parquet as pq

    folder = os.path.join(data.ROOT, f"iceberg-sf{sf}")
    prefix = f"iceberg-sf{sf}"
    stamp = os.stat(lineitem)
    source = f"{LAYOUT} {lineitem} {stamp.st_size} {stamp.st_mtime_ns}"
    rows = pq.ParquetFile(lineitem).metadata.num_rows
    client = minio.client()
    properties = {"s3.endpoint": minio.endpoint, "s3.access-key-id": minio.access_key,
                  "s3.secret-access-key": minio.secret_key, "s3.region": minio.region}

    def catalog():
        os.makedirs(folder, exist_ok=True)
        return SqlCatalog("bench", uri=f"sqlite:///{folder}/catalog.db",
                          warehouse=f"s3://{objectstore.BUCKET}/{prefix}", **properties)

    started = time.time()
    table, stale = None, "no catalog yet"
    if os.path.exists(os.path.join(folder, "catalog.db")):
        try:
            table, stale = _existing(catalog(), client, source, rows)
        except Exception as e:  # the catalog itself is unreadable: write it again
            stale = f"the catalog is unreadable: {type(e).__name__}: {str(e)[:200]}"
    if table is not None:
        how = "reused (written before; checked against the catalog and MinIO)"
    else:
        print(f"  {NAME}: writing the Iceberg table with pyiceberg ({stale})", flush=True)
        try:
            shutil.rmtree(folder, ignore_errors=True)
            _delete_prefix(client, prefix + "/")
            _write(catalog(), lineitem, source)
        except Exception as e:
            raise SetupError(f"writing the Iceberg table with pyiceberg to "
                             f"s3://{objectstore.BUCKET}/{prefix} failed: "
                             f"{type(e).__name__}: {e}") from e
        table, problem = _existing(catalog(), client, source, rows)
        if table is None:
            raise SetupError(f"the Iceberg table just written does not check out: {problem}")
        how = (f"written now by pyiceberg in {time.time() - started:.0f} s (before: {stale})")
    print(f"  {NAME}: {table['location']}: {table['files']} data files, "
          f"{table['manifests']} manifests, {table['rows']:,} rows; {how}", flush=True)
    table["how"] = how
    table["prefix"] = prefix
    return table


def _existing(catalog, client, source, rows):
    """(the table's facts, None) when the catalog holds the table written from `source` with
    `rows` rows and MinIO holds its files and only those under data/; else (None, why not)."""
    try:
        table = catalog.load_table(f"{NAMESPACE}.{TABLE}")  # reads metadata.json from MinIO
    except Exception as e:
        return None, f"no table to reuse: {type(e).__name__}: {str(e)[:200]}"
    if table.properties.get(SOURCE_PROPERTY) != source:
        return None, "the table was written otherwise or from another lineitem.parquet"
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None, "the table has no snapshot"
    try:
        manifests = snapshot.manifests(table.io)
        files = table.inspect.files()  # reads every manifest from MinIO
    except Exception as e:
        return None, f"its manifests are not readable: {type(e).__name__}: {str(e)[:200]}"
    count = sum(files["record_count"].to_pylist())
    if count != rows:
        return None, f"it holds {count:,} rows, lineitem.parquet {rows:,}"
    paths = set(files["file_path"].to_pylist())
    location = table.location().rstrip("/")
    bucket_prefix = f"s3://{objectstore.BUCKET}/"
    if not location.startswith(bucket_prefix):
        return None, f"its location {location} is not in s3://{objectstore.BUCKET}"
    listed = {bucket_prefix + key: size for key, size in
              _list(client, location[len(bucket_prefix):] + "/data/").items()}
    if set(listed) != paths:
        return None, (f"MinIO's data folder holds {len(listed)} files, the table "
                      f"{len(paths)} (not the same set)")
    return {"location": location, "metadata_location": table.metadata_location,
            "rows": count, "snapshots": len(table.metadata.snapshots),
            "manifests": len(manifests), "files": len(paths),
            "bytes": sum(listed.values())}, None


def _write(catalog, lineitem, source):
    """Creates the table (month(l_shipdate) partitions), appends one ship year at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.transforms import MonthTransform

    # The file's schema without its Parquet field ids: pyiceberg gives the table its own.
    schema = pa.schema([pa.field(f.name, f.type, f.nullable)
                        for f in pq.read_schema(lineitem)])
    # The partition spec from the start (spec 0), not added to an unpartitioned table later;
    # the columns numbered 1, 2, ... in order, as create_table numbers them again.
    iceberg_schema = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(schema))
    spec = PartitionSpec(PartitionField(
        source_id=iceberg_schema.find_field("l_shipdate").field_id, field_id=1000,
        transform=MonthTransform(), name=PARTITION))
    catalog.create_namespace_if_not_exists(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.{TABLE}", schema=iceberg_schema,
                                 partition_spec=spec, properties={SOURCE_PROPERTY: source})
    dataset = ds.dataset(lineitem)
    dates = pq.read_table(lineitem, columns=["l_shipdate"])["l_shipdate"]
    bounds = pc.min_max(dates)
    first, last = bounds["min"].as_py().year, bounds["max"].as_py().year
    for year in range(first, last + 1):
        field = ds.field("l_shipdate")
        rows = dataset.to_table(filter=(field >= datetime.date(year, 1, 1))
                                & (field < datetime.date(year + 1, 1, 1)))
        if rows.num_rows:
            table.append(rows.cast(schema))


def _list(client, prefix):
    """{key: size} of every object under prefix."""
    objects = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=objectstore.BUCKET,
                                                                  Prefix=prefix):
        for item in page.get("Contents", []):
            objects[item["Key"]] = item["Size"]
    return objects


def _delete_prefix(client, prefix):
    keys = sorted(_list(client, prefix))
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=objectstore.BUCKET, Delete={
            "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


# --- the engines -------------------------------------------------------------------------------

def _engines(bench, endpoint, table):
    """(engines in order, {name: setup statements}, {name: why it cannot run here},
    [lines for engines not selected by --engines])."""
    engines, setups, unsupported, absent = [], {}, {}, []
    location = table["location"]
    quiver = next((e for e in bench.engines if e.name == "quiver"), None)
    if quiver is not None:
        env = endpoint.env()
        glob = location + "/data/**/*.parquet"
        for name, source in ((ICEBERG, f"iceberg_scan({sql_string(location)})"),
                             (GLOB, f"read_parquet({sql_string(glob)})")):
            engines.append(Quiver(quiver.binary, quiver.timeout, quiver.executor, quiver.args,
                                  env, name, LABELS[name]))
            setups[name] = [f"CREATE VIEW lineitem AS SELECT * FROM {source}"]
    else:
        absent.append("Quiver: not in --engines")
    timeout = bench.engines[0].timeout

    duckdb = DuckDB(timeout)
    duckdb.label = LABELS["duckdb"]
    engines.append(duckdb)
    try:
        duckdb.site, extensions = _duckdb_site()
    except SetupError as e:
        unsupported["duckdb"] = str(e)
    else:
        loads = [f"SET extension_directory = {sql_string(extensions)}", "LOAD httpfs",
                 "LOAD avro", "LOAD iceberg"]
        secret = (f"CREATE OR REPLACE SECRET bench_s3 (TYPE s3, "
                  f"KEY_ID {sql_string(endpoint.access_key)}, "
                  f"SECRET {sql_string(endpoint.secret_key)}, "
                  f"REGION {sql_string(endpoint.region)}, "
                  f"ENDPOINT {sql_string(endpoint.host_port)}, URL_STYLE 'path', USE_SSL false)")
        setups["duckdb"] = loads + [secret, "CREATE VIEW lineitem AS SELECT * FROM iceberg_scan("
                                    f"{sql_string(table['metadata_location'])})"]
        problem = _warm_up(duckdb, loads)
        if problem:
            unsupported["duckdb"] = problem

    if any(e.name == "chdb" for e in bench.engines):
        chdb = ChDB(timeout)
        chdb.label = LABELS["chdb"]
        engines.append(chdb)
        url = endpoint.http_url(location[len(f"s3://{endpoint.bucket}/"):] + "/")
        setups["chdb"] = CHDB_COLD + [
            f"CREATE VIEW lineitem AS SELECT * FROM icebergS3({sql_string(url)}, "
            f"{sql_string(endpoint.access_key)}, {sql_string(endpoint.secret_key)})"]
        problem = _warm_up(chdb, [])
        if problem:
            unsupported["chdb"] = problem
    else:
        absent.append("chDB: not in --engines")
    return engines, setups, unsupported, absent


def _warm_up(engine, setup):
    """Starts the engine's worker and loads its extensions (untimed: library loading is not
    what the runs measure); None, or why it failed."""
    try:
        engine.run(setup, "SELECT 1")
        return None
    except EngineError as e:
        return f"could not start: {e}"


def _duckdb_site():
    """(folder, extension directory): DuckDB 1.4.4 with the iceberg, avro and httpfs
    extensions from PyPI, installed once (pip --target) under the data folder and checked by
    loading them there. SetupError says why not."""
    site = os.path.join(data.ROOT, "python", f"duckdb-{DUCKDB_VERSION}-iceberg")
    extensions = os.path.join(site, "duckdb_ext", "extensions")
    marker = os.path.join(site, "quiver-packages.txt")
    wanted = "\n".join(DUCKDB_PACKAGES) + "\n"
    try:
        with open(marker) as f:
            ready = f.read() == wanted
    except FileNotFoundError:
        ready = False
    if not ready:
        print(f"  {NAME}: installing {' '.join(DUCKDB_PACKAGES)} into {site}", flush=True)
        shutil.rmtree(site, ignore_errors=True)
        try:
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                                   "--disable-pip-version-check", "--target", site,
                                   *DUCKDB_PACKAGES], capture_output=True, text=True,
                                  timeout=900)
        except subprocess.TimeoutExpired:
            raise SetupError(f"pip install of DuckDB {DUCKDB_VERSION} and its extensions took "
                             f"more than 900 s") from None
        if proc.returncode != 0:
            raise SetupError(f"pip install {' '.join(DUCKDB_PACKAGES)} failed: "
                             f"{(proc.stderr or proc.stdout).strip()[-300:]}")
    check = ("import sys; sys.path.insert(0, sys.argv[1]); import duckdb; "
             f"assert duckdb.__version__ == {DUCKDB_VERSION!r}, duckdb.__version__; "
             "con = duckdb.connect(config={'autoinstall_known_extensions': False}); "
             "con.execute('SET extension_directory = ' + repr(sys.argv[2])); "
             "[con.execute('LOAD ' + e) for e in ('httpfs', 'avro', 'iceberg')]")
    proc = subprocess.run([sys.executable, "-c", check, site, extensions],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SetupError(f"DuckDB {DUCKDB_VERSION} in {site} does not load httpfs, avro and "
                         f"iceberg: {proc.stderr.strip().splitlines()[-1][:300]}")
    if not ready:
        with open(marker, "w") as f:
            f.write(wanted)
    return site, extensions


# --- the runs ----------------------------------------------------------------------------------

def _measure_all(bench, engines, setups, unsupported, lineitem, minio, table, counter):
    reference = next(e for e in bench.engines if e.name == "duckdb")
    local = reference.view("lineitem", lineitem)
    folder = os.path.join(minio.data_dir, objectstore.BUCKET, table["prefix"])
    evict_files = [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names]
    results = {}
    for label, sql in queries().items():
        try:
            expected, problem = reference.run(local, sql).rows, None
        except EngineError as e:
            expected, problem = None, f"DuckDB on the local lineitem.parquet failed: {e}"
        outcomes = {}
        for e in engines:
            if e.name in unsupported:
                outcomes[e.name] = measure.Outcome("n/a", note=unsupported[e.name])
                continue
            outcomes[e.name] = _cold(e, setups[e.name], sql, expected, problem, counter,
                                     lambda: bench.cache.evict(evict_files))
        cells = "  ".join(f"{e.name} {_progress(outcomes[e.name])}" for e in engines)
        print(f"  {NAME} {label}: {cells}", flush=True)
        results[label] = outcomes
    return results


def _cold(engine, setup, sql, expected, problem, counter, evict):
    """One cold run in a fresh session, checked against `expected`. stats: {"cold": the
    proxy's counts, "profile": Quiver's --profile lines}."""
    evict()
    try:
        result = engine.session_runs(setup, sql, count=1, counter=counter)[0]
    except EngineError as e:
        return measure.Outcome("error", note=str(e))
    stats = {"cold": result.server, "profile": result.stats}
    if expected is None:
        return measure.Outcome("unchecked", note=problem, stats=stats)
    wrong = measure.check(expected, result.rows)
    if wrong is not None:
        return measure.Outcome("wrong", note=wrong, stats=stats)
    return measure.Outcome("ok", cold=result.seconds, stats=stats)


def _gets(outcome):
    return outcome.stats.get("cold", {}).get("counts", {}).get("GetObject", 0)


def _other(outcome):
    """Requests other than GetObject, with their kinds: '9 (HeadObject 8, ListObjectsV2 1)'."""
    counts = {k: v for k, v in outcome.stats.get("cold", {}).get("counts", {}).items()
              if k != "GetObject" and v}
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{sum(counts.values())}" + (f" ({kinds})" if kinds else "")


def _megabytes(outcome):
    return sum(outcome.stats.get("cold", {}).get("bytes", {}).values()) / 1e6


def _progress(outcome):
    if not outcome.ok:
        return outcome.status
    return f"{report.seconds(outcome.cold)} s ({_gets(outcome)} GETs)"


def _pruning(outcome, key):
    """Quiver's --profile `files:`, `manifests:` or `row groups:` as 'read / pruned', else
    '-'."""
    words = outcome.stats.get("profile", {}).get(key, "").replace(",", "").split()
    if len(words) >= 4 and words[0].isdigit() and words[2].isdigit():
        return f"{words[0]} / {words[2]}"
    return "-"


# --- the report --------------------------------------------------------------------------------

def _query_table(outcomes, engines, reference):
    """Engines down: seconds, / DuckDB, the proxy's counts, Quiver's pruning."""
    ref = outcomes.get(reference)
    rows = []
    for e in engines:
        o = outcomes[e.name]
        measured = o.status in ("ok", "wrong", "unchecked") and o.stats.get("cold")
        ratio = (report.times(o.cold / ref.cold)
                 if o.ok and ref is not None and ref.ok and e.name != reference else "-")
        rows.append([e.label, report.cell(o, "cold"), ratio,
                     _gets(o) if measured else "-", _other(o) if measured else "-",
                     f"{_megabytes(o):.2f}" if measured else "-",
                     _pruning(o, "manifests") if measured else "-",
                     _pruning(o, "files") if measured else "-",
                     _pruning(o, "row groups") if measured else "-"])
    return report.table(["engine", "cold s", "/ DuckDB", "GETs", "other requests", "MB",
                         "manifests read / pruned", "files read / pruned",
                         "row groups read / pruned"], rows)


def _totals(results, engines, reference):
    """Per engine over the queries it got right: seconds, / DuckDB (over the queries both got
    right), GETs, MB; and the summary lines."""
    rows, lines = [], []
    for e in engines:
        ran = [o[e.name] for o in results.values() if o[e.name].ok]
        if not ran:
            statuses = {o[e.name].status for o in results.values()}
            note = next(iter(results.values()))[e.name].note
            rows.append([e.label, f"0 of {len(results)}", "-", "-", "-", "-"])
            lines.append(f"{e.label}: {'/'.join(sorted(statuses))} ({note[:160]})")
            continue
        seconds = sum(o.cold for o in ran)
        gets, mb = sum(_gets(o) for o in ran), sum(_megabytes(o) for o in ran)
        total, _, n = (report.ratio(results, e.name, reference, "cold")
                       if e.name != reference else (None, None, 0))
        versus = f"{report.times(total)} over {n}" if total else "-"
        rows.append([e.label, f"{len(ran)} of {len(results)}", report.seconds(seconds), versus,
                     gets, f"{mb:.1f}"])
        lines.append(f"{e.label}: {report.seconds(seconds)} s cold over {len(ran)} of "
                     f"{len(results)} queries, {gets} GETs, {mb:.1f} MB"
                     + (f"; {report.times(total)} DuckDB's time (over {n})" if total else ""))
    return report.table(["engine", "queries right", "cold s", "/ DuckDB (total)", "GETs", "MB"],
                        rows), lines


def _section(bench, engines, setups, results, table, absent, load, lineitem, endpoint):
    reference = "duckdb"
    base = next((e for e in engines if e.name == ICEBERG), engines[0])
    peers = [e for e in engines if e is not base
             and not all(o[e.name].status == "n/a" for o in results.values())]
    options = bench.options
    cap = (f"{options.s3_bandwidth:g} MB/s per connection" if options.s3_bandwidth
           else "no bandwidth cap")
    how = "".join(f"- {e.label}: `{_masked(setups[e.name][-1], endpoint)}`; "
                  f"{HOW[e.name]}\n" for e in engines if e.name in setups)
    listed = "".join(f"- {q}: " + (f"TPC-H Q{n} (`tests/tpch/queries/q{n:02d}.sql`)" if n
                                   else "`" + " ".join(QUERIES_SQL[q].split()) + "`") + "\n"
                     for q, n in QUERIES.items())
    totals, lines = _totals(results, engines, reference)
    per_query = "".join(f"\n### {q}\n\n" + _query_table(o, engines, reference)
                        for q, o in results.items())
    body = (
        f"TPC-H SF {bench.mode.sf} `lineitem` ({table['rows']:,} rows, from `{lineitem}`) as "
        f"an Iceberg table written by pyiceberg 0.12 (SQL catalog in SQLite under "
        f"`{data.ROOT}/iceberg-sf{bench.mode.sf}`), partitioned by `month(l_shipdate)`, one "
        f"append per ship year: **{table['snapshots']} snapshots, {table['manifests']} "
        f"manifests, {table['files']} data files ({table['bytes'] / 1e6:.1f} MB)** at "
        f"`{table['location']}`; current metadata `{table['metadata_location']}`. The table "
        f"was {table['how']}.\n\n"
        f"Every engine reaches MinIO through the counting proxy: **{options.s3_latency:g} ms "
        f"before each request**, {cap}. Each cell is one **cold** run: a fresh session (a new "
        f"`quiver` process; a new connection for the others), MinIO's files of the table "
        f"evicted from the page cache just before, the view created in the run; GETs, other "
        f"requests and MB (bodies sent) are the proxy's counts for that run. Answers are "
        f"checked against DuckDB over the local `lineitem.parquet` before a time counts. "
        f"The {load} (when this scenario started).\n\n"
        + listed + "\nHow each engine reads the table:\n\n" + how
        + "".join(f"- {line}\n" for line in absent)
        + "- DataFusion: not run (no Iceberg reader in its Python package).\n"
        + "\nThe last three columns are Quiver's `--profile`: manifests read and pruned by the "
          "manifest list's partition summaries; data files read and pruned (for the table, "
          "by the manifests' column bounds, before any footer; the glob reads every footer); "
          "row groups read and pruned by their statistics. Other requests are the proxy's "
          "count of every request but GetObject, by kind.\n"
        + per_query
        + "\n### Totals, over the queries each engine got right\n\n" + totals
        + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
        + report.ratio_table(results, base, peers, KINDS)
        + "\n### Notes\n\n" + report.notes_or_na(results, engines) + _known(results, engines))
    return report.Section(NAME, f"{TITLE} (TPC-H SF {bench.mode.sf})", body, [],
                          [f"{load} (scenario start)"] + lines)


# {engine: (the queries it concerns, why they come out wrong)}
KNOWN = {
    "duckdb": (
        ("Q6, one year", "one month"),
        "DuckDB 1.4.4's iceberg extension (the PyPI build 1.4.4.20260205) turns a DATE constant "
        "into a month() partition value as days / 30, not calendar months, so a filter on "
        "`l_shipdate` prunes the wrong month partitions (the year from 1994-01-01 starts at "
        "1994-05; one month finds nothing): "
        "[duckdb/duckdb-iceberg#699](https://github.com/duckdb/duckdb-iceberg/issues/699), "
        "fixed by #700 (2026-02-09), after that build."),
    "chdb": (
        ("Q6, one year",),
        "chDB's Q6 (`l_discount between 0.06 - 0.01 and 0.06 + 0.01`) computes `0.06 + 0.01` "
        "in Float64 (0.06999999999999999), so the rows with discount 0.07 drop out (as on "
        "plain Parquet files, scenario s3)."),
}


def _known(results, engines):
    """Known causes of the wrong results seen (README: reported as wrong, not hidden)."""
    lines = [f"- {e.label}, {', '.join(KNOWN[e.name][0])}: {KNOWN[e.name][1]}"
             for e in engines if e.name in KNOWN
             and any(results[q][e.name].status == "wrong" for q in KNOWN[e.name][0])]
    return ("\nKnown causes of the wrong results:\n\n" + "\n".join(lines) + "\n") if lines else ""
