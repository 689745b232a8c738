#!/usr/bin/env python3
"""Everything the browser tests (browser.test.mjs) need outside the browser, kept up until
stdin closes or this process is killed (SIGTERM, SIGINT).

1. TPC-H SF 0.1 (QUIVER_TPCH_SF) through scripts/gen_tpch.py into
   ~/.cache/quiver-data/tpch-sf0.1 (QUIVER_DATA moves it), as tests/conftest.py does.
2. MinIO through scripts/minio.sh on 127.0.0.1:$QUIVER_BROWSER_MINIO_PORT (default 9500, or
   a free port when that one is taken by something else), the `single` and `many` layouts
   uploaded into the bucket `quiver-browser` under tpch/{single,many}/. MinIO's S3 API answers
   CORS itself for any origin (preflights included; it exposes ETag, Content-Range,
   Content-Length, Last-Modified), and has no PutBucketCors to call: nothing to set.
3. A range-capable HTTP server (tests/servers/range_http.py, cors=True) over a folder holding
   tpch/{single,many} (links to the TPC-H folder).
4. Quiver's coordinator and worker functions under cargo-lambda's emulator (debug builds,
   shared with tests/test_lambda.py), reading the bucket straight from MinIO, behind a
   function URL (tests/servers/function_url.py) that checks SigV4 signatures by MinIO's keys
   and answers CORS, as AWS does with `AWS_IAM` auth. It waits until the coordinator answers
   (the first start builds the functions).
5. DuckDB's results for every query the browser runs, on the local copies of the same files
   (the same layout), written as JSON: {name: {columns, rows}}; numbers as JSON numbers,
   decimals, dates and other values as strings.

Then it prints one JSON line on stdout:

    {"http_base", "s3_endpoint", "bucket", "access_key", "secret_key", "region",
     "presigned_url", "function_url", "expected_file", "single_root", "queries": {name: sql}}

(single_root: the local folder of the single layout, for files the page opens from disk.)

and waits. Progress goes to stderr. Query names:

    http/qNN      TPC-H query NN over the single layout by HTTP URL (views, then the query)
    s3/qNN        TPC-H Q1, Q3, Q6, Q12, Q14 over the many layout by s3:// globs
    s3/glob       rows per file of 's3://bucket/tpch/many/lineitem/*.parquet' (a listing)
    http/glob     the same over HTTP: the glob expanded from the server's index pages
    file/orders   orders.parquet opened on the page from disk, by its name
    file/nation   nation.parquet dropped on the page, by its name
    s3/no-keys    an S3 read, for the page that has no keys (expected to fail)
    presigned/nation   nation read through a presigned GetObject URL
    ui/flags      a small aggregate typed into the page's editor
    cancel/long   a cross join count that runs for hours, in the merge (to be cancelled)
    after/nation  a quick count, for after the cancel
    error/missing a file that does not exist;  error/syntax  SQL that does not parse
    http/csv, http/json   nation as CSV and as a JSON array (written by DuckDB), over HTTP
    iceberg/posdeletes, iceberg/evolved   Iceberg tables (tests/iceberg_tables.py, written by
                  pyiceberg) over HTTP: position deletes, and a renamed column; expected from
                  pyiceberg's scan, queried by DuckDB
"""
import datetime
import decimal
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

import duckdb  # noqa: E402

from servers.common import free_port, port_free  # noqa: E402
from servers.function_url import FunctionUrl  # noqa: E402
from servers.lambda_emulator import LambdaEmulator  # noqa: E402
from servers.minio import MinIO, MinIOError, ensure_bucket, upload_tree  # noqa: E402
from servers.range_http import RangeHTTPServer  # noqa: E402
from tpch.tables import QUERIES, TABLES, prelude, query_sql  # noqa: E402

SF = os.environ.get("QUIVER_TPCH_SF", "0.1")
MINIO_PORT = int(os.environ.get("QUIVER_BROWSER_MINIO_PORT", "9500"))
BUCKET = "quiver-browser"
LAYOUTS = ["single", "many"]
S3_QUERIES = [1, 3, 6, 12, 14]
# A week, the longest a SigV4 presigned URL may live.
PRESIGN_SECONDS = 7 * 24 * 3600


def say(message):
    print(f"fixtures: {message}", file=sys.stderr, flush=True)


# data


