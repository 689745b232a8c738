"""Scenario `lambda`: scan time against the number of Lambda workers (1, 2, 4, 8, 16), and one
file against the same rows in 16 files.

The real coordinator and worker functions (lambda/) run under cargo-lambda's emulator
(`cargo lambda watch`, up to 16 instances of each function, built with the dev profile, which
is optimised: the scan here is bound by the capped connections, and a release build of the two
functions is another half hour cold on 2 cores) and read TPC-H lineitem
from MinIO through the counting proxy (tests/servers/s3_proxy.py), which adds LATENCY_MS
before each request and caps each connection at BANDWIDTH_MB_S. A query is a direct invoke
of the coordinator with `lambda.workers = N`; the coordinator plans it, deals the lineitem
buckets to N workers (invoked at once through the emulator's Invoke API) and merges their
partial results.

The emulator runs every worker on this machine's cores (2 here), so compute does not scale
with N: what the scenario shows is how much latency and per-connection bandwidth N workers
hide, each with its own connections, which is what real Lambda (one machine per worker) gives
on top of the compute. The per-connection cap is low on purpose (8 MB/s) so that the scan is
bound by I/O, not by the shared cores.

Queries: TPC-H Q1 and Q6, and `SELECT count(*), sum(l_extendedprice) FROM lineitem`, all over
lineitem alone. Each is checked against DuckDB on the local copy of the same file before any
time counts (a wrong or failed run is reported, never timed). For each N:

- first: the first run of the query at that N, MinIO's files of the object evicted from the
  page cache just before. The functions are warm (see warm-up below), so this is "cold data",
  not a cold start.
- hot: the best of `--reps` further runs (1 with --quick).

Settings sent with every query: `lambda.workers` = N; `quiver.min_bucket_bytes = 0` and
`quiver.max_bucket_bytes = 1`, so that every row group is its own bucket whatever the
coordinator's thread count (with its 2 threads the planner would otherwise aim at 4 buckets,
fewer than 8 workers) and the bucket plan is the same for every N; `quiver.block_cache_bytes =
0`, so every run reads its bytes through the proxy (the emulator hands invocations to its
instances in turn, so a worker's block cache would hit by chance, as it would on Lambda);
`lambda.retries = 0`, so a failed worker fails the run instead of hiding in its time.

Warm-up (not timed): the functions are built and started (the first request builds them:
minutes, up to an hour cold), then WARMUP_RUNS queries at 8 workers start every instance and
fill each one's footer cache; their footer reads are reported (one per file per instance is
the budget).

Reference row: the local `quiver` command (default executor and settings, one process per
run) through the same proxy.

Requests and bytes are the proxy's counts for each run; the workers' own metrics come from
the coordinator's answer (`metrics.workers`, summed over workers) and the emulator's log
(each worker's time). More workers must not mean more requests or bytes, beyond one footer
read per file per worker.
"""
import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
from servers.lambda_emulator import LOOPBACK, LambdaEmulator
from tpch.tables import query_sql

from benches import charts, data, measure, objectstore, report
from benches.engines import EngineError, Quiver, Result, rows_of

NAME = "lambda"
TITLE = "Scan time against Lambda workers (emulated)"
WORKERS = (1, 2, 4, 8, 16)
# The same rows in 16 files (benches/data.py split16, row groups of the same size), read at
# these worker counts: one big file must not be slower to fan out than many small ones.
SPLIT_WORKERS = (16,)
LATENCY_MS = 20      # before each request, as in scenario s3
BANDWIDTH_MB_S = 8   # per connection: low, so that the scan is I/O-bound on 2 shared cores
# lineitem gets at least this many row groups (buckets): 4 per worker at 8 workers. TPC-H SF 1
# and up have more in single/lineitem.parquet (100,000 rows each); SF 0.1 has 7, so a copy
# with smaller row groups is made for this scenario.
MIN_ROW_GROUPS = 32
CONCURRENCY = 16     # emulator instances per function (cargo lambda watch --concurrency)
WARMUP_RUNS = CONCURRENCY  # the emulator hands invocations to its instances in turn
BUILD_TIMEOUT = 3600  # seconds for the first requests, which build the functions
KINDS = ("cold", "hot")  # "cold" is shown as "first": the first run at each worker count
KIND_LABEL = {"cold": "first", "hot": "hot"}

COUNT_SQL = "SELECT count(*) AS n, sum(l_extendedprice) AS s FROM lineitem"
WARMUP_SQL = "SELECT count(*) AS n, sum(l_quantity) AS q FROM lineitem"
QUERY_TEXT = {"q01": "TPC-H Q1 (`tests/tpch/queries/q01.sql`)",
              "q06": "TPC-H Q6 (`tests/tpch/queries/q06.sql`)",
              "count": f"`{COUNT_SQL}`"}
WORKER_LINE = re.compile(r"quiver worker (\d+) of (\S+): (\d+) buckets, (\d+) rows, (\d+) "
                         r"requests, (\d+) bytes in (\d+) ms")
RETRY_LINE = re.compile(r"quiver: worker \d+ of query \S+ failed")
BUILD_FAILED = re.compile(r"^error: (could not compile|failed to)", re.MULTILINE)


@dataclass(frozen=True)
class Column:
    """One column of the tables: the local reference, or the Lambda executor at N workers."""
    name: str
    label: str
    workers: int = 0  # 0: local


