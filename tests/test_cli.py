"""The `quiver` command on small files written with pyarrow: statements, formats, globs, hive
columns, virtual columns, schema override, explain, and clear errors (never a panic)."""
import json
import os
import re
import shlex
import signal
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest


def write(path, n, start=0, **kwargs):
    """A Parquet file of n rows: id (int64) start.., name (string) 'even'/'odd'."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ids = list(range(start, start + n))
    table = pa.table({"id": pa.array(ids, pa.int64()),
                      "name": ["even" if i % 2 == 0 else "odd" for i in ids]})
    pq.write_table(table, path, **kwargs)
    return path


# files under glob/ and their row counts: powers of two, so a sum names the set of files
GLOB_FILES = {"a1": 1, "a2": 2, "b1": 4, "b2": 8, "f1": 16, "f2": 32, "f3": 64, "f4": 128,
              "sub/c1": 256, "sub/deep/d1": 512}


@pytest.fixture
def data(tmp_path):
    """tmp_path holding f.parquet (3 rows) and glob/...; the tests run quiver in it."""
    write(str(tmp_path / "f.parquet"), 3)
    for name, n in GLOB_FILES.items():
        write(str(tmp_path / "glob" / f"{name}.parquet"), n)
    return tmp_path


def count(quiver, source, cwd):
    header, rows = quiver.csv(f"SELECT count(*) AS n FROM {source}", cwd=cwd)
    assert header == ["n"]
    return int(rows[0][0])


# statements and input


def test_last_statement_result_is_printed(quiver):
    assert quiver.csv("SELECT 1 AS x; SELECT 2 AS y") == (["y"], [["2"]])


def test_sql_from_stdin(quiver, data):
    assert quiver.csv("-", input="SELECT count(*) AS n FROM 'f.parquet';\n", cwd=data) == (
        ["n"], [["3"]])


def test_create_view(quiver, data):
    sql = (f"CREATE VIEW v AS SELECT * FROM read_parquet('{data}/glob/*.parquet');"
           "SELECT count(*) AS n FROM v WHERE name = 'odd'")
    header, rows = quiver.csv(sql)
    # ids start at 0 in every file: n rows hold n // 2 odd ids
    expected = sum(n // 2 for name, n in GLOB_FILES.items() if "/" not in name)
    assert rows == [[str(expected)]]


def test_threads_and_executors_agree(quiver, data):
    sql = "SELECT name, count(*) AS n, sum(id) AS s FROM 'glob/**/*.parquet' GROUP BY name ORDER BY name"
    results = [quiver.csv(sql, "--executor", executor, "--threads", threads, cwd=data)
               for executor in ("datafusion", "fragments") for threads in ("1", "2")]
    assert all(r == results[0] for r in results), results
    assert [row[0] for row in results[0][1]] == ["even", "odd"]


# output formats


def test_default_format_is_a_table(quiver):
    out = quiver.ok("query", "SELECT 42 AS answer")
    assert "answer" in out and "42" in out


def test_csv_has_header(quiver, data):
    out = quiver.ok("query", "--format", "csv", "SELECT id, name FROM 'f.parquet' ORDER BY id",
                    cwd=data)
    assert out.splitlines() == ["id,name", "0,even", "1,odd", "2,even"]


def test_json_parses(quiver, data):
    out = quiver.ok("query", "--format", "json", "SELECT id, name FROM 'f.parquet' ORDER BY id",
                    cwd=data)
    try:
        records = json.loads(out)
    except json.JSONDecodeError:  # JSON lines
        records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert records == [{"id": 0, "name": "even"}, {"id": 1, "name": "odd"},
                       {"id": 2, "name": "even"}]


def test_output_file_csv(quiver, data):
    quiver.ok("query", "--format", "csv", "--output", "out.csv",
              "SELECT id FROM 'f.parquet' ORDER BY id", cwd=data)
    assert (data / "out.csv").read_text().splitlines() == ["id", "0", "1", "2"]


def test_output_file_parquet(quiver, data):
    quiver.ok("query", "--format", "parquet", "--output", str(data / "out.parquet"),
              "SELECT id, name FROM 'f.parquet'", cwd=data)
    table = pq.read_table(data / "out.parquet")
    assert table.num_rows == 3 and table.column_names == ["id", "name"]
    # Written as COPY writes: zstd, and row groups of 122,880 rows (so the writer holds
    # no more than one of them).
    write(str(data / "big.parquet"), 300_000)
    quiver.ok("query", "--format", "parquet", "--output", str(data / "big-out.parquet"),
              "SELECT * FROM 'big.parquet'", cwd=data)
    meta = pq.ParquetFile(data / "big-out.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == \
        [122_880, 122_880, 300_000 - 2 * 122_880]
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_output_file_arrow(quiver, data):
    quiver.ok("query", "--format", "arrow", "--output", "out.arrow",
              "SELECT id FROM 'f.parquet'", cwd=data)
    raw = (data / "out.arrow").read_bytes()
    try:
        table = ipc.open_file(pa.BufferReader(raw)).read_all()
    except pa.ArrowInvalid:  # IPC stream rather than file
        table = ipc.open_stream(pa.BufferReader(raw)).read_all()
    assert table.num_rows == 3


# sources: globs, hive columns, virtual columns, schema


@pytest.mark.parametrize("pattern, files", [
    ("glob/*.parquet", ["a1", "a2", "b1", "b2", "f1", "f2", "f3", "f4"]),
    ("glob/**/*.parquet", list(GLOB_FILES)),
    ("glob/sub/**/*.parquet", ["sub/c1", "sub/deep/d1"]),
    ("glob/a?.parquet", ["a1", "a2"]),
    ("glob/{a,b}1.parquet", ["a1", "b1"]),
    ("glob/f{1..3}.parquet", ["f1", "f2", "f3"]),
])
def test_glob_selects_files(quiver, data, pattern, files):
    assert count(quiver, f"'{pattern}'", data) == sum(GLOB_FILES[f] for f in files)


def test_glob_with_absolute_path(quiver, data):
    assert count(quiver, f"'{data}/glob/a*.parquet'", None) == 3


def test_hive_columns(quiver, tmp_path):
    for year, month, n in [("2023", "1", 3), ("2023", "2", 5), ("2024", "1", 7)]:
        write(str(tmp_path / "h" / f"year={year}" / f"month={month}" / "p.parquet"), n)
    source = "read_parquet('h/**/*.parquet', hive_partitioning => true)"
    header, rows = quiver.csv(
        f"SELECT year, month, count(*) AS n FROM {source} GROUP BY year, month ORDER BY year, month",
        cwd=tmp_path)
    assert rows == [["2023", "1", "3"], ["2023", "2", "5"], ["2024", "1", "7"]]
    assert count(quiver, f"{source} WHERE year = '2024'", tmp_path) == 7


def test_virtual_file_column(quiver, data):
    header, rows = quiver.csv("SELECT DISTINCT _file FROM 'glob/b*.parquet' ORDER BY 1", cwd=data)
    assert rows == [["b1.parquet"], ["b2.parquet"]]


def test_virtual_path_and_size(quiver, data):
    header, rows = quiver.csv(
        "SELECT _path, _size, count(*) AS n FROM 'glob/a*.parquet' GROUP BY _path, _size "
        "ORDER BY _path", cwd=data)
    assert len(rows) == 2
    for (path, size, n), name in zip(rows, ["a1", "a2"]):
        assert path.endswith(f"glob/{name}.parquet"), path
        assert int(size) == os.path.getsize(data / "glob" / f"{name}.parquet")
        assert int(n) == GLOB_FILES[name]


def test_filter_on_virtual_column(quiver, data):
    assert count(quiver, "'glob/*.parquet' WHERE _file = 'b2.parquet'", data) == 8


def test_schema_override(quiver, tmp_path):
    table = pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": ["x", "y", "z"]})
    pq.write_table(table, tmp_path / "s.parquet")
    plain = quiver.csv("SELECT arrow_typeof(a) AS t FROM 's.parquet' LIMIT 1", cwd=tmp_path)
    assert plain[1] == [["Int32"]]
    header, rows = quiver.csv(
        "SELECT arrow_typeof(a) AS t, sum(a) AS s FROM "
        "read_parquet('s.parquet', schema => 'a BIGINT, b VARCHAR') GROUP BY 1", cwd=tmp_path)
    assert rows == [["Int64", "6"]]


# explain


def test_explain_shows_row_groups_and_buckets(quiver, tmp_path):
    write(str(tmp_path / "rg.parquet"), 10_000, row_group_size=1_000)
    out = quiver.ok("explain", "SELECT sum(id) FROM 'rg.parquet'", cwd=tmp_path).lower()
    assert "buckets" in out and "row groups" in out, out


def test_count_min_max_of_a_whole_table_come_from_footers(quiver, tmp_path):
    """The scan tells the planner its footers' row counts and min/max: DataFusion answers
    count(*), min and max of a whole table from them, and a filter still reads the data."""
    write(str(tmp_path / "s" / "a.parquet"), 3_000, row_group_size=1_000)
    write(str(tmp_path / "s" / "b.parquet"), 2_000, start=3_000, row_group_size=1_000)
    sql = "SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM 's/*.parquet'"
    plan = quiver.ok("explain", sql, cwd=tmp_path)
    assert "BucketScanExec" not in plan, plan
    assert quiver.csv(sql, cwd=tmp_path) == (["n", "lo", "hi"], [["5000", "0", "4999"]])
    filtered = "SELECT count(*) AS n FROM 's/*.parquet' WHERE id % 7 = 0"
    assert "BucketScanExec" in quiver.ok("explain", filtered, cwd=tmp_path)
    assert quiver.csv(filtered, cwd=tmp_path) == (["n"], [["715"]])


def test_join_builds_on_the_smaller_side(quiver, tmp_path):
    """With row counts from the footers the planner swaps a join so that the small table is
    the build side, collected once (CollectLeft) instead of both sides hash-partitioned."""
    write(str(tmp_path / "big.parquet"), 200_000, row_group_size=20_000)
    pq.write_table(pa.table({"k": pa.array([0, 1, 2], pa.int64()), "label": ["a", "b", "c"]}),
                   str(tmp_path / "small.parquet"))
    sql = ("SELECT label, count(*) AS n FROM 'big.parquet' JOIN 'small.parquet' ON id = k "
           "GROUP BY label ORDER BY label")
    plan = quiver.ok("explain", sql, cwd=tmp_path)
    join = plan[plan.index("HashJoinExec"):]
    assert "mode=CollectLeft" in join.splitlines()[0], plan
    scans = [line for line in join.splitlines() if "BucketScanExec" in line]
    assert "columns=[k, label]" in scans[0] and "columns=[id]" in scans[1], plan
    assert quiver.csv(sql, cwd=tmp_path) == (["label", "n"], [["a", "1"], ["b", "1"], ["c", "1"]])


def test_a_plain_dimension_joins_after_the_filtered_ones(quiver, tmp_path):
    """TPC-DS's year_total lists `customer, store_sales, date_dim` and filters the dates
    from outside a union: the sales are joined to their dates first, and the plain
    customer table is probed by the sales of that year alone."""
    pq.write_table(pa.table({"c_sk": pa.array(range(1000), pa.int64()),
                             "c_name": [f"c{i}" for i in range(1000)]}),
                   str(tmp_path / "customer.parquet"))
    pq.write_table(pa.table({"s_customer": pa.array([i % 1000 for i in range(20_000)], pa.int64()),
                             "s_date": pa.array([i % 730 for i in range(20_000)], pa.int64()),
                             "s_amount": pa.array([i % 7 for i in range(20_000)], pa.int64())}),
                   str(tmp_path / "sales.parquet"))
    pq.write_table(pa.table({"d_sk": pa.array(range(730), pa.int64()),
                             "d_year": pa.array([2000 + i // 365 for i in range(730)], pa.int64())}),
                   str(tmp_path / "dates.parquet"))
    views = "".join(f"CREATE VIEW {t} AS SELECT * FROM '{t}.parquet'; "
                    for t in ("customer", "sales", "dates"))
    branch = ("SELECT c_name, d_year, sum(s_amount) AS total, '{kind}' AS kind "
              "FROM customer, sales, dates WHERE c_sk = s_customer AND s_date = d_sk "
              "GROUP BY c_name, d_year")
    sql = ("WITH totals AS (" + branch.format(kind="s") + " UNION ALL " + branch.format(kind="w")
           + ") SELECT count(*) AS n, sum(total) AS total FROM totals "
           "WHERE kind = 's' AND d_year = 2001")
    plan = quiver.ok("query", "--format", "csv", views + "EXPLAIN " + sql, cwd=tmp_path)
    logical = plan[:plan.index("physical_plan")]
    scans = [line.split("TableScan: ")[1].split()[0] for line in logical.splitlines()
             if "TableScan: " in line]
    assert scans == ["sales", "dates", "customer"], logical
    expected = (["n", "total"], [["1000", str(sum(i % 7 for i in range(20_000) if i % 730 >= 365))]])
    assert quiver.csv(views + sql, cwd=tmp_path) == expected
    # As listed when turned off, with the same answer.
    off = ("--set", "quiver.plain_dimensions_last=false")
    plan = quiver.ok("query", *off, "--format", "csv", views + "EXPLAIN " + sql, cwd=tmp_path)
    assert plan.index("TableScan: customer") < plan.index("TableScan: sales"), plan
    assert quiver.csv(views + sql, *off, cwd=tmp_path) == expected


def test_a_join_filters_its_probe_scan_as_it_decodes(quiver, tmp_path):
    """A small build side's keys reach the probe side's scan (DataFusion's dynamic filter),
    and the decoder drops the rows without a match: the join probes 3 rows, not 200,000.
    With DataFusion's pushdown_filters off the decoder filters no row, but the keys' bounds
    still rule out the row groups that hold none of them (as DataFusion's pruning does):
    the two row groups of 20,000 that hold 5, 7 and 150,000 are read whole. The answer is
    the same."""
    write(str(tmp_path / "big.parquet"), 200_000, row_group_size=20_000)
    pq.write_table(pa.table({"k": pa.array([5, 150_000, 7], pa.int64())}),
                   str(tmp_path / "small.parquet"))
    sql = ("SELECT count(*) AS n, sum(id) AS s FROM 'big.parquet' JOIN 'small.parquet' "
           "ON id = k")

    def probed(*args):
        plan = quiver.ok("query", "--format", "csv", *args, f"EXPLAIN ANALYZE {sql}",
                         cwd=tmp_path)
        scan = next(l for l in plan.splitlines() if "columns=[id]" in l)
        assert "filter=DynamicFilter" in scan, plan
        return re.search(r"HashJoinExec.*? input_rows=([^,]+),", plan).group(1)

    off = ("--set", "datafusion.execution.parquet.pushdown_filters=false")
    assert probed() == "3"
    assert probed(*off) == "40.00 K"
    assert quiver.csv(sql, cwd=tmp_path) == (["n", "s"], [["3", "150012"]])
    assert quiver.csv(sql, *off, cwd=tmp_path) == (["n", "s"], [["3", "150012"]])
    # 1,000 keys are a hash table the join looks up, which the decoder would do again: the
    # join probes every row and drops them itself, once (the scan is not sifted, as the join
    # takes its rows straight away: scan/joins_above.rs).
    pq.write_table(pa.table({"k": pa.array(range(0, 200_000, 200), pa.int64())}),
                   str(tmp_path / "small.parquet"))
    assert probed() == "200.0 K"
    assert quiver.csv(sql, cwd=tmp_path) == (
        ["n", "s"], [["1000", str(sum(range(0, 200_000, 200)))]])
    # 12 keys that fill their column's range (TPC-DS's stores) keep every row but the nulls:
    # by the column's min/max they keep most rows, so they stay with the join, which probes
    # the nulls too (scan/key_share.rs); in the decoder the join would probe 180,000.
    stores = [None if i % 10 == 0 else i % 12 + 1 for i in range(200_000)]
    pq.write_table(pa.table({"id": pa.array(stores, pa.int64())}),
                   str(tmp_path / "big.parquet"), row_group_size=20_000)
    pq.write_table(pa.table({"k": pa.array(range(1, 13), pa.int64())}),
                   str(tmp_path / "small.parquet"))
    assert probed() == "200.0 K"
    assert quiver.csv(sql, cwd=tmp_path) == (
        ["n", "s"], [["180000", str(sum(s for s in stores if s))]])


def test_a_wide_scan_decodes_its_other_columns_only_for_the_rows_that_pass(quiver, tmp_path):
    """Late materialisation (scan/late.rs): beside a filter on one narrow column, the wide
    text columns of `SELECT *` are decoded only for the rows that pass the filter and the
    TopK's threshold, so the filter above the scan is handed those rows alone (selectivity
    100%). Where the filter's column is the wide one the decoder does not filter (the filter
    above keeps one row in 10). The answers are the query's."""
    n = 100_000
    wide = {f"text{c}": [f"{c}-{i:08d}-" + "x" * 40 for i in range(n)] for c in range(8)}
    table = pa.table({"id": pa.array(range(n), pa.int64()),
                      "tag": [f"t{i % 10}" for i in range(n)], **wide})
    pq.write_table(table, str(tmp_path / "wide.parquet"), row_group_size=20_000)

    def filter_line(sql):
        plan = quiver.ok("query", "--format", "csv", f"EXPLAIN ANALYZE {sql}", cwd=tmp_path)
        return next(line for line in plan.splitlines() if "FilterExec" in line)

    top = "SELECT * FROM 'wide.parquet' WHERE tag LIKE '%7' ORDER BY id DESC LIMIT 3"
    assert "selectivity=100%" in filter_line(top)
    header, rows = quiver.csv(top, cwd=tmp_path)
    assert header == ["id", "tag"] + [f"text{c}" for c in range(8)]
    assert [r[0] for r in rows] == ["99997", "99987", "99977"]
    assert rows[0][2] == "0-00099997-" + "x" * 40

    narrow = "SELECT id FROM 'wide.parquet' WHERE text0 LIKE '%7-x%'"
    assert "selectivity=10%" in filter_line(narrow)
    assert quiver.csv(f"SELECT count(*) AS n, sum(id) AS s FROM ({narrow})", cwd=tmp_path) == (
        ["n", "s"], [[str(n // 10), str(sum(range(7, n, 10)))]])


def test_a_join_s_filter_sifts_rows_only_where_a_join_does_not_take_them_at_once(quiver, tmp_path):
    """The joins' filters pushed into a scan (a lookup in a build side of 1,000 keys) drop
    rows as they are decoded only where the rows would meet an aggregate first (the sieve,
    scan/sieve.rs); where a join probes the scan's rows straight away the join drops them
    itself (scan/joins_above.rs). The answers are the queries'."""
    n = 200_000
    facts = pa.table({"k": pa.array([i % 20_000 for i in range(n)], pa.int64()),
                      "d": pa.array([i % 100 for i in range(n)], pa.int64()),
                      "v": pa.array(range(n), pa.int64())})
    pq.write_table(facts, str(tmp_path / "facts.parquet"), row_group_size=50_000)
    keys = pa.table({"k": pa.array(range(0, 20_000, 20), pa.int64())})
    pq.write_table(keys, str(tmp_path / "keys.parquet"))

    def facts_scan(sql):
        plan = quiver.ok("query", "--format", "csv", f"EXPLAIN ANALYZE {sql}", cwd=tmp_path)
        return next(line for line in plan.splitlines()
                    if "BucketScanExec" in line and "columns=[k, " in line)

    probed = "SELECT sum(f.v) AS s FROM 'facts.parquet' f JOIN 'keys.parquet' k ON f.k = k.k"
    assert "rows_sifted" not in facts_scan(probed)
    kept = [i for i in range(n) if i % 20_000 % 20 == 0]
    assert quiver.csv(probed, cwd=tmp_path) == (["s"], [[str(sum(kept))]])

    aggregated = ("SELECT count(*) AS n, sum(a.s) AS s FROM 'keys.parquet' k JOIN "
                  "(SELECT k, sum(v) AS s FROM 'facts.parquet' WHERE d < 10 GROUP BY k) a "
                  "ON a.k = k.k")
    sifted = re.search(r"rows_sifted=([0-9.]+ ?K?)", facts_scan(aggregated))
    assert sifted and sifted.group(1) != "0", facts_scan(aggregated)
    rows = [i for i in kept if i % 100 < 10]
    assert quiver.csv(aggregated, cwd=tmp_path) == (
        ["n", "s"], [[str(len({i % 20_000 for i in rows})), str(sum(rows))]])


def test_a_page_index_skips_the_pages_a_filter_or_a_join_rules_out(quiver, tmp_path):
    """Over a file with a page index (sorted ids, one row group, small pages), the rows of
    pages whose min/max a WHERE clause or a join's keys rule out are skipped and their pages
    not read (scan/pages.rs, `page_rows_skipped`); the answers are the queries'."""
    n = 200_000
    table = pa.table({"id": pa.array(range(n), pa.int64()),
                      "v": pa.array([i * 7 % 1000 for i in range(n)], pa.int64())})
    pq.write_table(table, str(tmp_path / "sorted.parquet"), row_group_size=n,
                   write_page_index=True, data_page_size=8 * 1024, use_dictionary=False)
    pq.write_table(pa.table({"id": pa.array([150_000, 150_001, 150_500], pa.int64())}),
                   str(tmp_path / "keys.parquet"))

    def scan_of(sql):
        plan = quiver.ok("query", "--format", "csv", f"EXPLAIN ANALYZE {sql}", cwd=tmp_path)
        line = next(line for line in plan.splitlines()
                    if "BucketScanExec" in line and "columns=[id, v]" in line)
        skipped = re.search(r"page_rows_skipped=([0-9.]+ ?K?)", line)
        return skipped.group(1) if skipped else "0"

    ranged = "SELECT count(*) AS n, sum(v) AS s FROM 'sorted.parquet' WHERE id BETWEEN 100000 AND 100099"
    assert quiver.csv(ranged, cwd=tmp_path) == (
        ["n", "s"], [["100", str(sum(i * 7 % 1000 for i in range(100_000, 100_100)))]])
    assert scan_of(ranged) not in ("0", "")
    joined = ("SELECT sum(s.v) AS s FROM 'keys.parquet' k JOIN 'sorted.parquet' s "
              "ON s.id = k.id")
    assert quiver.csv(joined, cwd=tmp_path) == (
        ["s"], [[str(sum(i * 7 % 1000 for i in (150_000, 150_001, 150_500)))]])
    assert scan_of(joined) not in ("0", "")


def test_a_filter_evaluates_its_cheap_checks_first(quiver, tmp_path):
    """The comparison with a literal goes first, and a LIKE of two segments is preceded by a
    substring search for each (filter_order.rs); the answer is the query's."""
    write(str(tmp_path / "big.parquet"), 20_000)
    sql = "SELECT count(*) AS n FROM 'big.parquet' WHERE name LIKE '%ev%en%' AND id < 100"
    plan = quiver.ok("explain", sql, cwd=tmp_path)
    assert ("FilterExec: id@0 < 100 AND name@1 LIKE %ev% AND name@1 LIKE %en% "
            "AND name@1 LIKE %ev%en%") in plan, plan
    assert quiver.csv(sql, cwd=tmp_path) == (["n"], [["50"]])


# errors: non-zero exit, a message naming the problem, no panic


def make_bad_files(root):
    (root / "notparquet.parquet").write_text("this is not a parquet file\n" * 10)
    good = write(str(root / "good.parquet"), 1000)
    raw = open(good, "rb").read()
    (root / "truncated.parquet").write_bytes(raw[:-100])


@pytest.mark.parametrize("sql, mentions", [
    ("SELECT * FROM 'nothere/missing_file.parquet'", "missing_file.parquet"),
    ("SELECT * FROM 'glob/zzz*.parquet'", "zzz"),
    ("SELECT * FROM 'notparquet.parquet'", "notparquet.parquet"),
    ("SELECT count(*) FROM 'truncated.parquet'", "truncated.parquet"),
    ("SELECT nosuchcol FROM 'f.parquet'", "nosuchcol"),
    ("SELEC 1", "selec"),
], ids=["missing-path", "glob-matches-nothing", "not-parquet", "truncated", "unknown-column",
        "syntax-error"])
def test_error(quiver, data, sql, mentions):
    make_bad_files(data)
    proc = quiver.run("query", sql, cwd=data)
    assert proc.returncode != 0, f"expected failure, got stdout:\n{proc.stdout}"
    assert mentions in proc.stderr.lower(), f"stderr does not mention {mentions!r}:\n{proc.stderr}"


# reading only what the query needs


def profile_number(stderr, label):
    """The first number after `label` in --profile output."""
    line = next(l for l in stderr.splitlines() if l.startswith(label))
    return int(line[len(label):].split()[0])


def test_listing_only_query_opens_no_file(quiver, tmp_path):
    write(str(tmp_path / "h" / "d=1" / "a.parquet"), 5)
    (tmp_path / "h" / "d=2").mkdir()
    (tmp_path / "h" / "d=2" / "b.parquet").write_text("not parquet: opening it would fail")
    proc = quiver.run("query", "--profile", "--format", "csv",
                      "SELECT DISTINCT _file, d FROM 'h/**/*.parquet' ORDER BY 1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["_file,d", "a.parquet,1", "b.parquet,2"]
    assert profile_number(proc.stderr, "requests:") == 0


def test_filter_on_hive_column_drops_files_before_their_footer(quiver, tmp_path):
    write(str(tmp_path / "h" / "d=1" / "a.parquet"), 5)
    (tmp_path / "h" / "d=2").mkdir()
    (tmp_path / "h" / "d=2" / "b.parquet").write_text("not parquet")
    assert count(quiver, "'h/**/*.parquet' WHERE d = 1", tmp_path) == 5
    proc = quiver.run("query", "SELECT count(*) FROM 'h/**/*.parquet'", cwd=tmp_path)
    assert proc.returncode != 0 and "b.parquet" in proc.stderr


def test_row_groups_are_pruned_by_statistics(quiver, tmp_path):
    write(str(tmp_path / "sorted.parquet"), 10_000, row_group_size=1_000)
    sql = "SELECT count(*) AS n FROM 'sorted.parquet' WHERE id >= 9500"
    assert quiver.csv(sql, cwd=tmp_path) == (["n"], [["500"]])
    plan = quiver.ok("explain", sql, cwd=tmp_path)
    assert "row groups=1 (pruned 9)" in plan, plan


@pytest.mark.parametrize("executor", ["datafusion", "fragments"])
def test_one_file_is_split_into_buckets_with_the_same_answer(quiver, tmp_path, executor):
    write(str(tmp_path / "big.parquet"), 20_000, row_group_size=1_000)
    sql = "SELECT name, count(*) AS n, sum(id) AS s FROM 'big.parquet' GROUP BY name ORDER BY name"
    whole = quiver.csv(sql, "--executor", executor, cwd=tmp_path)
    split_sql = "SET quiver.min_bucket_bytes = 0; " + sql
    split = quiver.csv(split_sql, "--executor", executor, "--threads", "2", cwd=tmp_path)
    assert split == whole == (["name", "n", "s"], [["even", "10000", str(sum(range(0, 20_000, 2)))],
                                                  ["odd", "10000", str(sum(range(1, 20_000, 2)))]])
    plan = quiver.ok("explain", "--threads", "2", split_sql, cwd=tmp_path)
    assert "buckets=4 in 4 partitions" in plan, plan


@pytest.mark.parametrize("fmt", ["csv", "table", "json"])
def test_a_reader_that_stops_early_ends_the_output_quietly(quiver, tmp_path, fmt):
    """`quiver query ... | head -1`: the pipe closes after one line; quiver stops without
    an error or a panic and exits 0, as cat does."""
    write(str(tmp_path / "big.parquet"), 200_000)
    sql = "SELECT * FROM 'big.parquet'"
    pipeline = f"{shlex.quote(quiver.path)} query --format {fmt} {shlex.quote(sql)} | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)
    assert len(proc.stdout.splitlines()) == 1


def test_profile_reports_requests_and_phases(quiver, data):
    proc = quiver.run("query", "--profile", "SELECT sum(id) FROM 'f.parquet'", cwd=data)
    assert proc.returncode == 0, proc.stderr
    # A local footer read takes the last 64 KiB: all of a small file, so no second request.
    assert profile_number(proc.stderr, "requests:") == 1
    assert "time execute:" in proc.stderr


def test_a_local_file_is_read_as_the_decoder_asks(quiver, tmp_path):
    """Local files are not fetched a bucket at a time but read as the decoder asks (the page
    cache is their fetching ahead), so a scan holds one row group, not a bucket: one read per
    row group (its column chunks are adjacent), except what the footer's read (a local file's
    last 64 KiB) already holds, and nothing the plan did not foresee."""
    path = tmp_path / "ten.parquet"
    write(str(path), 400_000, row_group_size=40_000, compression="none")
    meta = pq.ParquetFile(path).metadata
    tail = os.path.getsize(path) - 64 * 1024
    assert meta.num_row_groups == 10 and tail > 0

    def start(rg):
        chunks = [meta.row_group(rg).column(c) for c in range(meta.num_columns)]
        return min(c.dictionary_page_offset or c.data_page_offset for c in chunks)

    outside_tail = sum(1 for rg in range(meta.num_row_groups) if start(rg) < tail)
    proc = quiver.run("query", "--profile", "--format", "csv",
                      "SELECT sum(id) AS s, count(name) AS n FROM 'ten.parquet'", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["s,n", f"{sum(range(400_000))},400000"]
    requests = next(l for l in proc.stderr.splitlines() if l.startswith("requests:"))
    assert profile_number(proc.stderr, "requests:") == 1 + outside_tail, requests
    assert "0 unplanned" in requests, requests


def test_bad_setting_is_a_clear_error(quiver):
    proc = quiver.run("query", "SET quiver.no_such_setting = 1")
    assert proc.returncode != 0 and "no_such_setting" in proc.stderr
    # A value of the wrong kind names its setting too (DataFusion says only what failed).
    proc = quiver.run("query", "SET quiver.broadcast_bytes = 'many'; SELECT 1")
    assert proc.returncode != 0 and "quiver.broadcast_bytes" in proc.stderr, proc.stderr


def test_placement_settings_are_refused_when_set_and_a_ceiling_never_hides_the_estimate(
        quiver, data):
    """A policy, executor or ceiling that no query could use is refused by SET itself, not
    by the first query that reads it; `EXPLAIN COST` answers under any ceiling (the
    estimate is what the user asked for), while the query itself is refused."""
    for setting, why in [("quiver.place = 'fast'", "not a policy"),
                         ("quiver.executor = 'turbo'", "not an executor"),
                         ("quiver.max_dollars = -1", "not a ceiling in dollars")]:
        proc = quiver.run("query", f"SET {setting}; SELECT 1")
        assert proc.returncode == 1 and why in proc.stderr, (setting, proc.stderr)
        key, value = setting.replace("'", "").split(" = ")
        proc = quiver.run("query", "--set", f"{key}={value}", "SELECT 1")
        assert proc.returncode == 1 and why in proc.stderr, (setting, proc.stderr)
    sql = "SELECT sum(id) FROM 'f.parquet'"
    ceiling = ("--set", "quiver.max_dollars=0.0000000001")
    header, [row] = quiver.csv(sql, "--dry-run", *ceiling, cwd=data)
    cost = dict(zip(header, row))
    assert cost["place"] == "local" and float(cost["local_dollars"]) > 0, cost
    proc = quiver.run("query", *ceiling, sql, cwd=data)
    assert proc.returncode == 1 and "above quiver.max_dollars" in proc.stderr, proc.stderr


def test_wildcard_is_never_answered_from_the_listing(quiver, data):
    # DISTINCT ignores duplicates, but * must still mean every file column
    assert quiver.csv("SELECT count(*) AS n FROM (SELECT DISTINCT * FROM 'glob/a2.parquet')",
                      cwd=data) == (["n"], [["2"]])
    header, rows = quiver.csv("SELECT DISTINCT * FROM 'f.parquet' ORDER BY id", cwd=data)
    assert header[:2] == ["id", "name"] and len(rows) == 3


def test_explain_analyze_reports_the_scan_reads(quiver, data):
    out = quiver.ok("query", "--format", "csv",
                    "EXPLAIN ANALYZE SELECT sum(id) FROM 'glob/f4.parquet'", cwd=data)
    scan = next(line for line in out.splitlines() if "BucketScanExec" in line)
    assert "requests=" in scan and "bytes_read=" in scan and "cache_hit_bytes=" in scan, scan
    # The rows it gave and the time spent decoding them, as DataFusion's scan reports.
    _, [[rows]] = quiver.csv("SELECT count(*) FROM 'glob/f4.parquet'", cwd=data)
    assert f"output_rows={rows}," in scan and "elapsed_compute=" in scan, scan


# COPY ... TO


def copy_source(tmp_path):
    """200 rows over 3 regions and 4 days, some region names needing escapes."""
    regions = ["north", "south/east", None]
    table = pa.table({
        "id": pa.array(range(200), pa.int64()),
        "region": pa.array([regions[i % 3] for i in range(200)]),
        "day": pa.array([f"2024-01-0{1 + i % 4}" for i in range(200)]),
        "amount": pa.array([i * 1.5 for i in range(200)]),
    })
    path = tmp_path / "events.parquet"
    pq.write_table(table, path, row_group_size=50)
    return path, table


def test_copy_partitioned_writes_hive_folders_and_a_manifest(quiver, tmp_path):
    source, table = copy_source(tmp_path)
    out = tmp_path / "out"
    header, rows = quiver.csv(
        f"COPY (SELECT id, region, day, amount FROM '{source}' WHERE id >= 20) "
        f"TO '{out}/' (FORMAT parquet, PARTITION_BY (region, day))")
    assert header == ["rows", "files"] and rows == [["180", "12"]]
    manifest = json.loads((out / "_quiver_manifest.json").read_text())
    assert manifest["partition_by"] == ["region", "day"] and manifest["rows"] == 180
    folders = sorted(os.path.relpath(os.path.dirname(f["path"]), out) for f in manifest["files"])
    assert "region=south%2Feast/day=2024-01-02" in folders
    assert "region=__HIVE_DEFAULT_PARTITION__/day=2024-01-01" in folders
    listed = sorted(os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs
                    if f.endswith(".parquet"))
    assert listed == sorted(f["path"] for f in manifest["files"])
    # Read back: the files hold the other columns, the folders the partition values.
    back = pa.concat_tables(pq.read_table(f["path"]).append_column(
        "region", pa.array([f["partition"]["region"]] * f["rows"], pa.string())).append_column(
        "day", pa.array([f["partition"]["day"]] * f["rows"], pa.string()))
        for f in manifest["files"])
    expected = table.filter(pa.compute.greater_equal(table["id"], 20))
    assert sorted(back.select(["id", "region", "day", "amount"]).to_pylist(),
                  key=lambda r: r["id"]) == expected.to_pylist()


def test_partition_values_read_back_as_written(quiver, tmp_path):
    """Folder names escape what a path cannot hold (`south/east` is `south%2Feast`) and NULL
    is Hive's default partition; reading the output back undoes both."""
    source, _ = copy_source(tmp_path)
    out = tmp_path / "out"
    quiver.ok("query", f"COPY (SELECT id, region FROM '{source}') "
                       f"TO '{out}/' (FORMAT parquet, PARTITION_BY (region))")
    header, rows = quiver.csv(
        f"SELECT region, count(*) AS n, region IS NULL AS missing FROM '{out}/**/*.parquet' "
        "GROUP BY region ORDER BY region NULLS LAST")
    assert header == ["region", "n", "missing"]
    assert rows == [["north", "67", "false"], ["south/east", "67", "false"], ["", "66", "true"]]


def test_copy_to_a_file_and_datafusion_syntax(quiver, tmp_path):
    source, table = copy_source(tmp_path)
    quiver.ok("query", f"COPY (SELECT id, amount FROM '{source}' ORDER BY id) "
                       f"TO '{tmp_path / 'one.parquet'}' (FORMAT parquet)")
    assert pq.read_table(tmp_path / "one.parquet").to_pylist() == \
        table.select(["id", "amount"]).to_pylist()
    quiver.ok("query", f"COPY (SELECT id, day FROM '{source}') TO '{tmp_path / 'df'}/' "
                       "STORED AS PARQUET PARTITIONED BY (day)")
    assert sorted(os.listdir(tmp_path / "df")) == [
        "_quiver_manifest.json", "day=2024-01-01", "day=2024-01-02", "day=2024-01-03",
        "day=2024-01-04"]


def test_a_failed_copy_leaves_no_manifest(quiver, tmp_path):
    source, _ = copy_source(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    # A file where the second partition's folder must go: that write fails midway.
    (blocked / "day=2024-01-02").write_text("in the way")
    proc = quiver.run("query", f"COPY (SELECT id, day FROM '{source}') TO '{blocked}/' "
                               "(FORMAT parquet, PARTITION_BY (day))")
    assert proc.returncode != 0 and "day=2024-01-02" in proc.stderr, proc.stderr
    assert sorted(os.listdir(blocked)) == ["day=2024-01-01", "day=2024-01-02"]
    assert os.listdir(blocked / "day=2024-01-01") == [], "the written file was not removed"
    bad = quiver.run("query", f"COPY (SELECT id FROM '{source}') TO '{tmp_path / 'x'}/' "
                              "(FORMAT parquet, PARTITION_BY (nope))")
    assert bad.returncode != 0 and "nope" in bad.stderr and "not in the query" in bad.stderr
    csv = quiver.run("query", f"COPY (SELECT id FROM '{source}') TO '{tmp_path / 'y'}/' "
                              "(FORMAT csv)")
    assert csv.returncode != 0 and "Parquet" in csv.stderr


# streamed output


def peak_rss_mb(quiver, *args):
    """Runs `quiver ARGS` with its output thrown away; returns its peak RSS in MB: the
    kernel's high-water mark of its own memory (VmHWM), read until it exits. (wait4's
    ru_maxrss would include this test process's memory, which a forked child inherits.)"""
    import time

    proc = subprocess.Popen([quiver.path, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    peak_kb = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                hwm = next((line for line in f if line.startswith("VmHWM:")), None)
            if hwm:
                peak_kb = max(peak_kb, int(hwm.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    stderr = proc.stderr.read().decode()
    assert proc.returncode == 0, stderr
    assert peak_kb > 0, "the process ended before its memory could be read"
    return peak_kb / 1024


def test_output_streams_so_memory_does_not_grow_with_the_answer(quiver):
    """3 million rows of ~110 bytes: held whole, the answer alone would take over 330 MB."""
    sql = "SELECT i, repeat('x', 100) AS pad FROM generate_series(1, 3000000) AS t(i)"
    for fmt in ["arrow", "csv"]:
        peak = peak_rss_mb(quiver, "query", "--format", fmt, sql)
        assert peak < 200, f"{fmt}: peak RSS {peak:.0f} MB"


def test_a_query_failing_half_way_leaves_the_older_output_file(quiver, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("older\n")
    # The cast fails at row 100,000, after the first batches were written.
    sql = ("SELECT CAST(CASE WHEN i < 100000 THEN '1' ELSE 'x' END AS INT) AS n "
           "FROM generate_series(1, 200000) AS t(i)")
    proc = quiver.run("query", "--format", "csv", "--output", str(out), sql)
    assert proc.returncode != 0
    assert "x" in proc.stderr and "Int32" in proc.stderr, proc.stderr
    assert out.read_text() == "older\n"
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]
    # and a query that succeeds replaces it
    quiver.ok("query", "--format", "csv", "--output", str(out), "SELECT 1 AS n")
    assert out.read_text() == "n\n1\n"


def test_copy_streams_so_memory_does_not_grow_with_the_answer(quiver, tmp_path):
    """The same 3 million rows through COPY, to one file and to partitions: each file is
    encoded as rows arrive (staged beside it, renamed when whole), never held as batches."""
    sql = ("SELECT i, i % 4 AS part, repeat('x', 100) AS pad "
           "FROM generate_series(1, 3000000) AS t(i)")
    one, parts = tmp_path / "one.parquet", tmp_path / "parts"
    for target in [f"'{one}' (FORMAT parquet)", f"'{parts}/' (FORMAT parquet, PARTITION_BY (part))"]:
        peak = peak_rss_mb(quiver, "query", f"COPY ({sql}) TO {target}")
        assert peak < 200, f"COPY to {target}: peak RSS {peak:.0f} MB"
    assert quiver.csv(f"SELECT count(*) AS n, sum(i) AS s FROM '{one}'") == \
        (["n", "s"], [["3000000", str(3000000 * 3000001 // 2)]])
    assert quiver.csv(f"SELECT count(*) AS n FROM '{parts}/*/*.parquet' WHERE i % 4 = 1") == \
        (["n"], [["750000"]])
    left = [f for _, _, fs in os.walk(tmp_path) for f in fs if not f.endswith((".parquet", ".json"))]
    assert left == [], left


def test_a_copy_failing_half_way_leaves_nothing(quiver, tmp_path):
    # The cast fails at row 100,000, after the first batches were encoded.
    sql = ("SELECT CAST(CASE WHEN i < 100000 THEN '1' ELSE 'x' END AS INT) AS n, i % 2 AS p "
           "FROM generate_series(1, 200000) AS t(i)")
    for target in [f"'{tmp_path / 'one.parquet'}' (FORMAT parquet)",
                   f"'{tmp_path / 'parts'}/' (FORMAT parquet, PARTITION_BY (p))"]:
        proc = quiver.run("query", f"COPY ({sql}) TO {target}")
        assert proc.returncode != 0 and "Int32" in proc.stderr, proc.stderr
    left = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    assert left == [], left


def test_a_corrupt_page_is_an_error_that_names_the_file(quiver, tmp_path):
    """A data page that no longer decompresses: Arrow's error named no file ("Arrow error:
    Parquet argument error: External: Unknown frame descriptor")."""
    path = tmp_path / "pages.parquet"
    quiver.ok("query", "--format", "parquet", "--output", str(path),
              "SELECT i, i * 7 AS j FROM generate_series(1, 200000) AS t(i)")
    data = bytearray(path.read_bytes())
    first_page = data.find(b"\x28\xb5\x2f\xfd")  # zstd's magic number, in the first page
    assert first_page > 0
    data[first_page:first_page + 4] = bytes(4)
    path.write_bytes(bytes(data))
    proc = quiver.run("query", f"SELECT sum(i), sum(j) FROM '{path}'")
    assert proc.returncode == 1, proc.stderr
    assert f"{path}: corrupt Parquet data:" in proc.stderr, proc.stderr
    assert "panicked" not in proc.stderr, proc.stderr


def test_a_bus_error_is_a_message_not_a_crash(quiver):
    """Files in the page cache are mapped, and one cut short under a running query raises
    SIGBUS; the command says what happened instead of dying with the shell's "Bus error".
    The signal is sent by hand: a truncation that lands mid-read cannot be timed."""
    proc = subprocess.Popen([quiver.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(b"SELECT 42 AS answer;\n")
    proc.stdin.flush()
    proc.stdout.readline()  # the first statement's table began: the handler is in place
    proc.send_signal(signal.SIGBUS)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1, (proc.returncode, stderr)
    assert b"a file being read was cut short by another program" in stderr, stderr


def test_the_command_is_linked_for_its_code_to_be_mapped_in_2_mib_pages(quiver):
    """Every loadable segment of the executable has its address equal to its file offset
    modulo 2 MiB (build.rs): only then can the kernel map a 2 MiB folio of cached code with
    one page-table entry. lld's default (4 KiB) put the text 0x201000 off."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the alignment is set for Linux builds")
    with open(quiver.path, "rb") as f:
        header = f.read(64)
        assert header[:4] == b"\x7fELF" and header[4] == 2, "a 64-bit ELF executable"
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        kind, _flags, offset, vaddr = struct.unpack_from("<IIQQ", table, i * phentsize)
        align, = struct.unpack_from("<Q", table, i * phentsize + 0x30)
        if kind == 1:  # PT_LOAD
            loads.append((offset, vaddr, align))
    assert loads, "no loadable segment"
    two_mib = 2 << 20
    for offset, vaddr, align in loads:
        assert align == two_mib, (hex(offset), hex(vaddr), hex(align))
        assert (vaddr - offset) % two_mib == 0, (hex(offset), hex(vaddr))


# the memory limit

# About 110 MB of rows to sort: well over the limits set below.
BIG_SORT = ("SELECT i, repeat('x', 100) AS pad FROM generate_series(1, 1000000) AS t(i) "
            "ORDER BY i DESC")


def spill_count(quiver, sql, *args):
    plan = quiver.ok("query", "--format", "csv", *args, f"EXPLAIN ANALYZE {sql}")
    return sum(int(n) for n in re.findall(r"spill_count=(\d+)", plan))


def sorted_ids(quiver, tmp_path, sql, *args):
    """The `i` column of a sort's (i, pad) rows, written to a CSV file."""
    out = tmp_path / "sorted.csv"
    quiver.ok("query", "--format", "csv", "--output", str(out), *args, sql)
    with open(out) as f:
        assert f.readline() == "i,pad\n"
        return [int(line.split(",", 1)[0]) for line in f]


def test_a_sort_over_the_memory_limit_spills_and_answers_right(quiver, tmp_path):
    assert spill_count(quiver, BIG_SORT) == 0, "the default limit should hold this sort"
    limit = ("--set", "quiver.memory_limit=64MB")
    assert spill_count(quiver, BIG_SORT, *limit) > 0
    assert sorted_ids(quiver, tmp_path, BIG_SORT, *limit) == list(range(1000000, 0, -1))


def test_a_query_that_spilled_leaves_no_temporary_files(quiver, tmp_path):
    """The command ends with _exit, after its session (and the spill folder with it) is
    dropped: nothing is left in TMPDIR."""
    spill = tmp_path / "tmp"
    spill.mkdir()
    env = {**os.environ, "TMPDIR": str(spill)}
    plan = quiver.ok("query", "--format", "csv", "--set", "quiver.memory_limit=64MB",
                     f"EXPLAIN ANALYZE {BIG_SORT}", env=env)
    assert sum(int(n) for n in re.findall(r"spill_count=(\d+)", plan)) > 0
    assert list(spill.iterdir()) == []


def test_a_fragment_that_spills_answers_right(quiver, tmp_path):
    """The fragments executor (the browser's and Lambda's) sorts each partition on its compute
    threads; a sort that spilled there read its files back through tokio's blocking pool,
    which those threads could not reach, and the process aborted."""
    rows = tmp_path / "rows.parquet"
    quiver.ok("query", "--format", "parquet", "--output", str(rows),
              "SELECT i, repeat('x', 300) || i AS pad FROM generate_series(1, 1000000) AS t(i)")
    sql = f"SELECT i, pad FROM '{rows}' ORDER BY i DESC"
    # Two partitions of about 150 MB of rows each under 128 MB: they spill or fail.
    # (EXPLAIN ANALYZE shows no metrics of operators run in fragments.)
    args = ("--executor", "fragments", "--threads", "2", "--set", "quiver.min_bucket_bytes=0",
            "--set", "quiver.memory_limit=128MB")
    assert sorted_ids(quiver, tmp_path, sql, *args) == list(range(1000000, 0, -1))


def test_a_join_that_cannot_spill_names_the_limit(quiver):
    sql = ("SELECT count(*) AS n FROM generate_series(1, 2000000) AS a(i) "
           "JOIN generate_series(1, 2000000) AS b(j) ON i = j")
    proc = quiver.run("query", "--set", "quiver.memory_limit=4MB", sql)
    assert proc.returncode == 1, proc.stderr
    assert "quiver.memory_limit" in proc.stderr and "HashJoin" in proc.stderr, proc.stderr
    # the same join within the default limit
    assert quiver.csv(sql) == (["n"], [["2000000"]])


def test_a_memory_limit_that_is_not_a_size_is_refused_at_once(quiver):
    proc = quiver.run("query", "SET quiver.memory_limit = 'lots'; SELECT 1")
    assert proc.returncode == 1 and "'lots' is not a size" in proc.stderr, proc.stderr
    proc = quiver.run("query", "--set", "quiver.memory_limit=12 parsecs", "SELECT 1")
    assert proc.returncode == 1 and "'4GB'" in proc.stderr, proc.stderr
    assert quiver.csv("SET quiver.memory_limit = '50%'; SELECT 1 AS x") == (["x"], [["1"]])
