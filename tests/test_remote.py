"""Remote reads end to end: `quiver` over s3:// (MinIO, through a counting proxy) and http://
(a range-capable static server), checked against DuckDB on the local copies and against the
read plan: which GETs a query makes, and how many bytes.

The read plan these tests compute from pyarrow's metadata (and that quiver must follow):
- a file's footer costs one GET of its last min(512 KiB, size) bytes (one more only if the
  footer is larger); those bytes go into the block cache, so column chunks (or the parts of
  them) inside that tail cost no GET, and a file under 512 KiB costs one GET in all;
- the row groups a query keeps are split into buckets (bucket.rs: about total / (2 x threads)
  projected bytes each, at least quiver.min_bucket_bytes or, when that leaves a thread
  idle, total / threads but 1 MiB at least); every test passes --threads 2;
- per bucket, the column chunks of the projected columns (from the dictionary page if any,
  else the first data page, total_compressed_size long), sorted, are merged when the gap is
  at most coalesce_gap (after taking out what the cache holds), and a merged range longer
  than max_coalesced_bytes is split into ceil(length / max) equal parts; each part is one GET.

Servers and data come from conftest.py (fixtures minio, s3, http_server, tpch_data, oracle).
"""
import json
import math
import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import BUCKET, REMOTE_LAYOUTS
from harness import TIMEOUT, Quiver, parse_csv
from tpch.compare import difference
from tpch.tables import QUERIES, prelude, query_sql

KIB, MIB = 1 << 10, 1 << 20
FOOTER_READ_BYTES = 512 * KIB
THREADS = "2"
LINEITEM = "tpch/single/lineitem.parquet"


# running quiver against a remote


def base_env(**extra):
    """This process's environment without AWS_* settings, never asking instance metadata."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update(extra)
    return env


class RemoteQuiver(Quiver):
    """A Quiver whose runs get `env` (AWS settings for the test bucket)."""

    def __init__(self, path, env):
        super().__init__(path)
        self.env = env

    def run(self, *args, input=None, cwd=None, timeout=TIMEOUT, env=None):
        proc = subprocess.run([self.path, *args], input=input, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, env=env or self.env)
        assert "panicked" not in proc.stderr, f"quiver panicked:\n{proc.stderr}"
        return proc


@dataclass
class Remote:
    """One way to reach the test files: name "s3" or "http"; `base` + relative path is a URL
    (tpch/single/..., tpch/many/..., small/...); `control` counts what the server saw."""
    name: str
    base: str
    control: object
    get_kind: str  # the request kind of a data GET: GetObject or GetFile
    quiver: RemoteQuiver
    local_tpch: str

    def url(self, rel):
        return self.base + rel

    def local(self, rel):
        assert rel.startswith("tpch/"), rel
        return os.path.join(self.local_tpch, rel[len("tpch/"):])

    def gets(self):
        """The data GETs the server saw since the last reset: dicts with path, range, status,
        bytes, and start/end (end exclusive) parsed from the Range header."""
        found = []
        for r in self.control.stats()["requests"]:
            if r["kind"] != self.get_kind:
                continue
            r = dict(r)
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", r["range"] or "")
            r["start"], r["end"] = (int(m[1]), int(m[2]) + 1) if m else (None, None)
            found.append(r)
        return found


def make_remote(request, name, quiver, tpch_data):
    if name == "s3":
        s3 = request.getfixturevalue("s3")
        remote = Remote("s3", s3.url(), s3.control, "GetObject",
                        RemoteQuiver(quiver.path, s3.env()), tpch_data)
    else:
        server = request.getfixturevalue("http_server")
        remote = Remote("http", server.url + "/", server.control, "GetFile",
                        RemoteQuiver(quiver.path, base_env()), tpch_data)
    remote.control.clear_hooks()
    remote.control.reset()
    return remote


@pytest.fixture(params=["s3", "http"])
def remote(request, quiver, tpch_data):
    remote = make_remote(request, request.param, quiver, tpch_data)
    yield remote
    remote.control.clear_hooks()
    remote.control.reset()


@pytest.fixture
def s3_remote(request, quiver, tpch_data):
    yield make_remote(request, "s3", quiver, tpch_data)


@pytest.fixture
def http_remote(request, quiver, tpch_data):
    yield make_remote(request, "http", quiver, tpch_data)


# --profile


@dataclass
class Profile:
    requests: int
    footer_requests: int
    unplanned: int
    hedged: int
    abandoned: int
    bytes_read: int
    bytes_planned: int
    block_cache_hits: int


def profile(stderr):
    """The request and byte counts of the last statement, from --profile's lines on stderr."""
    m = re.search(r"^requests: (\d+) \((\d+) for footers, (\d+) unplanned, (\d+) hedged, "
                  r"(\d+) abandoned\), (\d+) bytes read, (\d+) bytes planned$", stderr, re.M)
    assert m, f"no 'requests:' line in --profile output:\n{stderr}"
    cache = re.search(r"block cache hits: (\d+) bytes", stderr)
    return Profile(*(int(g) for g in m.groups()), int(cache[1]) if cache else None)