LOCAL = Column("quiver", "Quiver, local")
LAMBDA = {n: Column(f"lambda-{n}", f"Lambda, {n} worker{'s' if n > 1 else ''}", n)
          for n in WORKERS}
SPLIT = {n: Column(f"lambda-{n}-split16", f"Lambda, {n} workers, 16 files", n)
         for n in SPLIT_WORKERS}
for _n, _color in zip(WORKERS, ("#c6dbef", "#9ecae1", "#4292c6", "#2171b5", "#08306b")):
    charts.COLORS.setdefault(f"lambda-{_n}", _color)
for _n in SPLIT_WORKERS:
    charts.COLORS.setdefault(f"lambda-{_n}-split16", "#fd8d3c")


def settings(n):
    """What every query at n workers sends (see the module's docstring)."""
    return {"lambda.workers": str(n), "lambda.retries": "0", "quiver.min_bucket_bytes": "0",
            "quiver.max_bucket_bytes": "1", "quiver.block_cache_bytes": "0"}


def run(bench):
    options = bench.options
    sf = bench.mode.sf
    timeout = float(getattr(options, "timeout", 900))
    port = getattr(options, "minio_port", 9300)
    path, key, row_groups = lineitem(sf)
    queries = {"q01": query_sql(1), "q06": query_sql(6), "count": COUNT_SQL}
    expected, problems = _expected(bench, path, queries)
    base = next((e for e in bench.engines if e.name == "quiver"), None)
    columns = (([LOCAL] if base is not None else []) + [LAMBDA[n] for n in WORKERS]
               + [SPLIT[n] for n in SPLIT_WORKERS])
    split_folder = os.path.join(data.split16(sf), "lineitem")
    split_files = {f"lambda-sf{sf}/split16/{name}": os.path.join(split_folder, name)
                   for name in sorted(os.listdir(split_folder)) if name.endswith(".parquet")}
    results = {q: {} for q in queries}
    info = {"path": path, "key": key, "row_groups": row_groups, "sf": sf,
            "local": base is not None}

    minio, proxy, emulator, failure = objectstore.MinIO(port), None, None, None
    try:
        minio.start()
        uploaded = objectstore.upload(minio.client(), objectstore.BUCKET,
                                      {key: path, **split_files})
        print(f"  {NAME}: s3://{objectstore.BUCKET}/{key} on {minio.endpoint} ({row_groups} row "
              f"groups{', uploaded now' if uploaded else ''})", flush=True)
        proxy = objectstore.Proxy(minio.endpoint, LATENCY_MS / 1e3, BANDWIDTH_MB_S * 1e6,
                                  os.path.join(data.ROOT, "lambda-s3-proxy.log")).start()
        endpoint = minio.endpoint_for(proxy.url, objectstore.BUCKET)
        files = _object_files(minio, key)
        context = _Context(bench, lambda: bench.cache.evict(files))
        split_key = f"lambda-sf{sf}/split16/"
        split_objects = _object_files(minio, split_key.rstrip("/"))
        split_context = _Context(bench, lambda: bench.cache.evict(split_objects))
        if base is not None:
            local = Quiver(base.binary, base.timeout, base.executor, base.args, endpoint.env(),
                           LOCAL.name, LOCAL.label)
            setup = local.view("lineitem", endpoint.s3_url(key))
            for q, sql in queries.items():
                results[q][LOCAL.name] = _measure(
                    context, lambda: local.session_runs(setup, sql, 1, proxy.counter)[0],
                    expected[q], problems.get(q))
                _progress(f"{q} local", results[q][LOCAL.name])
        emulator = Emulator(function_env(minio, proxy.url, timeout), timeout,
                            os.path.join(data.ROOT, "lambda-emulator.log"))
        info["log"] = emulator.log_path
        emulator.start()
        info["ready_s"] = emulator.wait_ready()
        setup_sql = f"CREATE OR REPLACE VIEW lineitem AS SELECT * FROM " \
                    f"read_parquet('{endpoint.s3_url(key)}');\n"
        info["warmup"] = _warm_up(emulator, setup_sql, proxy.counter)
        for n in WORKERS:
            for q, sql in queries.items():
                outcome = _measure(
                    context, lambda: emulator.query(setup_sql + sql, settings(n), proxy.counter),
                    expected[q], problems.get(q))
                results[q][LAMBDA[n].name] = outcome
                _progress(f"{q} workers={n}", outcome)
        split_sql = (f"CREATE OR REPLACE VIEW lineitem AS SELECT * FROM read_parquet("
                     f"'{endpoint.s3_url(split_key + '*.parquet')}');\n")
        # The same warm caches as the one file had: its 16 footers in every instance.
        info["split_warmup"] = _warm_up(emulator, split_sql, proxy.counter)
        for n in SPLIT_WORKERS:
            for q, sql in queries.items():
                outcome = _measure(
                    split_context,
                    lambda: emulator.query(split_sql + sql, settings(n), proxy.counter),
                    expected[q], problems.get(q))
                results[q][SPLIT[n].name] = outcome
                _progress(f"{q} workers={n}, 16 files", outcome)
    except objectstore.ServerError as e:
        failure = str(e)
        print(f"  {NAME}: not run (further): {failure}", flush=True)
    finally:
        if emulator is not None:
            emulator.stop()
        if proxy is not None:
            proxy.stop()
        minio.stop()
    if not any(results.values()):
        return report.Section(NAME, TITLE, f"Not run: {failure}\n", [], [f"not run: {failure}"])
    for outcomes in results.values():
        for c in columns:
            outcomes.setdefault(c.name, measure.Outcome("error", note="not run (see below)"))
    info["failure"] = failure
    return _section(bench, results, columns, info)


