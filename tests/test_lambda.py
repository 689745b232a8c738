"""Quiver on Lambda, end to end: the real coordinator and worker functions (lambda/) run
under cargo-lambda's emulator (`cargo lambda watch`, which serves the Invoke API and function
URLs), reading the test bucket on MinIO through the counting S3 proxy. The coordinator
invokes its workers through the Invoke API of the same emulator.

Checked against DuckDB: TPC-H SF 0.1 by direct invoke and over the function URL with 4
workers; a worker that fails once (error, panic, crash) is retried and the answer stays
right; an output over 6 MB travels through the S3 result prefix, which is left empty;
`quiver query --executor lambda` fans out from this machine; a failing bucket fails the query
with an error naming it.
"""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import BUCKET, upload_folder
from harness import TIMEOUT, parse_csv
from servers.lambda_emulator import LOOPBACK, LambdaEmulator
from tpch.compare import difference
from tpch.tables import QUERIES, prelude, query_sql

WORKERS = 4
RESULT_PREFIX = "results/"
# One file per table, split into a bucket per row group so that 4 workers share each scan.
SETTINGS = {"lambda.workers": str(WORKERS), "quiver.min_bucket_bytes": "0"}
# TPC-H queries with a join of two scans under a partial aggregate (or a semi join), which
# run through an exchange when every join is partitioned and every build side big.
EXCHANGED = (4, 12, 14, 19, 20)
# DataFusion collects no build side into one partition: every join is partitioned.
PARTITIONED_JOINS = {"datafusion.optimizer.hash_join_single_partition_threshold": "0",
                     "datafusion.optimizer.hash_join_single_partition_threshold_rows": "0"}


class Emulator(LambdaEmulator):
    """`cargo lambda watch` (debug builds) serving the worker and coordinator, with JSON
    requests to them and the file that injects worker faults."""

    def __init__(self, env, fault_file, log_path):
        super().__init__(env, log_path)
        self.fault_file = fault_file

    def request(self, *args, **kwargs):
        """As the emulator's, with its log's end when a request times out (a hang)."""
        offset = self.log_size()
        try:
            return super().request(*args, **kwargs)
        except TimeoutError:
            pytest.fail(f"no answer from the emulator; its log since the request:\n"
                        f"{self.log_text(offset)[-6000:]}")

    def log_size(self):
        return os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0

    def invoke(self, function, payload, timeout=TIMEOUT):
        """Direct invoke through the Invoke API path; (status, function error, body)."""
        status, headers, body = self.request(
            "POST", f"/2015-03-31/functions/{function}/invocations",
            json.dumps(payload).encode(), timeout=timeout)
        return status, headers.get("X-Amz-Function-Error"), json.loads(body or b"null")

    def url_request(self, method, path, body=None, timeout=TIMEOUT):
        """A function URL request to the coordinator; (status, content type, body bytes).

        A query is sent once more if the emulator loses its answer: under CPU load, now and
        then, the coordinator answers (its log says the query is done, and it asks for its
        next event) but the emulator never forwards that answer to the caller. The query
        names itself as a job, so the coordinator's log says whether it finished; a query
        that never finished fails the test as a hang."""
        if not isinstance(body, dict) or "sql" not in body or "job" in body:
            return self._url_request(method, path, body, timeout)
        for attempt in range(2):
            job = f"test-{uuid.uuid4().hex[:12]}"
            offset = self.log_size()
            try:
                return self._url_request(method, path, dict(body, job=job), timeout,
                                         fail_on_timeout=False)
            except TimeoutError:
                log = self.log_text(offset)
                if attempt == 1 or f"scheduled job '{job}' done" not in log:
                    pytest.fail(f"no answer from the emulator; its log since the request:\n"
                                f"{log[-6000:]}")
                print(f"the emulator lost the answer of job {job}, which the coordinator "
                      f"finished; sending the query again")

    def _url_request(self, method, path, body, timeout, fail_on_timeout=True):
        send = self.request if fail_on_timeout else super().request
        status, headers, raw = send(
            method, f"/lambda-url/coordinator{path}",
            None if body is None else json.dumps(body).encode(), timeout=timeout)
        return status, headers.get("content-type"), raw

    def log(self):
        return self.log_text()


@pytest.fixture(scope="module")
def emulator(s3, tmp_path_factory):
    """The emulator with both functions built in debug (into the shared CARGO_TARGET_DIR),
    up to 8 instances of each, the functions reaching S3 through the proxy. Stopped with
    this module: a hedged loser or a late sleeper still reading through the shared proxy
    would add GETs to the exact counts of later modules (test_remote)."""
    folder = tmp_path_factory.mktemp("lambda")
    fault_file = str(folder / "fault")
    env = s3.env(
        # S3 for Quiver only: the SDK's Lambda client must not go to the S3 proxy.
        AWS_ENDPOINT_URL_S3=s3.endpoint,
        QUIVER_WORKER_FUNCTION="worker",
        QUIVER_RESULT_PREFIX=s3.url(RESULT_PREFIX),
        QUIVER_FAULT_FILE=fault_file,
        # Well under the test's own timeout: an invocation the emulator loses is retried
        # in time (a worker here answers in seconds).
        QUIVER_INVOKE_TIMEOUT_SECS="90",
        RUST_LOG="warn",
        # Each function's disk cache on, as deployed, in this module's folder (the instances
        # share it, as a warm instance's requests share its /tmp).
        QUIVER_DISK_CACHE_BYTES=str(256 << 20),
        QUIVER_CACHE_DIR=str(folder / "cache"),
    )
    del env["AWS_ENDPOINT_URL"]
    emulator = Emulator(env, fault_file, str(folder / "emulator.log"))
    try:
        emulator.start()
        # The first request builds the functions (minutes on a cold cache).
        deadline = time.time() + 1800
        while True:
            if emulator.proc.poll() is not None:
                pytest.fail(f"cargo lambda watch exited:\n{emulator.log()[-3000:]}",
                            pytrace=False)
            try:
                status, _, body = emulator.url_request("GET", "/health", timeout=600)
                if status == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.time() > deadline:
                pytest.fail(f"the coordinator never answered /health:\n{emulator.log()[-3000:]}",
                            pytrace=False)
            time.sleep(1)
        yield emulator
    finally:
        emulator.stop()


