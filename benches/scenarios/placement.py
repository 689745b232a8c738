"""Scenario `placement`: where `auto` puts each query, against where it ran faster.

TPC-H lineitem (scenario lambda's copy, at least 32 row groups) is in MinIO behind the
counting proxy, which adds LATENCY_MS before each request and caps each connection at
BANDWIDTH_MB_S, as S3 does for any client. The worker function runs under cargo-lambda's
emulator (dev profile, as the tests build it) and reads through it: in S3's region. The
`quiver` command reads through a second proxy in front of the first, as a laptop does: its
line carries LINE_MB_S however many connections share it, after LINE_LATENCY_MS more a
request. Every run is the command in a fresh process, with the worker function named
(`--function worker`, WORKERS workers) and `quiver.lambda_min_bytes = 0`, so that every
query may go. Per query of a mix of sizes:

- the estimates: `--dry-run` (`EXPLAIN COST`), whose `place` is what `auto` picks, and its
  `local_seconds` and `lambda_seconds`;
- measured here: `--executor local`; measured on the workers: `--executor lambda`, each the
  best of `--reps` runs after a first, each answer checked against DuckDB on the local file.

The rates the local estimate uses start from `quiver calibrate` of lineitem through the
laptop's line (a fresh cache folder); the worker model starts from its assumed rates (the
workers' first answers replace them). Every run adds its samples, as it would for a user.
The pick is right when it is the place measured faster; the goal is always right where the
two measured times differ by more than 2x.

Caveat: the emulator's workers share this machine's 2 cores, where Lambda gives each its own;
the worker model assumes Lambda's until it has measured the workers, so its first estimates
are optimistic for compute-bound queries here, and a pick of Lambda that loses here may win
on AWS.
"""
import importlib
import os
import shutil
import subprocess
import tempfile
import time

import pyarrow as pa
from tpch.tables import query_sql

from benches import data, measure, objectstore, report
from benches.engines import EngineError, rows_of

# `lambda` is a Python keyword: its module is imported by name.
lambda_workers = importlib.import_module("benches.scenarios.lambda")

NAME = "placement"
TITLE = "Where `auto` runs a query, against where it ran faster (Lambda emulated)"
WORKERS = 8
LINE_MB_S = 12       # a laptop's line to S3 (~100 Mbit/s), shared by its connections
LINE_LATENCY_MS = 15  # the laptop's way to S3's region, on top of S3's own
QUERIES = {
    "count": "SELECT count(*) AS n FROM lineitem",
    # lineitem is sorted by l_orderkey: one row group is left after pruning.
    "point": "SELECT sum(l_quantity) AS q FROM lineitem WHERE l_orderkey < 1000",
    "q06": query_sql(6),
    "q01": query_sql(1),
    "wide": "SELECT max(l_comment) AS c, max(l_shipinstruct) AS i, sum(l_extendedprice) AS p "
            "FROM lineitem",
}