# --- data ---------------------------------------------------------------------------------

def lineitem(sf):
    """(local path, object key, row groups) of the lineitem this scenario reads: TPC-H's
    single/lineitem.parquet, or a copy with MIN_ROW_GROUPS row groups when it has fewer."""
    source = os.path.join(data.tpch(sf), "single", "lineitem.parquet")
    groups = pq.ParquetFile(source).metadata.num_row_groups
    if groups >= MIN_ROW_GROUPS:
        return source, f"tpch-sf{sf}/single/lineitem.parquet", groups
    stamp = os.stat(source)
    folder = data.generate(f"lambda-sf{sf}",
                            f"{source} {stamp.st_size} {stamp.st_mtime_ns} {MIN_ROW_GROUPS}",
                            lambda tmp: _regroup(source, tmp))
    path = os.path.join(folder, "lineitem.parquet")
    return path, f"lambda-sf{sf}/lineitem.parquet", pq.ParquetFile(path).metadata.num_row_groups


def _regroup(source, folder):
    table = pq.read_table(source).combine_chunks()
    rows = -(-table.num_rows // MIN_ROW_GROUPS)
    pq.write_table(table, os.path.join(folder, "lineitem.parquet"), row_group_size=rows,
                   compression="snappy")


def _object_files(minio, key):
    """MinIO's files holding the object (evicted before a first run); the bucket's if unknown."""
    everything = minio.bucket_files(objectstore.BUCKET)
    folder = os.path.join(minio.data_dir, objectstore.BUCKET, *key.split("/")) + os.sep
    return [p for p in everything if p.startswith(folder)] or everything


def _expected(bench, path, queries):
    """DuckDB's rows for each query over the local file, and why where it failed."""
    reference = next(e for e in bench.engines if e.name == "duckdb")
    expected, problems = {}, {}
    for q, sql in queries.items():
        try:
            expected[q] = reference.run(reference.view("lineitem", path), sql).rows
        except EngineError as e:
            expected[q], problems[q] = None, f"DuckDB on the local file failed: {e}"
    return expected, problems


# --- measuring ------------------------------------------------------------------------------

@dataclass
class _Context:
    bench: object
    evict: object  # empties the page cache of the object's files


def _measure(context, run_once, expected, problem):
    """Outcome of a first run and `reps` hot runs, each checked against `expected` before its
    time counts. stats: {"cold": first run, "hot": best hot run}, each as _summary()."""
    if expected is None:
        return measure.Outcome("unchecked", note=problem)
    stats = {}
    context.evict()
    runs = []
    for i in range(1 + context.bench.mode.reps):
        which = "first run" if i == 0 else f"hot run {i}"
        try:
            result = run_once()
        except EngineError as e:
            return measure.Outcome("error", note=f"{which}: {e}", stats=stats)
        if i == 0:
            stats["cold"] = _summary(result)
        wrong = measure.check(expected, result.rows)
        if wrong is not None:
            return measure.Outcome("wrong", note=f"{which}: {wrong}", stats=stats)
        runs.append(result)
    best = min(runs[1:], key=lambda r: r.seconds)
    stats["hot"] = _summary(best)
    return measure.Outcome("ok", cold=runs[0].seconds, hot=best.seconds, stats=stats)


def _summary(result):
    return {"seconds": result.seconds, "counts": result.server.get("counts", {}),
            "bytes": result.server.get("bytes", {}), "metrics": result.stats}


def _progress(label, outcome):
    if outcome.ok:
        gets = "/".join(str(_gets(outcome, kind)) for kind in KINDS)
        text = (f"{report.seconds(outcome.cold)}/{report.seconds(outcome.hot)} s "
                f"({gets} GETs)")
    else:
        text = f"{outcome.status}: {outcome.note[:200]}"
    print(f"  {NAME} {label}: {text}", flush=True)


def _warm_up(emulator, setup_sql, counter):
    """WARMUP_RUNS queries at the most workers (every instance started, its footer cache filled);
    returns what they read: footer requests of the workers and of the coordinators."""
    warm = {"runs": 0, "worker_footers": 0, "coordinator_footers": 0, "gets": 0,
            "seconds": 0.0, "errors": []}
    started = time.time()
    for _ in range(WARMUP_RUNS):
        try:
            result = emulator.query(setup_sql + WARMUP_SQL, settings(max(WORKERS)), counter)
        except EngineError as e:
            warm["errors"].append(str(e))
            continue
        metrics = result.stats
        warm["runs"] += 1
        warm["worker_footers"] += metrics.get("workers", {}).get("footer_requests", 0)
        warm["coordinator_footers"] += metrics.get("coordinator", {}).get("footer_requests", 0)
        warm["gets"] += result.server.get("counts", {}).get("GetObject", 0)
    warm["seconds"] = time.time() - started
    print(f"  {NAME}: warm-up, {warm['runs']} of {WARMUP_RUNS} queries at {max(WORKERS)} "
          f"workers in {warm['seconds']:.1f} s: footer reads by workers "
          f"{warm['worker_footers']}, by coordinators {warm['coordinator_footers']}"
          + (f"; errors: {warm['errors'][0][:200]}" if warm["errors"] else ""), flush=True)
    if not warm["runs"]:
        raise objectstore.ServerError(f"every warm-up query failed: {warm['errors'][0]}")
    return warm


# --- the emulator ---------------------------------------------------------------------------

def function_env(minio, s3_url, timeout):
    """The emulator's environment, which its functions inherit: S3 (for Quiver only: not
    AWS_ENDPOINT_URL, which would send the SDK's Lambda client to the proxy too) at `s3_url`
    (the proxy's); the workers at the emulator itself. No AWS_* or QUIVER_* of this shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "QUIVER_"))}
    env.setdefault("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/quiver-target"))
    scripts = sysconfig.get_path("scripts")  # pip's cargo-lambda may live only here
    env["PATH"] = os.pathsep.join(p for p in (env.get("PATH", ""), scripts) if p)
    env.update(AWS_ACCESS_KEY_ID=minio.env["AWS_ACCESS_KEY_ID"],
               AWS_SECRET_ACCESS_KEY=minio.env["AWS_SECRET_ACCESS_KEY"],
               AWS_REGION=minio.env.get("AWS_REGION", "us-east-1"),
               AWS_ENDPOINT_URL_S3=s3_url,
               AWS_EC2_METADATA_DISABLED="true",
               QUIVER_WORKER_FUNCTION="worker",
               QUIVER_RESULT_PREFIX=f"s3://{objectstore.BUCKET}/results/lambda/",
               QUIVER_INVOKE_TIMEOUT_SECS=str(int(timeout)),
               RUST_LOG="warn")
    return env


@contextlib.contextmanager
def emulated(bench, files, log_name, memory_mb=None, proxied=False):
    """MinIO holding `files` ({key: local path}) and the emulator's functions reading it,
    directly or (`proxied`) through the counting proxy at LATENCY_MS and BANDWIDTH_MB_S, all
    ready, all stopped after: yields (endpoint, emulator), the endpoint as the functions reach
    the bucket. Raises objectstore.ServerError when any cannot start."""
    timeout = float(getattr(bench.options, "timeout", 900))
    minio = objectstore.MinIO(getattr(bench.options, "minio_port", 9300))
    proxy = emulator = None
    try:
        minio.start()
        objectstore.upload(minio.client(), objectstore.BUCKET, files)
        url = minio.endpoint
        if proxied:
            log = os.path.join(data.ROOT, log_name.replace("emulator", "s3-proxy"))
            proxy = objectstore.Proxy(url, LATENCY_MS / 1e3, BANDWIDTH_MB_S * 1e6, log).start()
            url = proxy.url
        emulator = Emulator(function_env(minio, url, timeout), timeout,
                            os.path.join(data.ROOT, log_name), memory_mb=memory_mb)
        emulator.start()
        emulator.wait_ready()
        yield minio.endpoint_for(url, objectstore.BUCKET), emulator
    finally:
        if emulator is not None:
            emulator.stop()
        if proxy is not None:
            proxy.stop()
        minio.stop()


class NoCounter:
    """For Emulator.query when nothing counts requests (MinIO read directly)."""

    def reset(self):
        pass

    def read(self):
        return {}


class Emulator(LambdaEmulator):
    """`cargo lambda watch` (tests/servers/lambda_emulator.py), serving `worker` and
    `coordinator`; installs cargo-lambda when missing, waits for the build, times queries.

    No `--timeout`: cargo-lambda applies it to every request to its server, the functions'
    long poll for their next event included, and an instance idle for longer gets a 408 that
    lambda_runtime does not survive. Runs are limited here instead (the harness's --timeout)."""

    def __init__(self, env, timeout, log_path, release=False, memory_mb=None):
        super().__init__(env, log_path, concurrency=CONCURRENCY, release=release,
                         memory_mb=memory_mb)
        self.timeout = timeout

    def start(self):
        path = self.env["PATH"]
        cargo = shutil.which("cargo", path=path)
        if cargo is None:
            raise objectstore.ServerError("cargo is not installed (the emulator builds the "
                                          "functions with it)")
        if shutil.which("cargo-lambda", path=path) is None:
            print(f"  {NAME}: installing cargo-lambda (pip)", flush=True)
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "cargo-lambda"])
            if shutil.which("cargo-lambda", path=path) is None:
                raise objectstore.ServerError("cargo-lambda is missing and `pip install "
                                              "cargo-lambda` did not provide it")
        super().start(cargo)
        print(f"  {NAME}: {' '.join(self.args[1:])} (pid {self.proc.pid}, log {self.log_path})",
              flush=True)
        return self

    def wait_ready(self):
        """Waits until both functions answer (the first request to each builds it); returns
        the seconds it took. Fails early when the build fails or the emulator exits."""
        started = time.time()
        self._wait("the coordinator", started,
                   lambda: self.request("GET", "/lambda-url/coordinator/health",
                                        timeout=BUILD_TIMEOUT),
                   lambda status, headers, body: status == 200)
        # Any answer from the function itself: `{}` is not a worker request, so it answers
        # with its error; what matters is that it was built and ran.
        self._wait("the worker", started,
                   lambda: self.request("POST", "/2015-03-31/functions/worker/invocations",
                                        b"{}", timeout=BUILD_TIMEOUT),
                   lambda status, headers, body: status == 200
                   or headers.get("X-Amz-Function-Error") is not None
                   or b"errorMessage" in body or b"errorType" in body)
        seconds = time.time() - started
        print(f"  {NAME}: both functions answer ({seconds:.0f} s)", flush=True)
        return seconds

    def _wait(self, what, started, call, answered):
        outcome = {}

        def attempt():
            try:
                outcome["answer"] = call()
            except Exception as e:  # noqa: BLE001 (reported below)
                outcome["error"] = e

        thread = threading.Thread(target=attempt, daemon=True)
        thread.start()
        last_print = time.time()
        while True:
            thread.join(2)
            log = self.log_text()
            if self.proc.poll() is not None:
                raise objectstore.ServerError(f"cargo lambda watch exited with code "
                                              f"{self.proc.returncode}: {_tail(log)}")
            if BUILD_FAILED.search(log):
                raise objectstore.ServerError(f"building the functions failed: {_tail(log)}")
            if not thread.is_alive():
                if "answer" in outcome:
                    status, headers, body = outcome.pop("answer")
                    if answered(status, headers, body):
                        return
                    problem = f"HTTP {status}: {body[:300].decode(errors='replace')}"
                    if status in (400, 401, 403, 404):
                        raise objectstore.ServerError(f"{what} did not start: {problem}")
                else:
                    problem = str(outcome.pop("error", "no answer"))
                if time.time() - started > BUILD_TIMEOUT:
                    raise objectstore.ServerError(f"{what} did not answer within "
                                                  f"{BUILD_TIMEOUT} s ({problem}): {_tail(log)}")
                time.sleep(3)
                thread = threading.Thread(target=attempt, daemon=True)
                thread.start()
            if time.time() - last_print >= 60:
                last_print = time.time()
                lines = [line for line in log.splitlines() if line.strip()]
                print(f"  {NAME}: waiting for {what} ({(time.time() - started) / 60:.0f} min; "
                      f"the first request builds it): "
                      f"{lines[-1][:160] if lines else 'no output yet'}", flush=True)

    def query(self, sql, query_settings, counter):
        """One direct invoke of the coordinator, timed from sending the request to holding
        the decoded result. stats: the coordinator's metrics, plus "log": what the workers'
        log lines say; server: the proxy's counts for the run."""
        table, seconds, metrics, server = self.query_table(sql, query_settings, counter)
        return Result(rows_of(table), seconds, stats=metrics, server=server)

    def query_table(self, sql, query_settings, counter):
        """As query, with the answer as an Arrow table: (table, seconds, metrics, server)."""
        payload = json.dumps({"sql": sql, "format": "arrow",
                              "settings": query_settings}).encode()
        try:
            counter.reset()
            offset = os.path.getsize(self.log_path)
            start = time.perf_counter()
            status, headers, raw = self.request(
                "POST", "/2015-03-31/functions/coordinator/invocations", payload,
                timeout=self.timeout)
            body = _json(raw)
            table = None
            if status == 200 and isinstance(body, dict) and "result" in body \
                    and not headers.get("X-Amz-Function-Error"):
                table = pa.ipc.open_file(
                    pa.BufferReader(base64.b64decode(body["result"]))).read_all()
            elif status == 200 and isinstance(body, dict) and "result_url" in body:
                # An answer over 6 MB comes through S3, at a presigned URL.
                with LOOPBACK.open(body["result_url"], timeout=self.timeout) as answer:
                    table = pa.ipc.open_file(pa.BufferReader(answer.read())).read_all()
            seconds = time.perf_counter() - start
            server = counter.read()
        except TimeoutError:
            raise EngineError(f"timed out after {self.timeout:.0f} s") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise EngineError(f"no answer from the emulator or the proxy: {e}") from None
        except ValueError as e:  # base64 or Arrow IPC that does not decode
            raise EngineError(f"the coordinator's result does not decode: {e}") from None
        if table is None:
            message = body.get("errorMessage") if isinstance(body, dict) else None
            error = headers.get("X-Amz-Function-Error")
            raise EngineError(f"the coordinator failed (HTTP {status}"
                              f"{', ' + error if error else ''}): "
                              f"{message or raw[:300].decode(errors='replace')}")
        metrics = dict(body.get("metrics") or {})
        time.sleep(0.2)  # untimed: lets the workers' last log lines reach the log
        metrics["log"] = self._worker_lines(offset)
        return table, seconds, metrics, server

    def _worker_lines(self, offset):
        """The workers' own lines for the run ("quiver worker N of QUERY: ... in T ms"):
        {"workers", "slowest_ms", "fastest_ms", "retries"} of the query with most lines."""
        text = self.log_text(offset)
        by_query = {}
        for match in WORKER_LINE.finditer(text):
            by_query.setdefault(match.group(2), []).append(int(match.group(7)))
        retries = len(RETRY_LINE.findall(text))
        if not by_query:
            return {"retries": retries}
        times = max(by_query.values(), key=len)
        return {"workers": len(times), "slowest_ms": max(times), "fastest_ms": min(times),
                "retries": retries}


