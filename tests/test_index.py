"""Parquet metadata as tables (equal to DuckDB's, column by column) and the persistent index:
`quiver index build|refresh|show`, queries that drop files by the index before any footer is
read, stale entries that cost speed but never a wrong answer, and `_path IN (subquery)`
pruning. Locally, then over MinIO with 2,000 files whose dates are not in their names."""
import datetime
import json
import os
import random
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import parse_csv

FIRST_DAY = datetime.date(2024, 1, 1)


def day_file(path, day, rows=50):
    """A file of `rows` rows, all on day `day` (days after FIRST_DAY): date, id, amount."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    date = FIRST_DAY + datetime.timedelta(days=day)
    pq.write_table(pa.table({
        "date": pa.array([date] * rows, pa.date32()),
        "id": pa.array(range(day * rows, day * rows + rows), pa.int64()),
        "amount": pa.array([day + i / 100 for i in range(rows)], pa.float64()),
    }), path)


def shuffled_days(folder, n, seed=7):
    """n files f0000.parquet.. under folder, day k in a shuffled file: no name tells a date."""
    names = list(range(n))
    random.Random(seed).shuffle(names)
    for day, name in enumerate(names):
        day_file(os.path.join(folder, f"f{name:04d}.parquet"), day)


def profile(stderr):
    requests = re.search(r"^requests: (\d+) \((\d+) for footers", stderr, re.M)
    files = re.search(r"^files: (\d+) read, (\d+) pruned \((\d+) of them by the index", stderr,
                      re.M)
    assert requests and files, stderr
    return {"requests": int(requests[1]), "footer_requests": int(requests[2]),
            "files": int(files[1]), "index_pruned": int(files[3])}


def query(quiver, sql, *args, env=None):
    """(rows, profile) of a query run with --profile."""
    proc = quiver.run("query", "--format", "csv", "--profile", *args, sql, env=env)
    assert proc.returncode == 0, proc.stderr
    return parse_csv(proc.stdout)[1], profile(proc.stderr)


# 1. metadata tables


@pytest.fixture
def varied(tmp_path):
    """Files written by three writers, with nested, timestamp, decimal, small int and binary
    columns and several row groups."""
    pq.write_table(pa.table({
        "s": ["x", "y", None] * 100,
        "n": pa.array([{"a": 1, "b": "q"}] * 300),
        "ts": [datetime.datetime(2024, 1, 1, 1, 2, 3)] * 300,
        "i8": pa.array([1, 2, 3] * 100, pa.int8()),
        "bin": pa.array([b"\x00\x01"] * 300),
    }), tmp_path / "pyarrow.parquet", row_group_size=120)
    duckdb.sql(f"COPY (SELECT range AS a, range::VARCHAR AS b, range * 1.5 AS c, "
               f"DATE '2024-01-01' + range::INT AS d FROM range(5000)) "
               f"TO '{tmp_path}/duckdb.parquet' (ROW_GROUP_SIZE 2048)")
    return tmp_path


# DuckDB's columns that Quiver leaves out, and why:
#   key_value_metadata, geo_bbox, geo_types, encoding_stats, stats_nan_count (parquet_metadata),
#   duckdb_type (parquet_schema), column_orders (parquet_file_metadata): not yet built.
# Where both have a column, the values must be equal, except:
#   stats_min/stats_max (the deprecated fields): Quiver shows them for signed sort orders only,
#   as the footer parser keeps no sign of whether a writer filled them (DuckDB's does for
#   strings too);
#   parquet_schema's root repetition_type: the footer parser drops it (the format says the
#   root has none);
#   IntType's bitWidth: DuckDB prints it as a character (\x08).
METADATA_ORDER = {
    "parquet_metadata": "file_name, row_group_id, column_id",
    "parquet_schema": "file_name, column_id",
    "parquet_file_metadata": "file_name",
}


def as_text(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@pytest.mark.parametrize("function", sorted(METADATA_ORDER))
def test_metadata_tables_equal_duckdb(quiver, varied, tpch_data, function):
    compared = 0
    for glob in [f"{varied}/*.parquet", f"{tpch_data}/single/*.parquet"]:
        order = METADATA_ORDER[function]
        header, rows = quiver.csv(f"SELECT * FROM {function}('{glob}') ORDER BY {order}")
        theirs = duckdb.sql(f"SELECT * FROM {function}('{glob}') ORDER BY {order}")
        their_rows = theirs.fetchall()
        assert len(rows) == len(their_rows), glob
        assert set(header) <= set(theirs.columns), set(header) - set(theirs.columns)
        for column in header:
            if column in ("stats_min", "stats_max"):
                continue
            ours, j = header.index(column), theirs.columns.index(column)
            for row, their_row in zip(rows, their_rows):
                expected = as_text(their_row[j])
                if column == "repetition_type" and row[header.index("column_id")] == "0":
                    continue
                if column == "logical_type" and expected.startswith("IntType"):
                    expected = re.sub(r"bitWidth=(.)", lambda m: f"bitWidth={ord(m[1])}",
                                      expected)
                assert row[ours] == expected, (glob, column, row, their_row)
                compared += 1
    assert compared >= 80  # every column of every row, at least 10 files x 8 columns


def test_kv_metadata_equal_duckdb(quiver, varied):
    glob = f"{varied}/*.parquet"
    _, ours = quiver.csv(f"SELECT file_name, CAST(key AS VARCHAR) AS k, "
                         f"CAST(value AS VARCHAR) AS v FROM parquet_kv_metadata('{glob}') "
                         f"ORDER BY 1, 2")
    theirs = duckdb.sql(f"SELECT file_name, decode(key), decode(value) "
                        f"FROM parquet_kv_metadata('{glob}') ORDER BY 1, 2").fetchall()
    assert [tuple(r) for r in ours] == [tuple(as_text(v) for v in r) for r in theirs]
    assert any(k == "ARROW:schema" for _, k, _ in ours)


def test_metadata_reads_footers_only_and_file_name_filters_drop_them(quiver, tmp_path):
    shuffled_days(str(tmp_path / "d"), 20)
    glob = f"{tmp_path}/d/*.parquet"
    rows, p = query(quiver, f"SELECT count(*) FROM parquet_metadata('{glob}')")
    assert rows == [["60"]]  # 20 files x 1 row group x 3 columns
    assert (p["requests"], p["footer_requests"]) == (20, 20)
    rows, p = query(quiver, f"SELECT count(*) FROM parquet_file_metadata('{glob}') "
                            f"WHERE file_name LIKE '%f000_.parquet'")
    assert rows == [["10"]]
    assert p["requests"] == 10


def test_story_query_min_max_per_file_and_path_in_subquery(quiver, tmp_path):
    """The index users built by hand: per-file min/max from parquet_metadata, then
    `_path IN (SELECT ...)`, which drops files before the outer scan reads their footers."""
    shuffled_days(str(tmp_path / "d"), 40)
    glob = f"{tmp_path}/d/*.parquet"
    per_file = (f"SELECT file_name, min(stats_min_value) AS lo, max(stats_max_value) AS hi "
                f"FROM parquet_metadata('{glob}') WHERE path_in_schema = 'date' "
                f"GROUP BY file_name")
    _, ours = quiver.csv(per_file + " ORDER BY file_name")
    theirs = duckdb.sql(per_file + " ORDER BY file_name").fetchall()
    assert [tuple(r) for r in ours] == [tuple(map(str, r)) for r in theirs]

    sql = (f"SELECT count(*) AS n, sum(amount) AS s FROM '{glob}' WHERE _path IN "
           f"(SELECT file_name FROM parquet_metadata('{glob}') WHERE path_in_schema = 'date' "
           f"AND stats_min_value >= '2024-02-05')")
    rows, p = query(quiver, sql)
    n, s = duckdb.sql(sql.replace("_path", "filename").replace(
        f"FROM '{glob}'", f"FROM read_parquet('{glob}', filename = true)")).fetchall()[0]
    assert (int(rows[0][0]), float(rows[0][1])) == (n, pytest.approx(s))
    assert n == 5 * 50
    # 40 footers for parquet_metadata; the outer scan's 5 come from the footer cache
    assert (p["files"], p["footer_requests"]) == (5, 40)

    # the same as an inner join: the join implies the IN, which the listing answers
    joined = (f"SELECT count(*) AS n, sum(t.amount) AS s FROM '{glob}' t "
              f"JOIN parquet_metadata('{glob}') m ON t._path = m.file_name "
              f"WHERE m.path_in_schema = 'date' AND m.stats_min_value >= '2024-02-05'")
    rows, p = query(quiver, joined)
    assert (int(rows[0][0]), float(rows[0][1])) == (n, pytest.approx(s))
    assert p["files"] == 5


# 2. the index, locally


def test_index_drops_files_before_their_footers(quiver, tmp_path):
    folder = str(tmp_path / "d")
    shuffled_days(folder, 100)
    glob = f"{folder}/*.parquet"
    status = json.loads(quiver.ok("index", "build", glob, "--json"))
    assert (status["files"], status["location"]) == (100, f"{folder}/_quiver_index")
    assert status["columns"] == ["date", "id", "amount"]
    # any engine reads it
    assert duckdb.sql(f"SELECT count(*), min(stats.date.min) FROM "
                      f"read_parquet('{status['location']}')").fetchall()[0] == (100, FIRST_DAY)

    sql = f"SELECT count(*) AS n, sum(amount) AS s FROM '{glob}' WHERE date >= '2024-04-05'"
    expected = duckdb.sql(sql).fetchall()[0]
    rows, p = query(quiver, sql)
    assert (int(rows[0][0]), float(rows[0][1])) == (expected[0], pytest.approx(expected[1]))
    # days 95..99 are kept: their 5 footers and the index, nothing else
    assert (p["files"], p["index_pruned"], p["footer_requests"]) == (5, 95, 5)
    assert p["requests"] == 5 + 1
    _, off = query(quiver, sql, "--set", "quiver.index=off")
    # without it every footer is read (row-group statistics then rule the same files out)
    assert (off["files"], off["index_pruned"], off["footer_requests"]) == (100, 0, 100)
    plan = quiver.ok("explain", sql)
    assert "files=5 (pruned 95, by the index 95)" in plan, plan
    # a session's next statement finds the index (and footers) in its caches
    _, again = query(quiver, f"{sql}; {sql}")
    assert again["requests"] == 0


def test_stale_index_is_right_and_refresh_reads_only_what_changed(quiver, tmp_path):
    folder = str(tmp_path / "d")
    shuffled_days(folder, 60)
    glob = f"{folder}/*.parquet"
    quiver.ok("index", "build", glob)
    time.sleep(0.01)  # a rewritten file gets another mtime
    for k in range(3):  # new files on days 70..72
        day_file(os.path.join(folder, f"new{k}.parquet"), 70 + k)
    day_file(os.path.join(folder, "f0000.parquet"), 80)  # rewritten: now a late day
    os.remove(os.path.join(folder, "f0001.parquet"))

    sql = f"SELECT count(*) AS n, max(date) AS d FROM '{glob}' WHERE date >= '2024-02-25'"
    expected = duckdb.sql(sql).fetchall()[0]
    rows, _ = query(quiver, sql)
    assert rows == [[str(expected[0]), str(expected[1])]], "a stale index changed an answer"

    shown = json.loads(quiver.ok("index", "show", glob, "--json"))
    assert (shown["files"], shown["changed"], shown["deleted"]) == (60, 4, 1)
    refreshed = json.loads(quiver.ok("index", "refresh", glob, "--json"))
    assert refreshed["refresh"] == {"footers_read": 4, "unchanged": 58, "dropped": 1}
    assert (refreshed["files"], refreshed["changed"], refreshed["deleted"]) == (62, 0, 0)
    rows, p = query(quiver, sql)
    assert rows == [[str(expected[0]), str(expected[1])]]
    assert p["footer_requests"] == p["files"]


def test_count_min_max_come_from_the_index(quiver, tmp_path):
    folder = str(tmp_path / "d")
    shuffled_days(folder, 30)
    glob = f"{folder}/*.parquet"
    quiver.ok("index", "build", glob)
    sql = f"SELECT count(*) AS n, min(date) AS lo, max(date) AS hi, max(amount) AS m FROM '{glob}'"
    expected = [str(v) for v in duckdb.sql(sql).fetchall()[0]]
    rows, p = query(quiver, sql)
    assert rows == [expected]
    assert (p["requests"], p["footer_requests"]) == (1, 0), "only the index is read"
    assert "PlaceholderRowExec" in quiver.ok("explain", sql)
    # with a filter on a file column, or over a stale index, the footers answer
    rows, p = query(quiver, sql + " WHERE id >= 0")
    assert rows == [expected] and p["footer_requests"] == 30
    time.sleep(0.01)
    day_file(os.path.join(folder, "f0003.parquet"), 400)
    expected = [str(v) for v in duckdb.sql(sql).fetchall()[0]]
    rows, p = query(quiver, sql)
    assert rows == [expected] and p["footer_requests"] == 30


def test_index_at_another_place(quiver, tmp_path):
    shuffled_days(str(tmp_path / "d"), 20)
    glob, index = f"{tmp_path}/d/*.parquet", f"{tmp_path}/idx/d.parquet"
    os.makedirs(tmp_path / "idx")
    quiver.ok("index", "build", glob, "--to", index)
    assert not os.path.exists(tmp_path / "d" / "_quiver_index")
    sql = f"SELECT count(*) FROM '{glob}' WHERE date < '2024-01-03'"
    rows, p = query(quiver, sql, "--set", f"quiver.index={index}")
    assert (rows, p["index_pruned"]) == ([["100"]], 18)
    rows, p = query(quiver, sql)  # auto: nothing beside the data
    assert (rows, p["index_pruned"]) == ([["100"]], 0)


def test_index_in_sql(quiver, tmp_path):
    shuffled_days(str(tmp_path / "d"), 5)
    glob = f"{tmp_path}/d/*.parquet"
    header, rows = quiver.csv(f"CALL quiver_index_build('{glob}')")
    row = dict(zip(header, rows[0]))
    assert (row["location"], row["files"], row["footers_read"]) == (
        f"{tmp_path}/d/_quiver_index", "5", "0")
    day_file(f"{tmp_path}/d/new.parquet", 9)
    _, rows = quiver.csv(f"CALL quiver_index_show('{glob}')")
    assert rows[0][2:5] == ["5", "1", "0"]  # files, changed, deleted
    _, rows = quiver.csv(f"CALL quiver_index_refresh('{glob}')")
    assert rows[0][2:6] == ["6", "0", "0", "1"]
    proc = quiver.run("query", "CALL quiver_index_build(1)")
    assert proc.returncode != 0 and "takes a glob" in proc.stderr, proc.stderr


def test_index_errors_are_clear(quiver, tmp_path):
    shuffled_days(str(tmp_path / "d"), 3)
    glob = f"{tmp_path}/d/*.parquet"
    proc = quiver.run("index", "show", glob)
    assert proc.returncode != 0
    assert f"no index at {tmp_path}/d/_quiver_index" in proc.stderr
    assert "quiver index build" in proc.stderr
    proc = quiver.run("query", "--set", f"quiver.index={tmp_path}/d/f0000.parquet",
                      f"SELECT count(*) FROM '{glob}'")
    assert proc.returncode != 0
    assert "is not a Quiver index" in proc.stderr, proc.stderr
    proc = quiver.run("index", "build", f"{tmp_path}/nothing/*.parquet")
    assert proc.returncode != 0 and "nothing" in proc.stderr, proc.stderr


# 3. over MinIO: the story at scale


FILES = 2000


@pytest.fixture(scope="module")
def shuffled_bucket(s3, tmp_path_factory):
    """2,000 one-day files under a fresh prefix, names shuffled; local copies for DuckDB."""
    local = str(tmp_path_factory.mktemp("index-days"))
    shuffled_days(local, FILES)
    prefix = f"index-{uuid.uuid4().hex[:8]}/"
    client = s3.client(direct=True)

    def put(name):
        with open(os.path.join(local, name), "rb") as f:
            client.put_object(Bucket=s3.bucket, Key=prefix + name, Body=f.read())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, sorted(os.listdir(local))))
    return local, prefix, client, put


def test_index_over_s3_at_scale(quiver, s3, shuffled_bucket):
    local, prefix, client, put = shuffled_bucket
    glob, env = s3.url(prefix + "*.parquet"), s3.env()
    sql = "SELECT count(*) AS n, sum(amount) AS s, min(date) AS d FROM '{}' WHERE date >= '{}'"
    cut = (FIRST_DAY + datetime.timedelta(days=FILES - FILES // 100)).isoformat()

    def check():
        """Runs the query; its answer and files read must be DuckDB's on the local copies."""
        expected = duckdb.sql(sql.format(f"{local}/*.parquet", cut)).fetchall()[0]
        files = duckdb.sql(f"SELECT count(DISTINCT filename) FROM read_parquet("
                           f"'{local}/*.parquet', filename = true) WHERE date >= '{cut}'")
        rows, p = query(quiver, sql.format(glob, cut), env=env)
        assert rows[0][0] == str(expected[0]) and rows[0][2] == str(expected[2])
        assert float(rows[0][1]) == pytest.approx(expected[1])
        assert p["files"] == files.fetchall()[0][0]
        return p

    s3.control.reset()
    assert quiver.run("index", "build", glob, env=env).returncode == 0
    gets = [r for r in s3.control.stats()["requests"] if r["kind"] == "GetObject"]
    assert len(gets) == FILES

    # 1% of the files kept: one GET per kept file and the index's own
    s3.control.reset()
    p = check()
    assert p["files"] == FILES // 100
    gets = [r for r in s3.control.stats()["requests"] if r["kind"] == "GetObject"]
    assert len(gets) <= FILES // 100 + 1, [g["path"] for g in gets]
    assert p["index_pruned"] == FILES - FILES // 100

    s3.control.reset()
    proc = quiver.run("query", "--profile", "--set", "quiver.index=off",
                      sql.format(glob, cut), env=env)
    assert proc.returncode == 0, proc.stderr
    assert profile(proc.stderr)["footer_requests"] == FILES  # every footer, without it

    # 10 new files, one rewritten, one deleted: the stale index still answers right
    names = []
    for k in range(10):
        name = f"late{k}.parquet"
        day_file(os.path.join(local, name), FILES + k)
        names.append(name)
    rewritten = sorted(n for n in os.listdir(local) if n.startswith("f"))[0]
    day_file(os.path.join(local, rewritten), FILES + 20)
    names.append(rewritten)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, names))
    deleted = sorted(n for n in os.listdir(local) if n.startswith("f"))[1]
    os.remove(os.path.join(local, deleted))
    client.delete_object(Bucket=s3.bucket, Key=prefix + deleted)
    check()  # the 11 new or changed files are kept: the index does not describe them

    s3.control.reset()
    out = quiver.ok("index", "refresh", glob, "--json", env=env)
    assert json.loads(out)["refresh"] == {"footers_read": 11, "unchanged": FILES - 2,
                                          "dropped": 1}
    gets = [r for r in s3.control.stats()["requests"] if r["kind"] == "GetObject"]
    assert len(gets) == 11 + 1  # 11 footers and the old index
    check()