def _prelude(s3):
    # Views only: the settings travel in the request.
    return "\n".join(line for line in prelude(s3.url("tpch"), "single", "quiver").splitlines()
                     if not line.startswith("SET ")) + "\n"


def check_csv(oracle, n, text, how):
    header, rows = parse_csv(text)
    columns, expected = oracle.expected("single", n)
    assert len(header) == columns, f"q{n:02d} {how}: columns {header}"
    problem = difference(expected, rows)
    assert problem is None, f"q{n:02d} {how}: {problem}"


def invoke_query(emulator, sql, settings=None, fmt="csv"):
    status, error, body = emulator.invoke(
        "coordinator", {"sql": sql, "format": fmt, "settings": settings or SETTINGS})
    assert status == 200 and error is None, f"coordinator failed ({status}, {error}): {body}"
    return body


@pytest.mark.parametrize("n", QUERIES)
def test_tpch_by_direct_invoke(emulator, s3, oracle, n):
    body = invoke_query(emulator, _prelude(s3) + query_sql(n))
    check_csv(oracle, n, body["result"], "by direct invoke")
    # The workers scanned: the bytes came through them, from S3 or, in a warm instance that
    # read these row groups for an earlier query, from its block cache or its /tmp.
    workers = body["metrics"]["workers"]
    assert workers["buckets"] > 0, body["metrics"]
    read = ("bytes_read", "cache_hit_bytes", "disk_cache_hit_bytes")
    assert sum(workers[k] for k in read) > 0, body["metrics"]


@pytest.mark.parametrize("n", QUERIES)
def test_tpch_over_function_url(emulator, s3, oracle, n):
    status, content_type, body = emulator.url_request(
        "POST", "/query", {"sql": _prelude(s3) + query_sql(n), "format": "csv",
                           "settings": SETTINGS})
    assert status == 200, body.decode(errors="replace")
    assert content_type.startswith("text/csv")
    check_csv(oracle, n, body.decode(), "over the function URL")


def test_work_is_spread_over_four_workers(emulator, s3, tpch_data):
    """The lineitem scan is dealt to 4 workers, each with a share of its row groups."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(os.path.join(tpch_data, "single", "lineitem.parquet")).metadata
    # Every row group its own bucket (at most 1 byte per bucket): 7 buckets for 4 workers.
    body = invoke_query(emulator, "SELECT count(*) AS n, sum(l_quantity) AS q FROM " +
                        f"'{s3.url('tpch/single/lineitem.parquet')}'", fmt="json",
                        settings={**SETTINGS, "quiver.max_bucket_bytes": "1"})
    assert body["result"][0]["n"] == metadata.num_rows
    workers = body["metrics"]["workers"]
    assert workers["buckets"] == metadata.num_row_groups, workers
    # Each worker logs "quiver worker N of QUERY: B buckets, ..."; this query's four.
    lines = [line for line in emulator.log().splitlines() if "quiver worker " in line]
    query = lines[-1].split(" of ")[1].split(":")[0]
    mine = [line for line in lines if f" of {query}:" in line]
    numbers = sorted(int(line.split("quiver worker ")[1].split(" ")[0]) for line in mine)
    assert numbers == list(range(WORKERS)), mine


def test_function_url_health_and_errors(emulator):
    status, content_type, body = emulator.url_request("GET", "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, _, body = emulator.url_request("POST", "/query", {"sql": "SELEC 1"})
    assert status == 400 and "SQL" in json.loads(body)["error"], body
    status, _, body = emulator.url_request("POST", "/query", {"query": "SELECT 1"})
    assert status == 400 and "sql" in json.loads(body)["error"], body
    status, _, body = emulator.url_request("GET", "/nowhere")
    assert status == 404, body


def test_arrow_over_function_url(emulator, s3):
    import pyarrow as pa

    status, content_type, body = emulator.url_request(
        "POST", "/query", {"sql": f"SELECT n_name FROM '{s3.url('tpch/single/nation.parquet')}' "
                                  "ORDER BY n_name LIMIT 3", "format": "arrow"})
    assert status == 200 and "arrow" in content_type, body[:200]
    table = pa.ipc.open_file(pa.BufferReader(body)).read_all()
    assert table.column("n_name").to_pylist() == ["ALGERIA", "ARGENTINA", "BRAZIL"]


def test_a_signed_function_url_answers_its_keys_and_refuses_any_other(emulator, s3):
    """Behind a function URL with AWS_IAM auth (tests/servers/function_url.py, as the page
    calls it): a request botocore signs for the `lambda` service is answered, with the
    coordinator's metrics in `x-quiver-metrics` and CORS for the page's origin; an answer
    over 6 MB asked with `redirect: false` comes as a 200 naming its URL; a wrong secret or
    no signature gets AWS's 403."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from servers.function_url import MISMATCH, FunctionUrl

    front = FunctionUrl(emulator.url, {s3.minio.access_key: s3.minio.secret_key},
                        ["http://page.test"]).start()

    def post(body, secret=s3.minio.secret_key, sign=True):
        data = json.dumps(body).encode()
        request = AWSRequest("POST", front.url + "query", data=data,
                             headers={"content-type": "application/json",
                                      "origin": "http://page.test"})
        if sign:
            credentials = Credentials(s3.minio.access_key, secret)
            SigV4Auth(credentials, "lambda", s3.minio.region).add_auth(request)
        prepared = urllib.request.Request(request.url, data=data, method="POST",
                                          headers=dict(request.headers))
        try:
            with LOOPBACK.open(prepared, timeout=TIMEOUT) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    try:
        nation = s3.url("tpch/single/nation.parquet")
        status, headers, body = post({"sql": f"SELECT count(*) AS n FROM '{nation}'"})
        assert status == 200 and json.loads(body) == [{"n": 25}], body
        assert headers["access-control-allow-origin"] == "http://page.test"
        assert "cost:" in json.loads(headers["x-quiver-metrics"])["cost"]

        big = "SELECT i, repeat('x', 100) AS pad FROM generate_series(1, 70000) AS t(i)"
        status, headers, body = post({"sql": big, "format": "csv", "redirect": False})
        handed = json.loads(body)
        assert status == 200 and handed["rows"] == 70000 and "location" not in headers, body
        with LOOPBACK.open(handed["result_url"], timeout=TIMEOUT) as response:
            assert parse_csv(response.read().decode())[1][-1] == ["70000", "x" * 100]
        s3.client().delete_object(Bucket=s3.bucket,
                                  Key=handed["result_url"].split(f"/{s3.bucket}/")[1].split("?")[0])

        status, _, body = post({"sql": "SELECT 1"}, secret="not-the-secret")
        assert status == 403 and json.loads(body)["Message"] == MISMATCH
        status, _, body = post({"sql": "SELECT 1"}, sign=False)
        assert status == 403 and json.loads(body)["Message"] == "Forbidden"
    finally:
        front.stop()