def _json(raw):
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return None


def _tail(text, chars=1500):
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept)[-chars:] or "no output"


# --- the report ------------------------------------------------------------------------------

def _run(outcome, kind):
    return outcome.stats.get(kind) if outcome.status in ("ok", "wrong") else None


def _gets(outcome, kind, what="GetObject"):
    run = _run(outcome, kind)
    if run is None:
        return None
    if what == "other":
        return sum(v for k, v in run["counts"].items() if k != "GetObject")
    return run["counts"].get(what, 0)


def _megabytes(outcome, kind):
    run = _run(outcome, kind)
    return None if run is None else sum(run["bytes"].values()) / 1e6


def _metric(outcome, kind, *path):
    run = _run(outcome, kind)
    value = run["metrics"] if run else None
    for step in path:
        value = value.get(step) if isinstance(value, dict) else None
    return value


def _pair(a, b, fmt=str):
    return " / ".join("-" if v is None else fmt(v) for v in (a, b))


def _used(column, outcome):
    """Workers that got buckets: min(N, buckets)."""
    buckets = _metric(outcome, "hot", "workers", "buckets") or _metric(outcome, "cold", "workers",
                                                                       "buckets")
    return min(column.workers, buckets) if buckets else None


def _speedup(results, q, n, kind):
    a = results[q][LAMBDA[1].name].time(kind)
    b = results[q][LAMBDA[n].name].time(kind)
    return a / b if a and b else None