def tpch_root():
    root = os.environ.get("QUIVER_DATA",
                          os.path.expanduser(f"~/.cache/quiver-data/tpch-sf{SF}"))
    # gen_tpch prints to stdout, which is ours for the JSON line.
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_tpch.py"), SF, root],
                   check=True, stdout=sys.stderr)
    return root


# MinIO


def free_port_pair():
    """A port P with P+1 also free (MinIO's console takes P+1)."""
    for _ in range(50):
        port = free_port()
        if port < 65535 and port_free(port) and port_free(port + 1):
            return port
    raise RuntimeError("no two free consecutive ports on 127.0.0.1")


class BrowserMinIO(MinIO):
    """MinIO on the preferred port (reusing a server that minio.sh started there before),
    else on a free one; stop() stops it only if started here, and removes a one-off port's
    data (of no use to the next run)."""

    def __init__(self):
        super().__init__(MINIO_PORT)
        self.fresh_dir = False
        try:
            self.install()
            try:
                self.start()
            except MinIOError as e:
                self.port = free_port_pair()
                self.fresh_dir = not os.path.exists(self.folder)
                say(f"port {MINIO_PORT} unavailable ({e.output.strip().splitlines()[-1:]}); "
                    f"using {self.port}")
                self.start()
        except MinIOError as e:
            raise RuntimeError(str(e)) from None
        say(f"MinIO on {self.endpoint}" + ("" if self.started_here else " (already running)"))

    def client(self):
        return super().client(signature_version="s3v4", retries={"max_attempts": 2})

    def stop(self):
        started_here = self.started_here
        super().stop()
        if started_here and self.fresh_dir:
            shutil.rmtree(self.folder, ignore_errors=True)


def upload(minio, root):
    client = minio.client()
    ensure_bucket(client, BUCKET)
    for layout in LAYOUTS:
        upload_tree(client, BUCKET, os.path.join(root, layout), f"tpch/{layout}/")
    return client


def browser_prelude(root_url, layout):
    """tests/tpch's prelude for Quiver with the tables bound to URLs. The page keeps one
    session, so views are replaced rather than created again."""
    return prelude(root_url, layout, "quiver").replace("CREATE VIEW ", "CREATE OR REPLACE VIEW ")


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def write_text_tables(folder, root):
    """nation as CSV and as a JSON array under FOLDER/text/, written by DuckDB."""
    os.makedirs(os.path.join(folder, "text"))
    nation = sql_string(os.path.join(root, "single", "nation.parquet"))
    for name, options in [("nation.csv", ""), ("nation.json", " (FORMAT json, ARRAY true)")]:
        target = sql_string(os.path.join(folder, "text", name))
        duckdb.connect().execute(f"COPY (FROM {nation}) TO {target}{options}")


def text_queries(http_base, folder):
    """The text tables' queries: the page reads them by URL, DuckDB from disk."""
    queries = {}
    for name, file in [("http/csv", "nation.csv"), ("http/json", "nation.json")]:
        sql = ("SELECT n_regionkey, count(*) AS n, min(n_name) AS first, sum(n_nationkey) AS s "
               "FROM {} GROUP BY n_regionkey ORDER BY n_regionkey")
        queries[name] = (sql.format(sql_string(f"{http_base}/text/{file}")),
                         ("single", sql.format(sql_string(os.path.join(folder, "text", file)))))
    return queries


ICEBERG_QUERIES = {
    "posdeletes": "SELECT kind, count(*) AS n, sum(id) AS s FROM {} GROUP BY kind ORDER BY kind",
    "evolved": "SELECT id, full_name, qty, note FROM {} WHERE id % 25 = 1 ORDER BY id",
}


def iceberg_queries(http_base, folder):
    """Iceberg tables under FOLDER/iceberg/ (served by HTTP), their queries by URL, and the
    expected results: pyiceberg's scan of each table, queried by DuckDB."""
    import iceberg_tables
    from pyiceberg.table import StaticTable

    tables = iceberg_tables.make_tables(os.path.join(folder, "iceberg"))
    queries, expected = {}, {}
    for name, sql in ICEBERG_QUERIES.items():
        location = tables[name]["location"].removeprefix("file://")
        url = f"{http_base}/{os.path.relpath(location, folder)}"
        # The manifests name the files by their local paths: read them under the URL.
        queries[f"iceberg/{name}"] = (
            sql.format(f"iceberg_scan({sql_string(url)}, allow_moved_paths => true)"), None)
        scanned = StaticTable.from_metadata(tables[name]["metadata_location"]).scan().to_arrow()
        cur = duckdb.connect().execute(sql.format("scanned"))
        expected[f"iceberg/{name}"] = {
            "columns": [d[0] for d in cur.description],
            "rows": [[json_cell(v) for v in row] for row in cur.fetchall()]}
    return queries, expected