# the read plan, computed from the file's metadata


@dataclass
class Plan:
    footer: list    # [(start, end)] of the footer GETs
    buckets: list   # [[row group, ...], ...]
    ranges: list    # [[(start, end), ...] per bucket]: the data GETs
    planned: int    # bytes of the projected column chunks (what --profile calls planned)
    cached: int     # bytes of those chunks served from the footer's tail

    @property
    def gets(self):
        return self.footer + [r for bucket in self.ranges for r in bucket]

    @property
    def bytes(self):
        return sum(end - start for start, end in self.gets)


def chunk_range(column):
    start = column.dictionary_page_offset
    if start is None:
        start = column.data_page_offset
    return start, start + column.total_compressed_size


def plan_buckets(row_group_bytes, threads, min_bytes, max_bytes=128 * MIB):
    """bucket.rs's plan_buckets for one file: [(row group, bytes)] -> [[row group]]."""
    total = sum(b for _, b in row_group_bytes)
    floor = min(min_bytes, max(total // threads, MIB))  # every thread busy, 1 MiB each at least
    target = max(min(max(total // (threads * 2), floor), max_bytes), 1)
    buckets, current, size = [], [], 0
    for row_group, nbytes in row_group_bytes:
        if current and size + nbytes // 2 > target:
            buckets.append(current)
            current, size = [], 0
        current.append(row_group)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


def coalesce(ranges, gap, max_bytes):
    """fetch.rs's coalesce: merge sorted ranges at most `gap` apart, split the long ones."""
    merged = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out = []
    for start, end in merged:
        length = end - start
        parts = max(1, math.ceil(length / max_bytes))
        step = math.ceil(length / parts)
        out += [(start + i * step, min(start + (i + 1) * step, end)) for i in range(parts)]
    return out


def without(ranges, held):
    """The parts of `ranges` outside the range `held` (the cache.rs lookup's misses)."""
    out = []
    for start, end in ranges:
        if end <= held[0] or start >= held[1]:
            out.append((start, end))
            continue
        if start < held[0]:
            out.append((start, held[0]))
        if end > held[1]:
            out.append((held[1], end))
    return out


def read_plan(path, columns, threads=int(THREADS), min_bucket_bytes=8 * MIB, gap=MIB,
              max_coalesced=16 * MIB, block_cache=True):
    md = pq.ParquetFile(path).metadata
    size = os.path.getsize(path)
    leaves = [i for i in range(md.num_columns)
              if md.schema.column(i).path.split(".")[0] in columns]
    assert len({md.schema.column(i).path.split(".")[0] for i in leaves}) == len(columns)

    def chunks(row_group):
        rg = md.row_group(row_group)
        return [r for r in (chunk_range(rg.column(i)) for i in leaves) if r[1] > r[0]]

    first = min(FOOTER_READ_BYTES, size)
    footer = [(size - first, size)]
    needed = md.serialized_size + 8
    if needed > first:
        footer.append((size - needed, size - first))
    rg_bytes = [(rg, sum(e - s for s, e in chunks(rg))) for rg in range(md.num_row_groups)]
    buckets = plan_buckets(rg_bytes, threads, min_bucket_bytes)
    tail = footer[0] if block_cache else (size, size)
    ranges, planned, missing = [], 0, 0
    for bucket in buckets:
        wanted = [r for rg in bucket for r in chunks(rg)]
        fetched = without(wanted, tail)
        planned += sum(e - s for s, e in wanted)
        missing += sum(e - s for s, e in fetched)
        ranges.append(coalesce(fetched, gap, max_coalesced))
    return Plan(footer, buckets, ranges, planned, planned - missing)


def duckdb_rows(sql):
    return duckdb.connect().execute(sql).fetchall()


# A hedged read is a GET no plan foresees (under load CI once saw two during a full scan):
# the tests that count GETs exactly run without hedging.
NO_HEDGING = ("--set", "quiver.hedge_multiple=0")


def check_plan(remote, proc, plan):
    """The server saw exactly the plan's GETs, and --profile says the same."""
    gets = remote.gets()
    assert all(g["status"] == 206 for g in gets), gets
    seen = sorted((g["start"], g["end"]) for g in gets)
    assert seen == sorted(plan.gets), (
        f"{remote.name}: GETs {seen}\n  expected {sorted(plan.gets)}")
    assert sum(g["bytes"] for g in gets) == plan.bytes
    p = profile(proc.stderr)
    assert (p.requests, p.footer_requests, p.unplanned) == (len(plan.gets), len(plan.footer), 0)
    assert p.bytes_read == plan.bytes
    assert p.bytes_planned == plan.planned
    assert p.block_cache_hits == plan.cached


# a. TPC-H over s3:// and http:// against DuckDB on the local copies

TPCH_CASES = [("s3", layout, "datafusion") for layout in REMOTE_LAYOUTS] + \
    [("http", layout, "datafusion") for layout in REMOTE_LAYOUTS] + \
    [("s3", "single", "fragments")]


@pytest.mark.parametrize("n", QUERIES, ids=lambda n: f"q{n:02d}")
@pytest.mark.parametrize("source,layout,executor", TPCH_CASES,
                         ids=["-".join(c) for c in TPCH_CASES])
def test_tpch(request, quiver, tpch_data, oracle, source, layout, executor, n):
    remote = make_remote(request, source, quiver, tpch_data)
    columns, expected = oracle.expected(layout, n)
    sql = prelude(remote.url("tpch"), layout, "quiver") + query_sql(n)
    header, actual = parse_csv(remote.quiver.ok("query", "--format", "csv", "--executor",
                                                executor, "-", input=sql))
    assert len(header) == columns, f"column count: expected {columns}, got {header}"
    problem = difference(expected, actual)
    assert problem is None, f"q{n:02d} on {source} {layout} with {executor}: {problem}"


# b. a listing-only query opens no object


def test_listing_only_query_reads_no_object(remote):
    proc = remote.quiver.run("query", "--format", "csv", "--profile",
                             f"SELECT DISTINCT _file FROM "
                             f"'{remote.url('tpch/many/lineitem/*.parquet')}' ORDER BY 1")
    assert proc.returncode == 0, proc.stderr
    assert parse_csv(proc.stdout) == (["_file"], [[f"part-{i}.parquet"] for i in range(8)])
    counts = remote.control.stats()["counts"]
    assert counts.get(remote.get_kind, 0) == 0, counts
    if remote.name == "s3":
        assert counts == {"ListObjectsV2": 1}, counts
    else:  # one index page, then one HEAD per file
        assert counts == {"GetIndex": 1, "HeadFile": 8}, counts
    assert profile(proc.stderr).requests == 0


def test_listing_gives_full_urls(remote):
    header, rows = remote.quiver.csv(f"SELECT _path, _file, _size FROM "
                                     f"'{remote.url('small/*.parquet')}' GROUP BY 1, 2, 3 "
                                     f"ORDER BY 1")
    assert header == ["_path", "_file", "_size"]
    assert [r[:2] for r in rows] == [[remote.url(f"small/ids-{n}.parquet"), f"ids-{n}.parquet"]
                                     for n in range(2)]


@pytest.mark.parametrize("style", ["nginx", "apache", "plain"])
def test_http_globs_from_index_pages(http_server, quiver, style):
    """Index pages as nginx (a ../ link), Apache (an absolute parent link, sort links) and
    Python's http.server (no parent link) write them: a ** glob visits each folder below the
    literal prefix once and HEADs each file once; parent links are not followed."""
    from servers.range_http import RangeHTTPServer

    server = RangeHTTPServer(http_server.folder, index_style=style).start()
    try:
        url = f"{server.url}/tpch/many/**/*.parquet"
        out = RemoteQuiver(quiver.path, base_env()).ok(
            "query", "--format", "csv", f"SELECT count(DISTINCT _path) AS files, "
            f"count(DISTINCT _file) AS names FROM '{url}'", timeout=60)
        assert parse_csv(out) == (["files", "names"], [["30", "8"]])
        assert server.control.stats()["counts"] == {"GetIndex": 9, "HeadFile": 30}
    finally:
        server.stop()


@pytest.mark.parametrize("how", ["flag", "set"])
def test_s3_endpoint_from_flag_or_setting(s3, s3_remote, how):
    env = s3.env()
    del env["AWS_ENDPOINT_URL"]
    sql = f"SELECT sum(id) AS s FROM '{s3_remote.url('small/ids-1.parquet')}'"
    if how == "flag":
        args = ["--s3-endpoint", s3.endpoint, sql]
    else:
        args = [f"SET quiver.s3_endpoint = '{s3.endpoint}'; {sql}"]
    out = s3_remote.quiver.ok("query", "--format", "csv", *args, env=env)
    assert parse_csv(out) == (["s"], [[str(sum(range(1000, 2000)))]])
    assert len(s3_remote.gets()) == 1  # the footer's GET holds the whole small file


# c. a hot re-run in one process is served from the footer and block caches

def two_column_sql(remote):
    return (f"SELECT sum(l_quantity) AS q, sum(l_discount) AS d "
            f"FROM '{remote.url(LINEITEM)}'")


def test_hot_rerun_makes_no_request(remote):
    sql = two_column_sql(remote)
    cold = remote.quiver.ok("query", "--format", "csv", "--threads", THREADS, sql)
    cold_gets = len(remote.gets())
    assert cold_gets > 0
    remote.control.reset()
    proc = remote.quiver.run("query", "--format", "csv", "--threads", THREADS, "--profile",
                             f"{sql};\n{sql}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == cold
    assert len(remote.gets()) == cold_gets, "the second run made GETs of its own"
    p = profile(proc.stderr)
    assert (p.requests, p.bytes_read) == (0, 0), proc.stderr
    assert p.block_cache_hits == p.bytes_planned > 0, proc.stderr


# d. a cold query makes exactly the GETs of its plan


def test_cold_query_makes_exactly_the_planned_gets(remote):
    plan = read_plan(remote.local(LINEITEM), ["l_quantity", "l_discount"])
    assert len(plan.buckets) == 1, "the test wants a one-bucket plan"
    proc = remote.quiver.run("query", "--format", "csv", "--threads", THREADS, "--profile",
                             *NO_HEDGING, two_column_sql(remote))
    assert proc.returncode == 0, proc.stderr
    expected = duckdb_rows(f"SELECT sum(l_quantity), sum(l_discount) "
                           f"FROM read_parquet('{remote.local(LINEITEM)}')")
    assert difference(expected, parse_csv(proc.stdout)[1]) is None, proc.stdout
    check_plan(remote, proc, plan)


# d2. EXPLAIN COST foretells a cold run's GETs and bytes, reading no data page


@pytest.mark.parametrize("n", [1, 3, 6, 12, 18], ids=lambda n: f"q{n:02d}")
def test_explain_cost_foretells_the_gets_and_bytes_of_a_cold_run(s3_remote, n):
    remote = s3_remote
    # A hedged read is a GET no plan foresees (CI once saw 2 on Q3): not in this comparison.
    sql = ("SET quiver.hedge_multiple = 0;\n" + prelude(remote.url("tpch"), "single", "quiver")
           + query_sql(n))
    header, rows = parse_csv(remote.quiver.ok("query", "--format", "csv", "--threads", THREADS,
                                              "--dry-run", "-", input=sql))
    estimate = dict(zip(header, rows[0]))
    planning = remote.gets()
    assert len(planning) == int(estimate["footer_gets"]), "planning reads footers only"
    remote.control.reset()
    proc = remote.quiver.run("query", "--format", "csv", "--threads", THREADS, "--profile",
                             "-", input=sql)
    assert proc.returncode == 0, proc.stderr
    gets = remote.gets()
    seen = {"gets": len(gets), "bytes": sum(g["bytes"] for g in gets)}
    for key, value in seen.items():
        assert abs(int(estimate[key]) - value) <= value / 10, (key, estimate, seen)
    spent = re.search(r"^cost: (\d+) GETs \((\d+) for footers\), (\d+) bytes, \$([0-9.]+)$",
                      proc.stderr, re.M)
    assert spent, proc.stderr
    # --profile speaks of the last statement, the query, which plans the views it names.
    p = profile(proc.stderr)
    assert (int(spent[1]), int(spent[2]), int(spent[3])) == \
        (p.requests, p.footer_requests, p.bytes_read), spent[0]
    assert float(estimate["dollars"]) == pytest.approx(int(estimate["gets"]) * 0.0004 / 1000)


# e. a full scan reads each byte about once, in few large GETs

ALL_COLUMNS_SQL = "SELECT count(*) AS n FROM '{url}' WHERE concat_ws('|', {columns}) <> ''"


@pytest.mark.parametrize("one_bucket", [True, False], ids=["one-bucket", "default-buckets"])
def test_full_scan_gets_few_large_ranges(remote, one_bucket):
    path = remote.local(LINEITEM)
    names = pq.ParquetFile(path).schema_arrow.names
    # One bucket: a floor above the file's size, and one thread (with two, the floor gives
    # way so that the second thread has a bucket too).
    settings = "SET quiver.min_bucket_bytes = 1073741824;\n" if one_bucket else ""
    threads = "1" if one_bucket else THREADS
    plan = read_plan(path, names, threads=int(threads),
                     min_bucket_bytes=1 << 30 if one_bucket else 8 * MIB)
    sql = settings + ALL_COLUMNS_SQL.format(url=remote.url(LINEITEM), columns=", ".join(names))
    proc = remote.quiver.run("query", "--format", "csv", "--threads", threads, "--profile",
                             *NO_HEDGING, sql)
    assert proc.returncode == 0, proc.stderr
    assert parse_csv(proc.stdout)[1] == [[str(pq.ParquetFile(path).metadata.num_rows)]]
    check_plan(remote, proc, plan)
    size = os.path.getsize(path)
    if one_bucket:
        assert len(plan.buckets) == 1
        assert len(remote.gets()) <= math.ceil(size / (16 * MIB)) + 1
    assert profile(proc.stderr).bytes_read <= 1.15 * plan.planned


# f. the coalescing settings change the GETs as the plan rules say

COMMENT_SQL = "SELECT sum(l_extendedprice) AS p, max(length(l_comment)) AS c FROM '{url}'"


@pytest.mark.parametrize("option,value", [(None, None),
                                          ("--max-coalesced-bytes", 1 * MIB),
                                          ("--coalesce-gap", 0),
                                          ("block_cache_bytes", 0)],
                         ids=["defaults", "max-1MiB", "gap-0", "no-block-cache"])
def test_coalescing_settings(remote, option, value):
    path = remote.local(LINEITEM)
    settings = {"--max-coalesced-bytes": "max_coalesced", "--coalesce-gap": "gap",
                "block_cache_bytes": "block_cache"}
    plan = read_plan(path, ["l_extendedprice", "l_comment"],
                     **({settings[option]: value} if option else {}))
    defaults = read_plan(path, ["l_extendedprice", "l_comment"])
    if option == "--max-coalesced-bytes":
        assert len(plan.gets) > len(defaults.gets), "the test wants a setting that matters"
    sql = COMMENT_SQL.format(url=remote.url(LINEITEM))
    if option == "block_cache_bytes":
        args, sql = [], f"SET quiver.block_cache_bytes = {value};\n{sql}"
    else:
        args = [option, str(value)] if option else []
    proc = remote.quiver.run("query", "--format", "csv", "--threads", THREADS, "--profile",
                             *NO_HEDGING, *args, sql)
    assert proc.returncode == 0, proc.stderr
    check_plan(remote, proc, plan)
    if option == "--coalesce-gap":  # no gap bytes: exactly the column chunks not yet held
        p = profile(proc.stderr)
        footer_bytes = sum(e - s for s, e in plan.footer)
        assert p.bytes_read - footer_bytes == p.bytes_planned - p.block_cache_hits


# g. errors name the object and keep secrets out


def test_s3_missing_key(s3_remote):
    url = s3_remote.url("tpch/no-such-file.parquet")
    proc = s3_remote.quiver.run("query", f"SELECT count(*) FROM '{url}'")
    assert proc.returncode != 0
    assert f"{url}: no such file or directory" in proc.stderr, proc.stderr


def test_s3_wrong_secret_is_access_denied_and_not_shown(s3, s3_remote):
    secret = "Wr0ngSecretKeyForQuiverTest/x+y"
    url = s3_remote.url("tpch/single/nation.parquet")
    for sql in [f"SELECT count(*) FROM '{url}'",
                f"SELECT count(*) FROM '{s3_remote.url('tpch/many/nation/*.parquet')}'"]:
        proc = s3_remote.quiver.run("query", sql, env=s3.env(AWS_SECRET_ACCESS_KEY=secret))
        assert proc.returncode != 0
        assert "access denied" in proc.stderr, proc.stderr
        assert "s3://quiver-test/tpch/" in proc.stderr, proc.stderr
        for part in (secret, "Wr0ngSecretKey"):
            assert part not in proc.stderr and part not in proc.stdout
        assert s3.minio.secret_key not in proc.stderr + proc.stdout


def test_s3_wrong_access_key_is_access_denied(s3, s3_remote):
    url = s3_remote.url("tpch/single/nation.parquet")
    proc = s3_remote.quiver.run("query", f"SELECT count(*) FROM '{url}'",
                                env=s3.env(AWS_ACCESS_KEY_ID="no-such-user"))
    assert proc.returncode != 0
    assert f"{url}: access denied" in proc.stderr, proc.stderr
    assert s3.minio.secret_key not in proc.stderr + proc.stdout


def test_presigned_url_is_one_object(s3, quiver):
    """A presigned URL is read as given (its `?` is no glob), sized by a ranged GET since it
    refuses HEAD, and named after its file; a tampered signature is access denied."""
    url = s3.client(direct=True).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "tpch/single/nation.parquet"},
        ExpiresIn=600)
    assert "?" in url and "Signature" in url
    proc = quiver.run("query", "--format", "csv",
                      f"SELECT count(*) AS n, min(nation.n_name) AS first FROM '{url}'")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1:] == ["25,ALGERIA"]
    tampered = url.replace("Signature=", "Signature=0")
    proc = quiver.run("query", f"SELECT count(*) FROM '{tampered}'")
    assert proc.returncode != 0
    assert "access denied" in proc.stderr, proc.stderr


@pytest.mark.parametrize("path", ["x.parquet", "*.parquet"], ids=["key", "glob"])
def test_s3_missing_bucket(s3_remote, path):
    url = f"s3://quiver-no-such-bucket/{path}"
    proc = s3_remote.quiver.run("query", f"SELECT count(*) FROM '{url}'")
    assert proc.returncode != 0
    assert "s3://quiver-no-such-bucket" in proc.stderr, proc.stderr
    message = proc.stderr.lower()
    assert "no such file or directory" in message or "no such bucket" in message, proc.stderr
    assert "<?xml" not in proc.stderr, f"a raw server answer is not a clear error:\n{proc.stderr}"


@pytest.mark.parametrize("path", ["tpch/no-such-file.parquet", "no-such-folder/*.parquet"],
                         ids=["file", "glob"])
def test_http_not_found(http_remote, path):
    url = http_remote.url(path)
    proc = http_remote.quiver.run("query", f"SELECT count(*) FROM '{url}'")
    assert proc.returncode != 0
    if "*" in url:  # a missing folder, like an empty one, matches nothing
        folder = url[:url.rindex("/") + 1]
        assert (f"'{url}' matched no files" in proc.stderr
                or f"{folder}: no such file or directory" in proc.stderr), proc.stderr
    else:
        assert f"{url}: no such file or directory" in proc.stderr, proc.stderr


def test_s3_anonymous_read_of_private_bucket_is_denied(s3_remote):
    url = s3_remote.url("tpch/single/nation.parquet")
    proc = s3_remote.quiver.run("query", "--anonymous", f"SELECT count(*) FROM '{url}'")
    assert proc.returncode != 0
    assert f"{url}: access denied" in proc.stderr, proc.stderr


# h. retries: failed GETs (503, or a connection reset) are retried


@pytest.mark.parametrize("fault", [503, 500, "reset"])
def test_failed_gets_are_retried(remote, fault):
    # small/ids-0.parquet and ids-1.parquet hold ids 0..1999
    sql = f"SELECT sum(id) AS s, count(*) AS n FROM '{remote.url('small/*.parquet')}'"
    clean = remote.quiver.csv(sql)
    assert clean == (["s", "n"], [[str(sum(range(2000))), "2000"]])
    clean_gets = len(remote.gets())
    remote.control.reset()
    remote.control.fail(fault, 2)
    assert remote.quiver.csv(sql) == clean
    gets = remote.gets()
    failed = [g for g in gets if g["status"] != 206]
    assert [g["status"] for g in failed] == [0 if fault == "reset" else fault] * 2, gets
    assert len(gets) == clean_gets + 2


def test_a_stalled_get_is_hedged_and_the_query_does_not_wait_for_it(s3, s3_remote):
    """The 41st data GET gets its headers and a first chunk, then nothing for 12 s. By then
    the source has timed 40 reads, so that one is late after its deadline (1 s at least):
    a second GET for the same range answers, and the query ends long before the stall."""
    import time

    url = s3_remote.url("tpch/many/lineitem/*.parquet")
    sql = (f"SELECT sum(l_quantity) AS q, sum(l_extendedprice) AS p, count(*) AS n "
           f"FROM '{url}'")
    # one GET per column chunk: 8 files of 4 row groups, 2 columns, and 8 footers
    args = ("--coalesce-gap", "0", "--max-coalesced-bytes", "65536", "--profile")
    clean = s3_remote.quiver.run("query", "--format", "csv", *args, sql)
    assert clean.returncode == 0, clean.stderr
    assert profile(clean.stderr).requests > 48
    s3.control.reset()
    s3.control.fail("stall", 1, after=40, seconds=12)
    started = time.time()
    proc = s3_remote.quiver.run("query", "--format", "csv", *args, sql)
    took = time.time() - started
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == clean.stdout
    p = profile(proc.stderr)
    assert (p.hedged, p.abandoned) == (1, 1), proc.stderr
    assert took < 8, f"the query waited for the stalled GET ({took:.1f} s)"
    # The proxy records the stalled GET when it closes it: wait, so that no later test
    # counts it.
    deadline = time.time() + 20
    while time.time() < deadline and not any(
            g["status"] == 0 for g in s3_remote.gets()):
        time.sleep(0.5)
    s3.control.reset()


def test_a_copy_larger_than_a_part_is_uploaded_in_parts(s3, s3_remote, tmp_path):
    """About 30 MB of Parquet (random doubles do not compress): staged on disk, then put in
    16 MiB parts (a multipart upload), never whole in memory; it reads back whole."""
    target = s3_remote.url("copies/random.parquet")
    sql = ("SELECT i, random() AS a, random() AS b "
           "FROM generate_series(1, 1500000) AS t(i)")
    s3.control.reset()
    staging = {**s3_remote.quiver.env, "TMPDIR": str(tmp_path)}
    s3_remote.quiver.ok("query", f"COPY ({sql}) TO '{target}' (FORMAT parquet)", env=staging)
    assert os.listdir(tmp_path) == [], "the staged file was left behind"
    counts = s3.control.stats()["counts"]
    # create, at least two parts, complete; no whole-object PUT
    assert counts.get("Multipart", 0) >= 4 and "PutObject" not in counts, counts
    assert s3_remote.quiver.csv(
        f"SELECT count(*) AS n, sum(i) AS s, count(*) FILTER (WHERE a >= 0 AND a < 1) AS r "
        f"FROM '{target}'") == (["n", "s", "r"], [["1500000", str(1500000 * 1500001 // 2),
                                                     "1500000"]])
    s3.client().delete_object(Bucket=s3.bucket, Key="copies/random.parquet")


def test_s3_slowdown_body_is_s3_xml(s3):
    """The proxy's injected 503 is what S3 sends: SlowDown in an XML error body."""
    s3.control.fail(503, 1)
    request = urllib.request.Request(f"{s3.endpoint}/{s3.bucket}/small/ids-0.parquet")
    with pytest.raises(urllib.error.HTTPError) as failure:
        urllib.request.urlopen(request, timeout=10)
    s3.control.reset()
    assert failure.value.code == 503
    assert b"<Code>SlowDown</Code>" in failure.value.read()


# i. an object rewritten while a query runs


def id_file(path, n):
    """A Parquet file of ids 0..n-1 in one row group, plain and uncompressed: at 8 bytes a row,
    100,000 rows put the column chunk before the footer's 512 KiB tail, so reading it takes
    a GET of its own after the footer's."""
    tmp = path + ".tmp"
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64())}), tmp,
                   use_dictionary=False, compression="none", row_group_size=n)
    return tmp