@pytest.mark.parametrize("n", [1, 3, 18])
def test_tree_invocation(emulator, s3, oracle, n):
    """Above the tree threshold (2 here) the coordinator invokes sub-coordinators (itself),
    each invoking 2 workers and merging their partial aggregates (PartialReduce)."""
    settings = {**SETTINGS, "lambda.tree_threshold": "2", "quiver.max_bucket_bytes": "1"}
    body = invoke_query(emulator, _prelude(s3) + query_sql(n), settings=settings)
    check_csv(oracle, n, body["result"], "through sub-coordinators")
    assert body["metrics"]["workers"]["sub_coordinators"] >= 2, body["metrics"]


def test_each_worker_answers_one_partial_aggregate(emulator, s3, tpch_data):
    """Every row group is a bucket here, many per worker; a worker merges its buckets'
    partial aggregate states before answering, so one row per group per worker travels
    back to the coordinator, not one per group per bucket."""
    import duckdb

    sql = ("SELECT l_returnflag, l_linestatus, count(*) AS n, sum(l_quantity) AS q "
           "FROM {} GROUP BY 1, 2 ORDER BY 1, 2")
    body = invoke_query(emulator, sql.format(repr(s3.url("tpch/many/lineitem/*.parquet"))),
                        settings={**SETTINGS, "quiver.max_bucket_bytes": "1"}, fmt="json")
    local = repr(os.path.join(tpch_data, "many", "lineitem", "*.parquet"))
    expected = [{"l_returnflag": f, "l_linestatus": s, "n": n, "q": float(q)}
                for f, s, n, q in duckdb.sql(sql.format(local)).fetchall()]
    assert [dict(r, q=float(r["q"])) for r in body["result"]] == expected
    workers = body["metrics"]["workers"]
    assert workers["buckets"] >= 4 * WORKERS, workers
    assert workers["rows"] <= len(expected) * WORKERS, workers


def test_each_worker_answers_one_top_k(emulator, s3, tpch_data):
    """A TopK runs per bucket on the workers; a worker merges its buckets' top rows into
    its own top k before answering, so k rows per worker travel back, not k per bucket."""
    import duckdb

    sql = ("SELECT l_orderkey, l_linenumber, l_extendedprice FROM {} "
           "ORDER BY l_extendedprice DESC, l_orderkey, l_linenumber LIMIT 7")
    body = invoke_query(emulator, sql.format(repr(s3.url("tpch/many/lineitem/*.parquet"))),
                        settings={**SETTINGS, "quiver.max_bucket_bytes": "1"}, fmt="json")
    local = repr(os.path.join(tpch_data, "many", "lineitem", "*.parquet"))
    expected = [[k, n, float(p)] for k, n, p in duckdb.sql(sql.format(local)).fetchall()]
    assert [[r["l_orderkey"], r["l_linenumber"], float(r["l_extendedprice"])]
            for r in body["result"]] == expected
    workers = body["metrics"]["workers"]
    assert workers["buckets"] >= 4 * WORKERS, workers
    assert workers["rows"] <= 7 * WORKERS, workers


def test_workers_read_exactly_the_footer_the_coordinator_read(emulator, s3, tpch_data):
    """The coordinator finds a file's footer in its last 512 KiB and tells the workers the
    footer's length: each worker's footer read is then exactly the footer and its 8-byte
    tail, not another 512 KiB (16 workers on one file once read 8 MiB of tails)."""
    import pyarrow.parquet as pq

    local = os.path.join(tpch_data, "single", "lineitem.parquet")
    size = os.path.getsize(local)
    with open(local, "rb") as f:
        f.seek(size - 8)
        footer = int.from_bytes(f.read(4), "little") + 8
    # A new key: no function has its footer cached.
    key = f"fresh/lineitem-{time.time_ns()}.parquet"
    s3.client().upload_file(local, s3.bucket, key)
    s3.control.reset()
    try:
        body = invoke_query(emulator, f"SELECT count(*) AS n FROM '{s3.url(key)}' "
                            "WHERE l_quantity > 0",
                            fmt="json", settings={**SETTINGS, "quiver.max_bucket_bytes": "1"})
        requests = s3.control.stats()["requests"]
    finally:
        s3.client().delete_object(Bucket=s3.bucket, Key=key)
    assert body["result"] == [{"n": pq.ParquetFile(local).metadata.num_rows}]
    tails = sorted(r["bytes"] for r in requests
                   if r["kind"] == "GetObject" and r["path"].endswith(key)
                   and (r["range"] or "").endswith(f"-{size - 1}"))
    # The coordinator's read, then one per worker that found the footer in no cache of its
    # own (workers share their disk cache here, as a warm instance's requests do on Lambda;
    # a hedged duplicate may add one): never a 512 KiB tail.
    assert tails[-1] == 512 * 1024 and tails[:-1] == [footer] * (len(tails) - 1), tails
    assert len(tails) - 1 >= 1, tails