def queries_for(http_base, presigned_url):
    """{name: (browser SQL, (layout, DuckDB SQL) or None)}; layout picks the local folder
    DuckDB reads (its prelude is added), None for no expected result."""
    http_root = f"{http_base}/tpch"
    s3_root = f"s3://{BUCKET}/tpch"
    queries = {}
    for n in QUERIES:
        queries[f"http/q{n:02d}"] = (browser_prelude(http_root, "single") + query_sql(n),
                                     ("single", query_sql(n)))
    for n in S3_QUERIES:
        queries[f"s3/q{n:02d}"] = (browser_prelude(s3_root, "many") + query_sql(n),
                                   ("many", query_sql(n)))
    glob = f"{s3_root}/many/lineitem/*.parquet"
    queries["s3/glob"] = (
        f"SELECT _file, count(*) AS n FROM {sql_string(glob)} GROUP BY _file ORDER BY _file",
        ("many", "SELECT parse_filename(filename) AS _file, count(*) AS n FROM "
                 "read_parquet({glob}, filename = true) GROUP BY 1 ORDER BY 1"))
    http_glob = f"{http_root}/many/lineitem/*.parquet"
    queries["http/glob"] = (
        f"SELECT _file, count(*) AS n FROM {sql_string(http_glob)} GROUP BY _file ORDER BY _file",
        queries["s3/glob"][1])
    queries["file/orders"] = (
        "SELECT o_orderstatus, count(*) AS n, sum(o_totalprice) AS total "
        "FROM 'orders.parquet' GROUP BY o_orderstatus ORDER BY o_orderstatus",
        ("single", "SELECT o_orderstatus, count(*) AS n, sum(o_totalprice) AS total "
                   "FROM orders GROUP BY o_orderstatus ORDER BY o_orderstatus"))
    queries["file/nation"] = (
        "SELECT n_nationkey, n_name FROM 'nation.parquet' ORDER BY n_nationkey",
        ("single", "SELECT n_nationkey, n_name FROM nation ORDER BY n_nationkey"))
    queries["s3/no-keys"] = (
        f"SELECT count(*) AS n FROM {sql_string(s3_root + '/single/nation.parquet')}", None)
    queries["presigned/nation"] = (
        f"SELECT n_nationkey, n_name, n_regionkey FROM {sql_string(presigned_url)} "
        "ORDER BY n_nationkey",
        ("single", "SELECT n_nationkey, n_name, n_regionkey FROM nation ORDER BY n_nationkey"))
    lineitem = sql_string(f"{http_root}/single/lineitem.parquet")
    queries["ui/flags"] = (
        f"SELECT l_returnflag, l_linestatus, count(*) AS n, sum(l_quantity) AS qty "
        f"FROM {lineitem} GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
        ("single", "SELECT l_returnflag, l_linestatus, count(*) AS n, sum(l_quantity) AS qty "
                   "FROM lineitem GROUP BY l_returnflag, l_linestatus "
                   "ORDER BY l_returnflag, l_linestatus"))
    orders = sql_string(f"{http_root}/single/orders.parquet")
    queries["cancel/long"] = (
        f"SELECT count(*) AS n FROM {orders} AS a CROSS JOIN {orders} AS b "
        "WHERE a.o_totalprice + b.o_totalprice > 0", None)
    queries["after/nation"] = (
        f"SELECT count(*) AS n FROM {sql_string(http_root + '/single/nation.parquet')}",
        ("single", "SELECT count(*) AS n FROM nation"))
    queries["error/missing"] = (
        f"SELECT * FROM {sql_string(http_root + '/single/no_such_table.parquet')}", None)
    queries["error/syntax"] = ("SELEC l_orderkey FROMM lineitem", None)
    return queries