class Rewriter:
    """A server hook that rewrites one object when its `nth` data GET is answered (the answer
    itself is still the old version)."""

    def __init__(self, remote, path, nth, rewrite):
        self.remote, self.path, self.nth, self.rewrite = remote, path, nth, rewrite
        self.seen = 0
        self.done = False

    def __call__(self, info):
        if info["kind"] != self.remote.get_kind or not info["path"].endswith(self.path):
            return False
        self.seen += 1
        if self.seen == self.nth:
            self.rewrite()
            self.done = True
            return True
        return False


def versions(request, remote, name, tmp_path):
    """Puts a first version of `name` (ids 0..99,999); returns a function that writes the
    second (ids 0..199,999)."""
    local_a, local_b = id_file(str(tmp_path / "a"), 100_000), id_file(str(tmp_path / "b"), 200_000)
    if remote.name == "s3":
        s3 = request.getfixturevalue("s3")
        client = s3.client(direct=True)
        with open(local_a, "rb") as f:
            client.put_object(Bucket=s3.bucket, Key=name, Body=f.read())

        def rewrite():
            with open(local_b, "rb") as f:
                client.put_object(Bucket=s3.bucket, Key=name, Body=f.read())
    else:
        folder = request.getfixturevalue("http_server").folder
        target = os.path.join(folder, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(local_a, target)

        def rewrite():  # a new inode: the open descriptor still reads the old bytes
            os.replace(local_b, target)
    return rewrite


def test_object_rewritten_between_footer_and_data_fails_clearly(request, remote, tmp_path):
    name = f"changing/{request.node.name.replace('[', '-').rstrip(']')}.parquet"
    rewrite = versions(request, remote, name, tmp_path)
    hook = Rewriter(remote, name, 1, rewrite)  # after the footer GET
    remote.control.add_hook(hook)
    proc = remote.quiver.run("query", "--format", "csv",
                             f"SELECT sum(id) AS s FROM '{remote.url(name)}'")
    assert hook.done
    assert proc.returncode != 0, f"read a rewritten object without noticing:\n{proc.stdout}"
    assert f"{remote.url(name)}: the file changed while the query ran" in proc.stderr, \
        proc.stderr


def test_rewritten_object_is_read_again_by_the_next_statement(request, remote, tmp_path):
    """Caches are keyed by the object's version: after a rewrite the same process reads the
    new version instead of serving the old footer and blocks."""
    name = f"changing/{request.node.name.replace('[', '-').rstrip(']')}.parquet"
    rewrite = versions(request, remote, name, tmp_path)
    hook = Rewriter(remote, name, 2, rewrite)  # after the first statement's data GET
    remote.control.add_hook(hook)
    sql = f"SELECT sum(id) AS s FROM '{remote.url(name)}'"
    proc = remote.quiver.run("query", "--format", "csv", f"{sql};\n{sql}")
    assert hook.done
    assert proc.returncode == 0, proc.stderr
    assert parse_csv(proc.stdout) == (["s"], [[str(sum(range(200_000)))]])


# CSV and JSON


def test_csv_and_json_are_read_remotely_as_duckdb_reads_them(request, remote, tmp_path):
    """A CSV of several of the reader's chunks and a JSON array, over S3 and HTTP: DuckDB's
    answers over the same files on disk; every byte read once, in a few large GETs."""
    lines = ["id,name,price,day"] + [f"{i},\"n{i % 7}, x\",{i / 4},2024-01-{1 + i % 28:02d}"
                                     for i in range(200_000)]
    files = {"text/data.csv": "\n".join(lines) + "\n",
             "text/data.json": json.dumps([{"id": i, "tags": [i % 3], "seen": "2024-05-01"}
                                           for i in range(2_000)])}
    for rel, text in files.items():
        (tmp_path / os.path.basename(rel)).write_text(text)
        if remote.name == "s3":
            request.getfixturevalue("s3").client().put_object(Bucket=BUCKET, Key=rel,
                                                              Body=text.encode())
        else:
            folder = os.path.join(request.getfixturevalue("http_server").folder, "text")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, os.path.basename(rel)), "w") as f:
                f.write(text)
    queries = {"text/data.csv": "SELECT count(*), sum(id), max(name), sum(price), max(day) FROM {}",
               "text/data.json": "SELECT count(*), sum(id), sum(tags[1]), min(seen) FROM {}"}
    for rel, sql in queries.items():
        remote.control.reset()
        proc = remote.quiver.run("query", "--format", "csv", sql.format(f"'{remote.url(rel)}'"))
        assert proc.returncode == 0, proc.stderr
        local = os.path.join(tmp_path, os.path.basename(rel))
        theirs = duckdb.sql(sql.format(f"'{local}'")).fetchall()[0]
        assert parse_csv(proc.stdout)[1][0] == [str(v) for v in theirs], rel
        gets = remote.gets()
        size = len(files[rel].encode())
        # The sample (1 MiB at most) is read once and kept; the rest in 4 MiB GETs.
        assert sum(g["bytes"] for g in gets) == size, (rel, gets)
        assert len(gets) <= 1 + math.ceil(max(0, size - 2**20) / 2**22), (rel, gets)