def test_a_second_request_reads_repeated_ranges_from_tmp(emulator, s3):
    """What a worker fetched is kept in its function's /tmp: the same scan again, with the
    block cache off so that memory cannot serve it, makes no data GET."""
    key = f"fresh/lineitem-{time.time_ns()}.parquet"
    s3.client().copy_object(Bucket=s3.bucket, Key=key,
                            CopySource={"Bucket": s3.bucket,
                                        "Key": "tpch/single/lineitem.parquet"})
    sql = f"SELECT sum(l_quantity) AS q, sum(l_discount) AS d FROM '{s3.url(key)}'"
    try:
        first = invoke_query(emulator, sql, fmt="json")
        assert first["metrics"]["workers"]["bytes_read"] > 0, first["metrics"]
        wait_for_writes(emulator.env["QUIVER_CACHE_DIR"])
        s3.control.reset()
        second = invoke_query(emulator, sql, fmt="json",
                              settings={**SETTINGS, "quiver.block_cache_bytes": "0"})
        gets = [r for r in s3.control.stats()["requests"]
                if r["kind"] == "GetObject" and r["path"].endswith(key)]
    finally:
        s3.client().delete_object(Bucket=s3.bucket, Key=key)
    assert second["result"] == first["result"]
    workers = second["metrics"]["workers"]
    assert gets == [] and workers["bytes_read"] == 0, (gets, second["metrics"])
    assert workers["disk_cache_hit_bytes"] > 0, second["metrics"]


def wait_for_writes(folder, quiet=0.3, timeout=15):
    """Until no piece is being written under `folder` and its size holds for `quiet` s (the
    functions write what they fetched after they answer)."""
    def state():
        names = [os.path.join(root, n) for root, _, files in os.walk(folder) for n in files]
        return sum(os.path.getsize(n) for n in names if os.path.exists(n)), \
            any(n.endswith(".part") for n in names)
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        now = state()
        if now == last and not now[1]:
            return
        last = now
        time.sleep(quiet)


@pytest.mark.parametrize("fault", ["error", "panic", "crash"])
def test_a_worker_that_fails_once_is_retried(emulator, s3, oracle, fault):
    with open(emulator.fault_file, "w") as f:
        f.write(fault)
    body = invoke_query(emulator, _prelude(s3) + query_sql(1))
    assert not os.path.exists(emulator.fault_file), "no worker took the fault"
    check_csv(oracle, 1, body["result"], f"after a worker {fault}")


def test_a_straggling_worker_gets_a_duplicate_and_the_loser_s_spill_is_deleted(
        emulator, s3, tpch_data):
    """Worker 1 of 2 sleeps 20 s before its first attempt works. Once worker 0 has answered
    (the wave's median), worker 1 gets a duplicate at 3x that time, which answers first; the
    query does not wait for the sleeper. When the sleeper wakes it spills its ~9 MB answer
    like any worker, and the coordinator, no longer waiting, deletes that spill."""
    import duckdb

    sleep = 20
    lineitem = s3.url("tpch/single/lineitem.parquet")
    s3.control.reset()
    with open(emulator.fault_file, "w") as f:
        f.write(f"sleep={sleep} worker=1")
    started = time.time()
    body = invoke_query(emulator, f"SELECT count(DISTINCT l_comment) AS n FROM '{lineitem}'",
                        settings={"lambda.workers": "2", "quiver.min_bucket_bytes": "0"},
                        fmt="json")
    took = time.time() - started
    assert not os.path.exists(emulator.fault_file), "no worker took the fault"
    expected = duckdb.sql("SELECT count(DISTINCT l_comment) FROM read_parquet('" +
                          os.path.join(tpch_data, "single", "lineitem.parquet") +
                          "')").fetchall()[0][0]
    assert body["result"] == [{"n": expected}]
    assert body["metrics"]["workers"]["hedged"] == 1, body["metrics"]
    assert took < sleep, f"the query waited for the straggler ({took:.1f} s)"
    # The sleeper's spill is written after it wakes, then deleted.
    deadline = time.time() + sleep + 60
    while time.time() < deadline:
        counts = s3.control.stats()["counts"]
        deletes = counts.get("DeleteObject", 0) + counts.get("DeleteObjects", 0)
        if counts.get("PutObject") == 3 and deletes == 3:
            break
        time.sleep(0.5)
    assert counts.get("PutObject") == 3 and deletes == 3, counts
    left = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX)
    assert left.get("KeyCount", 0) == 0, left.get("Contents")


def test_fifty_queries_at_once_each_get_their_own_answer(emulator, s3):
    """50 requests at once through the function URL; the emulator runs up to 8 instances of
    each function, so warm instances serve many of them. Each request defines the same view
    name over its own file and offset, with its own worker count: any view, setting, cache
    entry or result leaking from one request into another gives a wrong answer or an error."""
    from concurrent.futures import ThreadPoolExecutor

    def query(k):
        rel = f"small/ids-{k % 2}.parquet"
        sql = (f"SET lambda.workers = {1 + k % 3}; "
               f"CREATE VIEW v AS SELECT id + {k} AS x FROM '{s3.url(rel)}'; "
               f"SELECT sum(x) AS s, count(*) AS n FROM v")
        status, _, body = emulator.url_request(
            "POST", "/query", {"sql": sql, "format": "json",
                               "settings": {"quiver.min_bucket_bytes": "0"}})
        answer = json.loads(body) if status == 200 else body.decode(errors="replace")
        return status, answer, {"s": s3.small[rel] + 1000 * k, "n": 1000}

    with ThreadPoolExecutor(50) as pool:
        outcomes = list(pool.map(query, range(50)))
    wrong = [(k, status, answer, expected) for k, (status, answer, expected)
             in enumerate(outcomes) if status != 200 or answer != [expected]]
    assert wrong == [], wrong[:3]


def test_a_worker_past_its_deadline_is_invoked_again(emulator, s3, oracle):
    """The only worker of a query sleeps 30 s on its first attempt. With no peers there is no
    median to call it a straggler by; its deadline (lambda.attempt_timeout_secs = 3) abandons
    the attempt and invokes it again, and the query answers long before the sleeper wakes."""
    sleep = 30
    with open(emulator.fault_file, "w") as f:
        f.write(f"sleep={sleep} worker=0")
    started = time.time()
    body = invoke_query(emulator, _prelude(s3) + query_sql(6),
                        settings={"lambda.workers": "1", "lambda.attempt_timeout_secs": "3"})
    took = time.time() - started
    assert not os.path.exists(emulator.fault_file), "no worker took the fault"
    check_csv(oracle, 6, body["result"], "after a worker's deadline")
    assert 3 < took < sleep, f"{took:.1f} s"
    assert "(no answer within 3.0 s); attempt 2 of 3" in emulator.log_text(), \
        emulator.log_text()[-3000:]