def _total_speedup(results, n, kind):
    """1-worker time over n-worker time, summed over the queries right at both; (ratio, k)."""
    pairs = [(o[LAMBDA[1].name].time(kind), o[LAMBDA[n].name].time(kind))
             for o in results.values()]
    pairs = [(a, b) for a, b in pairs if a and b]
    if not pairs:
        return None, 0
    return sum(a for a, _ in pairs) / sum(b for _, b in pairs), len(pairs)


def _speedup_table(results):
    header = ["query"] + [f"{n} workers: hot / first" for n in WORKERS[1:]]
    rows = [[q] + [_pair(_speedup(results, q, n, "hot"), _speedup(results, q, n, "cold"),
                         report.times) for n in WORKERS[1:]] for q in results]
    totals = []
    for n in WORKERS[1:]:
        (hot, k), (cold, _) = _total_speedup(results, n, "hot"), _total_speedup(results, n, "cold")
        totals.append(_pair(hot, cold, report.times) + (f" ({k} queries)" if k else ""))
    rows.append(["**total**"] + totals)
    return report.table(header, rows)


def _requests_table(results, columns):
    header = ["query", "run by", "buckets", "workers", "GETs first / hot",
              "other first / hot", "MB first / hot"]
    rows = []
    for q, outcomes in results.items():
        for c in columns:
            o = outcomes[c.name]
            if _run(o, "cold") is None:
                rows.append([q, c.label, "-", "-", report.STATUS_CELL.get(o.status, "-"), "-",
                             "-"])
                continue
            buckets = _metric(o, "cold", "workers", "buckets") if c.workers else None
            rows.append([q, c.label, buckets if buckets is not None else "-",
                         _used(c, o) if c.workers else "-",
                         _pair(_gets(o, "cold"), _gets(o, "hot")),
                         _pair(_gets(o, "cold", "other"), _gets(o, "hot", "other")),
                         _pair(_megabytes(o, "cold"), _megabytes(o, "hot"),
                               lambda v: f"{v:.2f}")])
    return report.table(header, rows)