def run(bench):
    quiver = next((e for e in bench.engines if e.name == "quiver"), None)
    if quiver is None:
        return report.Section(NAME, TITLE, "Not run: no quiver engine.\n", [], ["not run"])
    timeout = float(getattr(bench.options, "timeout", 900))
    path, key, _ = lambda_workers.lineitem(bench.mode.sf)
    expected, problems = lambda_workers._expected(bench, path, QUERIES)
    cache = tempfile.mkdtemp(prefix="quiver-placement-")
    rows, failure = [], None
    try:
        with lambda_workers.emulated(bench, {key: path}, "placement-emulator.log",
                                     proxied=True) as (region, emulator):
            line = objectstore.Proxy(region.url, LINE_LATENCY_MS / 1e3, 0, os.path.join(
                data.ROOT, "placement-line-proxy.log"), line=LINE_MB_S * 1e6).start()
            try:
                env = dict(emulator.env, AWS_ENDPOINT_URL_S3=line.url,
                           QUIVER_DISK_CACHE_BYTES="0")
                cli = Cli(quiver.binary, timeout, env, cache, emulator.url)
                url = region.s3_url(key)
                print(f"  {NAME}: {cli.calibrate(url)}", flush=True)
                view = f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{url}');\n"
                for q, sql in QUERIES.items():
                    row = _row(bench, cli, q, view + sql, expected[q], problems.get(q))
                    rows.append(row)
                    print(f"  {NAME} {q}: {row}", flush=True)
                print(f"  {NAME}: {cli.calibrate(None)}", flush=True)
            finally:
                line.stop()
    except (objectstore.ServerError, EngineError) as e:
        failure = str(e)
        print(f"  {NAME}: not run (further): {failure}", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if not rows:
        return report.Section(NAME, TITLE, f"Not run: {failure}\n", [], [f"not run: {failure}"])
    return _section(rows, failure)


class Cli:
    """The `quiver` command with the worker function named, its rates in `cache`."""

    def __init__(self, binary, timeout, env, cache, lambda_endpoint):
        self.binary, self.timeout, self.env, self.cache = binary, timeout, env, cache
        self.flags = ["--function", "worker", "--workers", str(WORKERS), "--lambda-endpoint",
                      lambda_endpoint, f"--set=quiver.cache_dir={cache}",
                      "--set=quiver.lambda_min_bytes=0"]

    def _run(self, args, script=None):
        try:
            proc = subprocess.run([self.binary, *args], input=script, capture_output=True,
                                  timeout=self.timeout, env=self.env)
        except subprocess.TimeoutExpired:
            raise EngineError(f"timed out after {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            raise EngineError(proc.stderr.decode(errors="replace")[-600:])
        return proc

    def calibrate(self, url):
        """`quiver calibrate` of `url` (None: what is known), on one line."""
        out = self._run(["calibrate", *([url] if url else []),
                         f"--set=quiver.cache_dir={self.cache}"])
        return " ".join(out.stdout.decode().split())[:300]

    def estimate(self, sql):
        """EXPLAIN COST's row, as a dict."""
        out = self._run(["query", *self.flags, "--dry-run", "--format", "arrow", "-"],
                        sql.encode())
        return pa.ipc.open_file(out.stdout).read_all().to_pylist()[0]

    def timed(self, executor, sql, expected):
        """Seconds of one fresh process running `sql` with `executor`; its answer checked."""
        started = time.perf_counter()
        out = self._run(["query", *self.flags, "--executor", executor, "--format", "arrow", "-"],
                        sql.encode())
        seconds = time.perf_counter() - started
        wrong = measure.check(expected, rows_of(pa.ipc.open_file(out.stdout).read_all()))
        if wrong is not None:
            raise EngineError(f"{executor}: {wrong}")
        return seconds


def _row(bench, cli, q, sql, expected, problem):
    """One query's cells: MB planned, both estimates and measurements, the pick, whether it
    was right."""
    if expected is None:
        return [q, "-", "-", "-", "-", "-", "-", "-", f"unchecked: {problem}"]
    try:
        cost = cli.estimate(sql)
        measured = {}
        for executor in ("local", "lambda"):
            runs = [cli.timed(executor, sql, expected) for _ in range(1 + bench.mode.reps)]
            measured[executor] = min(runs[1:])
    except EngineError as e:
        return [q, "-", "-", "-", "-", "-", "-", "-", f"**failed**: {str(e)[:300]}"]
    local, remote = measured["local"], measured["lambda"]
    faster = "local" if local <= remote else "lambda"
    ratio = max(local, remote) / max(min(local, remote), 1e-9)
    right = "yes" if cost["place"] == faster else ("no" if ratio > 2 else "no (within 2x)")
    return [q, f"{cost['bytes'] / 1e6:.1f}", report.seconds(cost["local_seconds"]),
            report.seconds(local), report.seconds(cost["lambda_seconds"]),
            report.seconds(remote), cost["place"], faster, right]


def _section(rows, failure):
    header = ["query", "MB read", "local est. s", "local s", "lambda est. s", "lambda s",
              "auto picks", "faster", "right"]
    checked = [r for r in rows if r[-1] in ("yes", "no", "no (within 2x)")]
    right = sum(r[-1] == "yes" for r in checked)
    clear = [r for r in checked if _differ(r)]
    clear_right = sum(r[-1] == "yes" for r in clear)
    summary = [f"auto picked the faster place for {right} of {len(checked)} queries; "
               f"{clear_right} of {len(clear)} where the two differ by more than 2x"]
    body = (__doc__.split("\n\n", 1)[1] + "\n" + report.table(header, rows)
            + f"\n{summary[0]}.\n" + (f"\nFailed: {failure}\n" if failure else ""))
    return report.Section(NAME, TITLE, body, [], summary)


def _differ(row):
    """Whether the row's two measured times differ by more than 2x."""
    local, remote = float(row[3]), float(row[5])
    return max(local, remote) > 2 * min(local, remote)