def test_an_answer_over_6_mb_is_handed_over_through_s3(emulator, s3):
    """A 7.3 MB CSV answer, more than a Lambda response holds: written under the result
    prefix, and a direct invoke answers with a presigned URL to it; the function URL answers
    303 See Other to the same, which an HTTP client follows."""
    sql = "SELECT i, repeat('x', 100) AS pad FROM generate_series(1, 70000) AS t(i)"
    body = invoke_query(emulator, sql, fmt="csv")
    assert "result" not in body and body["rows"] == 70000, body.get("metrics")
    url = body["result_url"]
    assert url.startswith(s3.endpoint) and "X-Amz-Signature=" in url, url
    with LOOPBACK.open(url, timeout=TIMEOUT) as response:
        text = response.read().decode()
    header, rows = parse_csv(text)
    assert header == ["i", "pad"] and len(rows) == 70000 and rows[-1] == ["70000", "x" * 100]
    status, _, raw = emulator.url_request("POST", "/query", {"sql": sql, "format": "csv"})
    assert status == 200 and raw.decode() == text
    client = s3.client()
    answers = client.list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX + "answers/")
    assert answers.get("KeyCount") == 2, answers
    for found in answers["Contents"]:
        client.delete_object(Bucket=s3.bucket, Key=found["Key"])


def test_an_output_over_6_mb_travels_through_s3(emulator, s3, tpch_data):
    """Distinct comments: each of 2 workers returns about 9 MB of partial state, more than a
    response can carry, so each spills under the result prefix; the coordinator reads and
    deletes it."""
    import duckdb

    lineitem = s3.url("tpch/single/lineitem.parquet")
    s3.control.reset()
    body = invoke_query(emulator, f"SELECT count(DISTINCT l_comment) AS n FROM '{lineitem}'",
                        # No duplicate of a slow worker: it would spill a third answer.
                        settings={"lambda.workers": "2", "quiver.min_bucket_bytes": "0",
                                  "lambda.hedge_multiple": "0"},
                        fmt="json")
    expected = duckdb.sql("SELECT count(DISTINCT l_comment) FROM read_parquet('" +
                          os.path.join(tpch_data, "single", "lineitem.parquet") +
                          "')").fetchall()[0][0]
    assert body["result"] == [{"n": expected}]
    counts = s3.control.stats()["counts"]
    deletes = counts.get("DeleteObject", 0) + counts.get("DeleteObjects", 0)
    assert counts.get("PutObject") == 2 and deletes == 2, counts
    assert body["metrics"]["workers"]["rows"] > 2 * 100_000, body["metrics"]
    left = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX)
    assert left.get("KeyCount", 0) == 0, left.get("Contents")


def test_joins_run_on_the_workers_and_a_big_fragment_travels_through_s3(emulator, s3, oracle):
    """TPC-H Q5: the build sides (customers and orders, suppliers, nations, regions) travel to
    the workers that read lineitem, which answer with partial sums instead of lineitem's rows
    (against every join on the coordinator: quiver.broadcast_bytes = 0). With requests held
    to 64 KiB (lambda.inline_bytes), that fragment goes through the result prefix: written
    once, read by each worker, deleted after."""
    sql = _prelude(s3) + query_sql(5)
    here = invoke_query(emulator, sql, settings={**SETTINGS, "quiver.broadcast_bytes": "0"})
    check_csv(oracle, 5, here["result"], "joins on the coordinator")
    s3.control.reset()
    small_requests = {**SETTINGS, "lambda.inline_bytes": "65536", "lambda.hedge_multiple": "0"}
    there = invoke_query(emulator, sql, settings=small_requests)
    check_csv(oracle, 5, there["result"], "joins on the workers")
    before, after = here["metrics"]["workers"], there["metrics"]["workers"]
    assert after["bytes"] * 10 < before["bytes"], (before, after)
    stats = s3.control.stats()
    kinds = [r["kind"] for r in stats["requests"] if r["path"].endswith("/fragment.proto")]
    assert kinds.count("PutObject") >= 1 and kinds.count("GetObject") >= 2, kinds
    left = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX)
    assert left.get("KeyCount", 0) == 0, left.get("Contents")


@pytest.mark.parametrize("n", EXCHANGED)
def test_joins_of_two_big_sides_run_through_an_exchange(emulator, s3, oracle, n):
    """Every join partitioned and every build side over quiver.broadcast_bytes (1 byte
    here): a join of two scans runs in two waves of workers through the result prefix (each
    side hashed into parts, then one worker per part joins), answers equal DuckDB's, and no
    part is left behind."""
    settings = {**SETTINGS, **PARTITIONED_JOINS, "quiver.broadcast_bytes": "1",
                "lambda.hedge_multiple": "0"}
    body = invoke_query(emulator, _prelude(s3) + query_sql(n), settings=settings)
    check_csv(oracle, n, body["result"], "through an exchange")
    assert body["metrics"]["workers"]["exchanged"] > 0, body["metrics"]["workers"]
    left = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX)
    assert left.get("KeyCount", 0) == 0, left.get("Contents")