def _workers_table(results):
    header = ["query", "workers", "workers' GETs", "workers' MB",
              "footer GETs, workers: first / hot", "footer GETs, coordinator: first / hot",
              "worker run ms, mean", "worker ms, slowest", "coordinator ms", "wall ms"]
    rows = []
    for q, outcomes in results.items():
        for n in WORKERS:
            o = outcomes[LAMBDA[n].name]
            if not o.ok:
                rows.append([q, n] + [report.STATUS_CELL.get(o.status, "-")] + ["-"] * 7)
                continue
            used = _used(LAMBDA[n], o)
            run_ms = next((p["ms"] for p in _metric(o, "hot", "workers", "phases") or []
                           if p.get("name") == "run"), None)
            bytes_read = _metric(o, "hot", "workers", "bytes_read")
            elapsed = _metric(o, "hot", "elapsed_ms")
            slowest = _metric(o, "hot", "log", "slowest_ms")
            rows.append([
                q, f"{n}" + (f" ({used} used)" if used is not None and used != n else ""),
                _metric(o, "hot", "workers", "requests"),
                "-" if bytes_read is None else f"{bytes_read / 1e6:.2f}",
                _pair(_metric(o, "cold", "workers", "footer_requests"),
                      _metric(o, "hot", "workers", "footer_requests")),
                _pair(_metric(o, "cold", "coordinator", "footer_requests"),
                      _metric(o, "hot", "coordinator", "footer_requests")),
                "-" if run_ms is None or not used else f"{run_ms / used:.0f}",
                "-" if slowest is None else f"{slowest:.0f}",
                "-" if elapsed is None else f"{elapsed:.0f}",
                f"{o.hot * 1e3:.0f}"])
    return report.table(header, rows)