def json_cell(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    return str(value)


def expected_results(root, queries):
    connections = {}
    results = {}
    for name, (_, oracle) in queries.items():
        if oracle is None:
            continue
        layout, sql = oracle
        if layout not in connections:
            con = duckdb.connect()
            con.execute(prelude(root, layout, "duckdb"))
            connections[layout] = con
        if "{glob}" in sql:
            glob = os.path.join(root, layout, "lineitem", "*.parquet")
            sql = sql.replace("{glob}", sql_string(glob))
        cur = connections[layout].execute(sql)
        rows = cur.fetchall()
        results[name] = {"columns": [d[0] for d in cur.description],
                         "rows": [[json_cell(v) for v in row] for row in rows]}
    return results


def start_coordinator(minio, folder, cleanups):
    """The emulator serving the functions over MinIO, and the signed function URL in front
    of it (any page origin may call it); returns the URL once the coordinator answers."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key,
               AWS_REGION=minio.region, AWS_ENDPOINT_URL_S3=minio.endpoint,
               AWS_EC2_METADATA_DISABLED="true", QUIVER_WORKER_FUNCTION="worker",
               QUIVER_RESULT_PREFIX=f"s3://{BUCKET}/results/", RUST_LOG="warn")
    emulator = LambdaEmulator(env, os.path.join(folder, "emulator.log"), concurrency=4)
    cleanups.append(emulator.stop)
    emulator.start()
    say("building and starting the Lambda functions (cargo lambda watch)")
    deadline = time.time() + 1500
    while True:
        if emulator.proc.poll() is not None:
            raise RuntimeError(f"cargo lambda watch exited:\n{emulator.log_text()[-3000:]}")
        try:
            if emulator.request("GET", "/lambda-url/coordinator/health", timeout=600)[0] == 200:
                break
        except (OSError, TimeoutError):
            pass
        if time.time() > deadline:
            raise RuntimeError(f"the coordinator never answered:\n{emulator.log_text()[-3000:]}")
        time.sleep(1)
    front = FunctionUrl(emulator.url, {minio.access_key: minio.secret_key}, ["*"]).start()
    cleanups.append(front.stop)
    say(f"the coordinator's function URL on {front.url}")
    return front.url


# the process


def main():
    root = tpch_root()
    work = tempfile.mkdtemp(prefix="quiver-browser-")
    stopped = threading.Event()
    cleanups = [lambda: shutil.rmtree(work, ignore_errors=True)]

    def cleanup():
        while cleanups:
            try:
                cleanups.pop()()
            except Exception as e:  # keep stopping the rest
                say(f"cleanup: {e}")

    def on_signal(signum, frame):
        stopped.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        minio = BrowserMinIO()
        cleanups.append(minio.stop)
        say("uploading the single and many layouts")
        client = upload(minio, root)
        presigned = client.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": "tpch/single/nation.parquet"},
            ExpiresIn=PRESIGN_SECONDS)

        folder = os.path.join(work, "http-root")
        os.makedirs(os.path.join(folder, "tpch"))
        for layout in LAYOUTS:
            os.symlink(os.path.join(root, layout), os.path.join(folder, "tpch", layout))
        http = RangeHTTPServer(folder, cors=True).start()
        cleanups.append(http.stop)
        say(f"HTTP server on {http.url} over {folder}")

        function_url = start_coordinator(minio, work, cleanups)
        write_text_tables(folder, root)
        queries = queries_for(http.url, presigned) | text_queries(http.url, folder)
        say(f"computing DuckDB's results for {len(queries)} queries")
        expected = expected_results(root, queries)
        say("writing the Iceberg tables (pyiceberg)")
        iceberg, iceberg_expected = iceberg_queries(http.url, folder)
        queries |= iceberg
        expected_file = os.path.join(work, "expected.json")
        with open(expected_file, "w") as f:
            json.dump(expected | iceberg_expected, f)

        print(json.dumps({
            "http_base": http.url,
            "s3_endpoint": minio.endpoint,
            "bucket": BUCKET,
            "access_key": minio.access_key,
            "secret_key": minio.secret_key,
            "region": minio.region,
            "presigned_url": presigned,
            "function_url": function_url,
            "expected_file": expected_file,
            "single_root": os.path.join(root, "single"),
            "tables": TABLES,
            "queries": {name: sql for name, (sql, _) in queries.items()},
        }), flush=True)
        say("ready; close stdin or send SIGTERM to stop")

        # stdin closing (the test runner exiting, even abruptly) ends the wait.
        reader = threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True)
        reader.start()
        while not stopped.wait(0.5):
            pass
    finally:
        cleanup()
        say("stopped")


if __name__ == "__main__":
    main()