def test_a_join_of_two_sides_over_the_coordinator_s_memory_limit(emulator, s3, tpch_data):
    """orders and lineitem (each over 2 MB here) joined with the coordinator held to 2 MB:
    joined on the coordinator, the hash table does not fit and the query fails naming the
    limit; through the exchange the workers join (their own memory, not the coordinator's)
    and the coordinator only merges partial sums."""
    import duckdb

    # No ORDER BY: a sort reserves 10 MB up front (datafusion.execution.
    # sort_spill_reservation_bytes), over this limit.
    sql = ("SELECT o_orderpriority, count(*) AS n, sum(l_quantity) AS q "
           "FROM {orders} JOIN {lineitem} ON l_orderkey = o_orderkey GROUP BY 1")
    remote = {t: repr(s3.url(f"tpch/single/{t}.parquet")) for t in ("orders", "lineitem")}
    # At SF 0.1 orders' side is ~1 MB of Parquet: a 64 KiB broadcast limit makes it big.
    settings = {**SETTINGS, "quiver.memory_limit": "2MB", "quiver.broadcast_bytes": "65536",
                "lambda.hedge_multiple": "0"}
    status, error, body = emulator.invoke("coordinator", {
        "sql": sql.format(**remote), "format": "json",
        "settings": {**settings, "lambda.exchange_joins": "false"}})
    assert "result" not in body and "quiver.memory_limit" in body["errorMessage"], body
    body = invoke_query(emulator, sql.format(**remote), settings=settings, fmt="json")
    local = {t: repr(os.path.join(tpch_data, "single", f"{t}.parquet"))
             for t in ("orders", "lineitem")}
    expected = sorted([p, n, float(q)] for p, n, q in duckdb.sql(sql.format(**local)).fetchall())
    answer = sorted([r["o_orderpriority"], r["n"], float(r["q"])] for r in body["result"])
    assert answer == expected
    workers = body["metrics"]["workers"]
    assert workers["exchanged"] > 2 * 1024 * 1024, workers
    assert workers["rows"] <= 5 * WORKERS, workers


def test_a_failed_query_still_reads_and_deletes_the_spills_of_the_other_workers(emulator, s3):
    """Worker 1 of 2 fails (every attempt) while worker 0 spills its ~9 MB answer: the query
    fails, but only after worker 0's spill was read and deleted; none is left. (Here the
    emulator answers a function error with a 500, which the SDK retries, so worker 1 fails
    late; on AWS it fails at once, and the coordinator used to drop worker 0 unread.)"""
    lineitem = s3.url("tpch/single/lineitem.parquet")
    s3.control.reset()
    with open(emulator.fault_file, "w") as f:
        f.write("error always worker=1")
    try:
        status, error, body = emulator.invoke("coordinator", {
            "sql": f"SELECT count(DISTINCT l_comment) AS n FROM '{lineitem}'", "format": "json",
            "settings": {"lambda.workers": "2", "lambda.retries": "0",
                         "quiver.min_bucket_bytes": "0"}})
    finally:
        os.remove(emulator.fault_file)
    assert "result" not in body and "injected fault: error" in body["errorMessage"], body
    counts = s3.control.stats()["counts"]
    deletes = counts.get("DeleteObject", 0) + counts.get("DeleteObjects", 0)
    assert counts.get("PutObject") == 1 and deletes == 1, counts
    left = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=RESULT_PREFIX)
    assert left.get("KeyCount", 0) == 0, left.get("Contents")


def test_a_worker_that_keeps_failing_fails_the_query_naming_its_bucket(emulator, s3):
    """Every worker attempt fails: after its retries the query fails, the error names the
    worker's bucket and the cause, and no partial result comes back as a result."""
    sql = f"SELECT sum(id) AS s FROM '{s3.url('small/')}*.parquet'"
    settings = {"lambda.retries": "1", "lambda.workers": "2"}
    with open(emulator.fault_file, "w") as f:
        f.write("error always")
    try:
        status, error, body = emulator.invoke(
            "coordinator", {"sql": sql, "format": "json", "settings": settings})
    finally:
        os.remove(emulator.fault_file)
    # (The emulator does not set X-Amz-Function-Error; AWS does. The body says it.)
    assert "result" not in body and "errorMessage" in body, (error, body)
    message = body["errorMessage"]
    assert "failed after 2 attempts" in message, message
    assert "bucket s3://quiver-test/small/ids-" in message, message
    assert "injected fault: error" in message, message
    ok = invoke_query(emulator, sql, settings=settings, fmt="json")
    assert ok["result"] == [{"s": sum(s3.small.values())}]