def _constancy(results, files=1):
    """Lines on GETs and bytes at N workers against 1 worker, per query and kind: more
    workers may add at most one footer read (one GET, 512 KiB) per file per worker."""
    over, largest = [], (0, 0.0)
    for q, outcomes in results.items():
        one = outcomes[LAMBDA[1].name]
        for n in WORKERS[1:]:
            o = outcomes[LAMBDA[n].name]
            if not (one.ok and o.ok):
                continue
            for kind in KINDS:
                extra = _gets(o, kind) - _gets(one, kind)
                extra_mb = _megabytes(o, kind) - _megabytes(one, kind)
                largest = (max(largest[0], extra), max(largest[1], extra_mb))
                if extra > n * files or extra_mb > n * files * 0.5243:
                    over.append(f"- {q}, {n} workers, {KIND_LABEL[kind]} run: {extra:+d} GETs, "
                                f"{extra_mb:+.2f} MB against 1 worker (budget: {n * files} "
                                f"footer reads)")
    if over:
        return ("More workers read more than one footer per file per worker:\n\n"
                + "\n".join(over) + "\n")
    return (f"More workers read no more: at every worker count, GETs and bytes stay within one "
            f"footer read per file per worker of the 1-worker run (largest difference "
            f"{largest[0]:+d} GETs, {largest[1]:+.2f} MB).\n")