def test_cli_fans_out_to_the_emulator(emulator, s3, quiver, oracle):
    env = s3.env(AWS_ENDPOINT_URL_S3=s3.endpoint, QUIVER_RESULT_PREFIX=s3.url(RESULT_PREFIX))
    del env["AWS_ENDPOINT_URL"]
    sql = "SET quiver.min_bucket_bytes = 0;\n" + _prelude(s3) + query_sql(6)
    proc = subprocess.run(
        [quiver.path, "query", "--format", "csv", "--executor", "lambda", "--function", "worker",
         "--workers", "3", "--lambda-endpoint", emulator.url, "--profile", "-"],
        input=sql, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert proc.returncode == 0, proc.stderr
    check_csv(oracle, 6, proc.stdout, "from the CLI")
    # Each worker measures its own peak memory (its function's, on Lambda).
    held = re.search(r"^lambda workers: .*, (\d+) MB held by the largest,", proc.stderr, re.M)
    assert held and int(held[1]) > 1, proc.stderr
    spent = re.search(r"^cost: (\d+) GETs .*, (\d+) worker invocations, ([0-9.]+) GB-seconds, "
                      r"\$([0-9.]+)$", proc.stderr, re.M)
    assert spent and int(spent[2]) == 3, proc.stderr
    # The estimate, from the footers alone: the same 3 workers, and a price on them.
    estimate = subprocess.run(
        [quiver.path, "query", "--format", "json", "--executor", "lambda", "--function", "worker",
         "--workers", "3", "--lambda-endpoint", emulator.url, "--dry-run", "-"],
        input=sql, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert estimate.returncode == 0, estimate.stderr
    [row] = json.loads(estimate.stdout)
    assert row["workers"] == 3 and row["gb_seconds"] > 0, row
    assert row["dollars"] > row["gets"] * 0.0004 / 1000, row
    # With the coordinator named, above the tree threshold (2 here) it is invoked as a
    # sub-coordinator for each group of workers, as the coordinator function itself does.
    tree = "SET lambda.tree_threshold = 2;\nSET quiver.max_bucket_bytes = 1;\n" + sql
    proc = subprocess.run(
        [quiver.path, "query", "--format", "csv", "--executor", "lambda", "--function", "worker",
         "--coordinator", "coordinator", "--workers", "4", "--lambda-endpoint", emulator.url,
         "--profile", "-"],
        input=tree, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert proc.returncode == 0, proc.stderr
    check_csv(oracle, 6, proc.stdout, "from the CLI through sub-coordinators")
    assert re.search(r"^lambda workers: .*, ([2-9]|\d\d+) sub-coordinators$", proc.stderr,
                     re.M), proc.stderr


def test_auto_runs_small_queries_here_and_slow_ones_on_the_workers(
        emulator, s3, quiver, oracle, tpch_data, tmp_path):
    """`auto` (the default where a worker function is named) runs Q6 here while it reads
    under `quiver.lambda_min_bytes`, and measures the bucket's bandwidth as it does; with
    the floor lowered and a rates file that says this machine reads the bucket at 1 MB/s,
    the workers are faster and run it, and their answers measure the function. Both answers
    are DuckDB's. A ceiling below both
    estimates refuses the query; files on this machine never leave it."""
    env = s3.env(AWS_ENDPOINT_URL_S3=s3.endpoint, QUIVER_RESULT_PREFIX=s3.url(RESULT_PREFIX))
    del env["AWS_ENDPOINT_URL"]
    sql = _prelude(s3) + query_sql(6)

    def run(folder, *settings, query=sql):
        flags = [f"--set=quiver.cache_dir={folder}"] + [f"--set={s}" for s in settings]
        return subprocess.run(
            [quiver.path, "query", "--format", "csv", "--function", "worker", "--workers", "3",
             "--lambda-endpoint", emulator.url, "--profile", *flags, "-"],
            input=query, capture_output=True, text=True, timeout=TIMEOUT, env=env)

    here = run(tmp_path / "measured")
    assert here.returncode == 0, here.stderr
    check_csv(oracle, 6, here.stdout, "run here by auto")
    assert re.search(r"^place: local \(not lambda: \d+ MB read, under quiver.lambda_min_bytes",
                     here.stderr, re.M), here.stderr
    assert "lambda workers:" not in here.stderr, here.stderr
    measured = json.loads((tmp_path / "measured" / "rates.json").read_text())
    assert measured["sources"]["s3://quiver-test"]["bytes_per_second"]["samples"] >= 1, measured

    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "rates.json").write_text(json.dumps({"sources": {"s3://quiver-test": {
        "bytes_per_second": {"value": 1e6, "samples": 5},
        "latency_seconds": {"value": 0.03, "samples": 5}}}}))
    there = run(slow, "quiver.lambda_min_bytes=0")
    assert there.returncode == 0, there.stderr
    check_csv(oracle, 6, there.stdout, "sent to the workers by auto")
    assert re.search(r"^place: lambda \(the faster; estimates: local [0-9.]+ s \$[0-9.]+, "
                     r"lambda [0-9.]+ s \$[0-9.]+\)$", there.stderr, re.M), there.stderr
    assert re.search(r"^lambda workers: [1-9]", there.stderr, re.M), there.stderr
    # Each worker's answer is a sample of its function's round trip, kept beside this
    # machine's rates for the next estimate, which `quiver calibrate` shows.
    workers = json.loads((slow / "rates.json").read_text())["workers"]
    [(function, worker)] = workers.items()
    assert function.startswith("worker ") and function.endswith(" MB"), workers
    assert worker["invoke_seconds"]["samples"] >= 1, workers
    shown = quiver.run("calibrate", f"--set=quiver.cache_dir={slow}")
    assert shown.returncode == 0, shown.stderr
    assert re.search(rf"^lambda {function}: [0-9.]+ MB/s a worker \(\d+ samples?\), invoke "
                     r"\d+ ms \([1-9]\d* samples?\)$", shown.stdout, re.M), shown.stdout

    refused = run(slow, "quiver.lambda_min_bytes=0", "quiver.place=cheapest",
                  "quiver.max_dollars=0.0000001")
    assert refused.returncode != 0, refused.stdout
    assert re.search(r"the query is estimated at \$[0-9.]+ here, \$[0-9.]+ on Lambda, above "
                     r"quiver.max_dollars \(\$0.0000001\)", refused.stderr), refused.stderr

    lineitem = os.path.join(tpch_data, "single", "lineitem.parquet")
    local = run(slow, "quiver.lambda_min_bytes=0", "quiver.place=lambda",
                query=f"SELECT sum(l_quantity) FROM '{lineitem}'")
    assert local.returncode == 0, local.stderr
    assert "place: local (not lambda: it reads files on this machine" in local.stderr, local.stderr
    assert "lambda workers:" not in local.stderr, local.stderr


def test_an_iceberg_table_is_planned_by_the_coordinator_and_read_by_the_workers(
        emulator, s3, iceberg_tables, quiver):
    """The coordinator reads the metadata and manifests; the workers get the data files'
    buckets, with their deleted rows (position deletes) and the columns matched by field id;
    the answers are those of the same tables read locally (test_iceberg checks those against
    DuckDB)."""
    _, tables = iceberg_tables
    client = s3.client()
    run = uuid.uuid4().hex  # the bucket outlives sessions: a prefix of this run's own
    for name in ("posdeletes", "evolved"):
        upload_folder(client, BUCKET, tables[name]["location"].removeprefix("file://"),
                      f"iceberg/{run}/{name}")
    sql = {"posdeletes": "SELECT count(*), sum(id), min(ts), max(amount) FROM {}",
           "evolved": "SELECT full_name, qty, note FROM {} WHERE id % 40 = 1 ORDER BY id"}
    for name, query in sql.items():
        local = quiver.csv(query.format(f"iceberg_scan('{tables[name]['location']}')"))
        remote = query.format(f"iceberg_scan('{s3.url(f'iceberg/{run}/{name}')}', "
                              "allow_moved_paths => true)")
        body = invoke_query(emulator, remote)
        assert parse_csv(body["result"]) == local, (name, body["result"])
        assert body["metrics"]["workers"]["buckets"] > 0, body["metrics"]


def test_cli_lambda_needs_a_function(quiver):
    proc = quiver.run("query", "--executor", "lambda", "SELECT 1")
    assert proc.returncode != 0 and "--function" in proc.stderr, proc.stderr


def test_copy_is_written_by_the_workers_and_reads_back_equal(emulator, s3, tpch_data, quiver):
    """A fanned-out COPY: each of 4 workers writes its own files; the coordinator writes
    the manifest last. Reading the output back gives the query's rows."""
    import duckdb

    lineitem = s3.url("tpch/single/lineitem.parquet")
    prefix = "copy-out/"
    client = s3.client()
    for old in client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", []):
        client.delete_object(Bucket=s3.bucket, Key=old["Key"])
    query = ("SELECT l_orderkey, l_linenumber, l_quantity, l_returnflag FROM {} "
             "WHERE l_shipdate < DATE '1993-01-01'")
    body = invoke_query(emulator, f"COPY ({query.format(repr(lineitem))}) TO "
                                  f"'{s3.url(prefix)}' (FORMAT parquet, PARTITION_BY (l_returnflag))",
                        fmt="json")
    local = os.path.join(tpch_data, "single", "lineitem.parquet")
    expected = sorted(duckdb.sql(query.format(repr(local))).fetchall())
    assert body["result"][0]["rows"] == len(expected)
    manifest = json.loads(client.get_object(Bucket=s3.bucket,
                                            Key=prefix + "_quiver_manifest.json")["Body"].read())
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket,
                                                           Prefix=prefix)["Contents"])
    assert sorted(f["path"] for f in manifest["files"]) == \
        sorted(s3.url(k) for k in keys if k.endswith(".parquet"))
    # Files come from several workers: their names carry each worker's own job suffix.
    jobs = {f["path"].rsplit("/part-", 1)[1] for f in manifest["files"]}
    assert len(jobs) >= WORKERS, jobs
    # Read back with quiver itself, hive columns from the folder names.
    env = s3.env()
    back = subprocess.run(
        [quiver.path, "query", "--format", "csv",
         "SELECT l_orderkey, l_linenumber, l_quantity, l_returnflag FROM read_parquet("
         f"'{s3.url(prefix)}**/*.parquet', hive_partitioning => true)"],
        capture_output=True, text=True, env=env, timeout=TIMEOUT)
    assert back.returncode == 0, back.stderr
    _, rows = parse_csv(back.stdout)
    actual = sorted((int(a), int(b), float(c), d) for a, b, c, d in rows)
    assert actual == sorted((a, b, float(c), d) for a, b, c, d in expected)


def test_a_scheduled_job_refreshes_an_index_that_queries_then_use(emulator, s3, tmp_path):
    """The story's daily materialized view: a scheduled job (EventBridge's input, `job` set)
    CALLs quiver_index_refresh through the coordinator; the next query drops files by it."""
    from test_index import shuffled_days

    shuffled_days(str(tmp_path), 10)
    prefix = f"indexed-{os.getpid()}-{int(time.time())}/"
    client = s3.client(direct=True)
    for name in os.listdir(tmp_path):
        client.upload_file(str(tmp_path / name), s3.bucket, prefix + name)
    glob = s3.url(prefix + "*.parquet")
    status, error, body = emulator.invoke("coordinator", {
        "sql": f"CALL quiver_index_refresh('{glob}')", "format": "json", "job": "nightly-index"})
    assert status == 200 and error is None, body
    assert body["result"] == [{"location": s3.url(prefix + "_quiver_index"), "glob": glob,
                               "files": 10, "changed": 0, "deleted": 0, "footers_read": 10,
                               "built_at_ms": body["result"][0]["built_at_ms"]}]
    assert "scheduled job 'nightly-index' done" in emulator.log()
    body = invoke_query(emulator, f"SELECT count(*) AS n FROM '{glob}' WHERE date >= '2024-01-09'",
                        fmt="json")
    assert body["result"] == [{"n": 100}]
    assert body["metrics"]["coordinator"]["files_index_pruned"] == 8, body["metrics"]


def test_no_key_reaches_an_answer_a_profile_or_a_log(emulator, s3, quiver):
    """Last in this file, so that the emulator's log holds what both functions printed for
    every test before it (failures, retries, spills, stragglers). Then the CLI, with the same
    keys, through --profile, EXPLAIN, EXPLAIN ANALYZE, a fan-out and a denied request."""
    keys = [s3.minio.secret_key, s3.minio.secret_key[:12]]
    url = s3.url("tpch/single/nation.parquet")
    env = s3.env(AWS_ENDPOINT_URL_S3=s3.endpoint)
    del env["AWS_ENDPOINT_URL"]  # the SDK's Lambda client goes to the emulator
    outputs = [emulator.log()]
    for args in (["query", "--profile", f"SELECT count(*) FROM '{url}'"],
                 ["explain", f"SELECT sum(n_nationkey) FROM '{url}'"],
                 ["query", f"EXPLAIN ANALYZE SELECT sum(n_nationkey) FROM '{url}'"],
                 ["query", "--executor", "lambda", "--function", "worker", "--lambda-endpoint",
                  emulator.url, "--profile", f"SELECT count(*) FROM '{url}'"],
                 ["query", f"SELECT count(*) FROM '{s3.url('no-such/*.parquet')}'"]):
        proc = quiver.run(*args, env=env)
        outputs += [proc.stdout, proc.stderr]
    denied = quiver.run("query", f"SELECT count(*) FROM '{url}'",
                        env=s3.env(AWS_SECRET_ACCESS_KEY="Kn0wnButWrong/SecretForQuiverTest"))
    assert "access denied" in denied.stderr, denied.stderr
    outputs += [denied.stdout, denied.stderr]
    status, error, body = emulator.invoke(
        "coordinator", {"sql": f"SELECT count(*) FROM '{s3.url('no-such/*.parquet')}'"})
    outputs.append(json.dumps(body))
    for key in keys + ["Kn0wnButWrong"]:
        for text in outputs:
            at = text.find(key)
            assert at < 0, f"a key was printed: …{text[max(0, at - 200):at + 200]}"