def _speedup_chart(path, title, results, local):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(WORKERS, WORKERS, ":", color="grey", label="ideal (N x)")
    for i, q in enumerate(results):
        for kind, style in (("hot", "-"), ("cold", "--")):
            points = [(n, _speedup(results, q, n, kind)) for n in WORKERS]
            points = [(n, s) for n, s in points if s]
            if points:
                ax.plot([n for n, _ in points], [s for _, s in points], style, marker="o",
                        color=f"C{i}", label=f"{q}, {KIND_LABEL[kind]}")
    if local is not None:
        ax.axhline(local, color=charts.COLORS["quiver"], linewidth=0.8, linestyle="-.",
                   label=f"Quiver, local: 1-worker time / local time ({local:.2f}x, hot)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(WORKERS)
    ax.set_xticklabels([str(n) for n in WORKERS])
    ax.set_xlabel("Lambda workers")
    ax.set_ylabel("speedup over 1 worker")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _section(bench, results, columns, info):
    sf, warm = info["sf"], info.get("warmup")
    size = os.path.getsize(info["path"]) / 1e6
    cores = os.cpu_count()
    condition = f"{LATENCY_MS} ms a request, {BANDWIDTH_MB_S} MB/s per connection"
    buckets = next((_metric(o[LAMBDA[n].name], kind, "workers", "buckets")
                    for o in results.values() for n in WORKERS for kind in KINDS
                    if _metric(o[LAMBDA[n].name], kind, "workers", "buckets")), None)
    lambda_columns = [LAMBDA[n] for n in WORKERS]
    totals_table, _ = report.request_totals(results, columns, "run by", KINDS, KIND_LABEL)
    setup = "".join(f"- {q}: {QUERY_TEXT[q]}\n" for q in results)
    warm_text = ""
    if warm:
        warm_text = (f"Warm-up (not timed): the functions answered after {info['ready_s']:.0f} s "
                     f"(building them on first use); then {warm['runs']} of {WARMUP_RUNS} "
                     f"queries at {max(WORKERS)} workers (`{WARMUP_SQL}`) in "
                     f"{warm['seconds']:.1f} s started the instances: the workers read the "
                     f"footer {warm['worker_footers']} times (budget: one per instance, at most "
                     f"{CONCURRENCY}), the coordinators {warm['coordinator_footers']} times.")
        split = info.get("split_warmup")
        if split:
            warm_text += (f" The 16 files were warmed up the same way before their column: "
                          f"{split['runs']} queries, the workers reading footers "
                          f"{split['worker_footers']} times (at most 16 files x {CONCURRENCY} "
                          f"instances), the coordinators {split['coordinator_footers']} times.")
        warm_text += "\n\n"
    body = (
        f"TPC-H SF {sf} `lineitem` ({size:.0f} MB, {info['row_groups']} row groups; "
        f"`{info['path']}`) as `s3://{objectstore.BUCKET}/{info['key']}` on MinIO, read through "
        f"the counting proxy (`tests/servers/s3_proxy.py`): **{LATENCY_MS} ms before each "
        f"request, {BANDWIDTH_MB_S} MB/s per connection** (constants of "
        f"`benches/scenarios/lambda.py`; `--s3-latency`/`--s3-bandwidth` are scenario s3's).\n\n"
        f"The Lambda columns are the real coordinator and worker functions (`lambda/`) under "
        f"cargo-lambda's emulator (`cargo lambda watch --concurrency {CONCURRENCY}`, dev "
        f"profile (optimised), "
        f"log `{info.get('log', '-')}`): one direct invoke of the coordinator per run, "
        f"`lambda.workers` = N, the result as Arrow. **The emulator runs every worker on this "
        f"machine's {cores} cores**, so the scaling shown is of latency and per-connection "
        f"bandwidth hidden by more workers (each with its own connections), not of compute; on "
        f"Lambda each worker also brings its own vCPUs. The bucket plan is the same at every N: "
        f"one bucket per row group ({buckets if buckets is not None else '?'} buckets; "
        f"`quiver.min_bucket_bytes = 0`, `quiver.max_bucket_bytes = 1`), dealt to the workers "
        f"by bytes; `quiver.block_cache_bytes = 0` (every run reads its bytes through the "
        f"proxy), `lambda.retries = 0`.\n\n"
        f"**first**: the first run at that N, MinIO's files of the object evicted from the page "
        f"cache just before (the functions are warm: cold data, not a cold start). **hot**: the "
        f"best of {bench.mode.reps} further run(s). A Lambda run is timed from sending the "
        f"invoke to holding the decoded result. **Quiver, local**: the `quiver` command through "
        f"the same proxy (default executor and settings), one process per run, its start and "
        f"the view included. Every run's result is checked against DuckDB on the local file "
        f"first; a wrong or failed run has no time. **16 files**: the same rows as 16 files "
        f"(`benches/data.py` split16, 100,000-row groups), read at "
        f"{', '.join(str(n) for n in SPLIT_WORKERS)} workers: one big file should fan out as "
        f"well as many small ones.\n\n" + setup + "\n" + warm_text
        + "### First run: seconds\n\n" + report.time_table(results, columns, "cold")
        + "\n### Hot: seconds\n\n" + report.time_table(results, columns, "hot")
        + "\n### Speedup over 1 worker\n\n"
          "1-worker time over N-worker time (N is ideal here only if nothing but I/O "
          "counted).\n\n" + _speedup_table(results)
        + "\n### Requests and bytes, counted by the proxy\n\n"
          "GETs are GetObject requests; other is every other request (HEAD, list, ...); MB is "
          "what the proxy sent, bodies only; buckets and workers are from the coordinator's "
          "metrics (workers: those that got buckets).\n\n"
        + _requests_table(results, columns)
        + "\nTotals over the queries each got right:\n\n" + totals_table
        + "\n" + _constancy(results)
        + "\n### The workers, hot run\n\n"
          "From the coordinator's `metrics` (summed over the workers: GETs, MB read, footer "
          "reads; mean run time is the summed `run` phase over the workers used), the "
          "slowest worker's own time from its log line, the coordinator's `elapsed_ms`, and "
          "the wall time of the invoke.\n\n" + _workers_table(results)
        + "\n### Notes\n\n" + report.notes(results, columns)
        + (f"\nNot everything ran: {info['failure']}\n" if info.get("failure") else ""))

    chart, speedup_chart = f"{NAME}.png", f"{NAME}-speedup.png"
    queries = list(results)
    short = {c.name: "local" if not c.workers else c.label.split(", ", 1)[1] for c in columns}
    panels = [(f"{KIND_LABEL[kind]}, seconds (lower is better; {condition})",
               {short[c.name]: (c.name, [results[q][c.name].time(kind) for q in queries])
                for c in columns}, "seconds") for kind in ("hot", "cold")]
    charts.grouped_bars(os.path.join(bench.results, chart),
                        f"Lambda workers (emulated), TPC-H SF {sf}", queries, panels, "seconds")
    local_total = None
    if info["local"]:
        common = [q for q in queries if results[q][LOCAL.name].ok and results[q][LAMBDA[1].name].ok]
        if common:
            local_total = (sum(results[q][LAMBDA[1].name].hot for q in common)
                           / sum(results[q][LOCAL.name].hot for q in common))
    _speedup_chart(os.path.join(bench.results, speedup_chart),
                   f"Speedup over 1 worker, TPC-H SF {sf} ({condition}; {cores} shared cores)",
                   results, local_total)

    summary = []
    ok_all = [q for q in queries if all(results[q][c.name].ok for c in lambda_columns)]
    if ok_all:
        parts = []
        one = sum(results[q][LAMBDA[1].name].hot for q in ok_all)
        for n in WORKERS:
            total = sum(results[q][LAMBDA[n].name].hot for q in ok_all)
            parts.append(f"{n} worker{'s' if n > 1 else ''} {report.seconds(total)} s"
                         + (f" ({report.times(one / total)} faster)" if n > 1 else ""))
        line = (f"Lambda, emulated (all workers share {cores} cores; {condition}), hot total "
                f"of {len(ok_all)} lineitem scans: " + ", ".join(parts))
        if info["local"] and all(results[q][LOCAL.name].ok for q in ok_all):
            line += (f"; Quiver locally "
                     f"{report.seconds(sum(results[q][LOCAL.name].hot for q in ok_all))} s")
        summary.append(line)
        counted = [(sum(_gets(results[q][LAMBDA[n].name], "hot") for q in ok_all),
                    sum(_megabytes(results[q][LAMBDA[n].name], "hot") for q in ok_all))
                   for n in WORKERS]
        summary.append(f"GETs / MB of those {len(ok_all)} hot runs at "
                       + "/".join(str(n) for n in WORKERS) + " workers: "
                       + ", ".join(f"{g} / {mb:.1f}" for g, mb in counted)
                       + " (the proxy's counts; more workers should not read more)")
    else:
        summary.append("Lambda: no query ran right at every worker count (see the notes)")
    for n in SPLIT_WORKERS:
        both = [q for q in queries if results[q][LAMBDA[n].name].ok and results[q][SPLIT[n].name].ok]
        if both:
            one = sum(results[q][LAMBDA[n].name].hot for q in both)
            many = sum(results[q][SPLIT[n].name].hot for q in both)
            summary.append(f"{n} workers, hot total of {len(both)} scans: one file "
                           f"{report.seconds(one)} s, the same rows in 16 files "
                           f"{report.seconds(many)} s (one file {100 * (one / many - 1):+.1f}%)")
    wrong = [f"{q} {c.label}" for q in queries for c in columns
             if results[q][c.name].status in ("wrong", "error")]
    if wrong:
        summary.append(f"wrong or failed: {', '.join(wrong)}")
    return report.Section(NAME, f"{TITLE} (TPC-H SF {sf} lineitem, {condition})", body,
                          [chart, speedup_chart], summary)
