"""What a DuckDB user expects on first contact: `*` without virtual columns, SQL type names,
tables that fit a screen, union_by_name, SUMMARIZE, and the shell (driven through a
pseudo-terminal). Where DuckDB answers the same SQL, the answers are compared with its."""
import datetime
import decimal
import errno
import fcntl
import json
import os
import pty
import re
import select
import subprocess
import termios
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import duckdb_functions
from harness import parse_csv

TYPES = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "small": pa.array([1, None, 3], pa.int32()),
    "name": pa.array(["a", None, "c"], pa.string()),
    "price": pa.array([decimal.Decimal("1.50"), decimal.Decimal("2.25"), None],
                      pa.decimal128(15, 2)),
    "day": pa.array([datetime.date(2024, 1, d) for d in (1, 2, 3)], pa.date32()),
    "at": pa.array([datetime.datetime(2024, 1, 1, h) for h in (1, 2, 3)], pa.timestamp("us")),
    "ratio": pa.array([0.5, 1.5, None], pa.float64()),
    "ok": pa.array([True, False, None], pa.bool_()),
    "tags": pa.array([["x"], [], None], pa.list_(pa.string())),
})


@pytest.fixture
def typed(tmp_path):
    pq.write_table(TYPES, tmp_path / "t.parquet")
    os.makedirs(tmp_path / "many")
    for i in range(3):
        pq.write_table(TYPES, tmp_path / "many" / f"p{i}.parquet")
    return tmp_path


def duck(sql, cwd):
    """DuckDB's answer to `sql`, run in `cwd`, as (header, rows of text)."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        relation = duckdb.connect().sql(sql)
        rows = [["" if v is None else str(v) for v in row] for row in relation.fetchall()]
        return list(relation.columns), rows
    finally:
        os.chdir(here)


# virtual columns stay out of *


def test_star_is_the_files_columns_only_in_every_format(quiver, typed):
    header, rows = quiver.csv("SELECT * FROM 't.parquet'", cwd=typed)
    assert header == TYPES.column_names and len(rows) == 3
    assert header == duck("SELECT * FROM 't.parquet'", typed)[0]
    out = json.loads(quiver.ok("query", "--format", "json", "SELECT * FROM 'many/*.parquet'",
                               cwd=typed))
    # (JSON leaves out null values, so the keys of all rows together.)
    assert len(out) == 9 and set().union(*out) == set(TYPES.column_names)


def test_virtual_columns_appear_when_named_and_still_drop_files(quiver, typed):
    header, rows = quiver.csv("SELECT _file, * FROM 'many/*.parquet' WHERE _file = 'p1.parquet'",
                              cwd=typed)
    assert header == ["_file"] + TYPES.column_names
    assert len(rows) == 3 and {r[0] for r in rows} == {"p1.parquet"}
    proc = quiver.run("query", "--profile", "--format", "csv",
                      "SELECT * FROM 'many/*.parquet' WHERE _path LIKE '%p2%'", cwd=typed)
    assert proc.returncode == 0, proc.stderr
    assert parse_csv(proc.stdout)[0] == TYPES.column_names
    assert re.search(r"files: 1 read, 2 pruned", proc.stderr), proc.stderr
    # t.* over a join: each side's own columns.
    header, _ = quiver.csv(
        "SELECT a.*, b._size FROM 'many/p0.parquet' a JOIN 'many/p1.parquet' b ON a.id = b.id",
        cwd=typed)
    assert header == TYPES.column_names + ["_size"]
    header, rows = quiver.csv(
        "SELECT * FROM 'many/p0.parquet' a JOIN 'many/p1.parquet' b ON a.id = b.id "
        "WHERE b._file = 'p1.parquet'", cwd=typed)
    assert header == TYPES.column_names * 2 and len(rows) == 3


def test_describe_names_sql_types_as_duckdb_does(quiver, typed):
    header, rows = quiver.csv("DESCRIBE 't.parquet'", cwd=typed)
    assert header == ["column_name", "column_type", "null", "key", "default", "extra"]
    _, theirs = duck("DESCRIBE SELECT * FROM 't.parquet'", typed)
    assert [r[:2] for r in rows] == [r[:2] for r in theirs]
    header, rows = quiver.csv("DESCRIBE SELECT id, name AS n FROM 't.parquet'", cwd=typed)
    assert [r[:2] for r in rows] == [["id", "BIGINT"], ["n", "VARCHAR"]]


# tables that fit a screen


def test_a_long_table_shows_its_first_and_last_rows_and_counts(quiver, tmp_path):
    n = 150_000
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()),
                             "name": [f"row {i}" for i in range(n)]}), tmp_path / "big.parquet")
    text = quiver.ok("query", "SELECT * FROM 'big.parquet' ORDER BY id", cwd=tmp_path)
    lines = text.splitlines()
    assert len(lines) < 60, text
    assert re.search(r"│\s+id\s+│\s+name\s+│", lines[1]) and re.search(r"bigint.*varchar", lines[2])
    assert "row 0 " in text and "row 149999" in text and "row 75000" not in text
    assert "150,000 rows (40 shown)" in text
    everything = quiver.ok("query", "--max-rows", "0", "SELECT * FROM 'big.parquet' LIMIT 1000",
                           cwd=tmp_path)
    assert len(everything.splitlines()) == 1000 + 5
    # CSV stays whole.
    assert len(quiver.ok("query", "--format", "csv", "SELECT id FROM 'big.parquet'",
                         cwd=tmp_path).splitlines()) == n + 1


# union_by_name


def test_union_by_name_matches_columns_across_files(quiver, tmp_path):
    os.makedirs(tmp_path / "u")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "x": ["a", "b"]}),
                   tmp_path / "u" / "1.parquet")
    pq.write_table(pa.table({"y": [0.5], "id": pa.array([3], pa.int64())}),
                   tmp_path / "u" / "2.parquet")
    sql = ("SELECT * FROM read_parquet('u/*.parquet', union_by_name => true) "
           "ORDER BY id")
    header, rows = quiver.csv(sql, cwd=tmp_path)
    theirs = duck(sql.replace("=> true", "= true"), tmp_path)
    assert header == theirs[0] == ["id", "x", "y"]
    assert rows == theirs[1]
    described = quiver.csv(
        "DESCRIBE SELECT * FROM read_parquet('u/*.parquet', union_by_name => true)",
        cwd=tmp_path)[1]
    assert [r[:2] for r in described] == [["id", "BIGINT"], ["x", "VARCHAR"], ["y", "DOUBLE"]]
    # Without it, the first file's columns.
    assert quiver.csv("SELECT * FROM 'u/*.parquet' ORDER BY id", cwd=tmp_path)[0] == ["id", "x"]
    pq.write_table(pa.table({"x": pa.array([[1]], pa.list_(pa.int64()))}),
                   tmp_path / "u" / "3.parquet")
    proc = quiver.run("query", sql, cwd=tmp_path)
    assert proc.returncode != 0
    assert "union_by_name" in proc.stderr and "'x'" in proc.stderr and "3.parquet" in proc.stderr


# SUMMARIZE


def test_summarize_agrees_with_duckdb(quiver, typed):
    header, rows = quiver.csv("SUMMARIZE 'many/*.parquet'", cwd=typed)
    theirs_header, theirs = duck("SUMMARIZE SELECT * FROM 'many/*.parquet'", typed)
    assert header == list(theirs_header)
    ours = {r[0]: dict(zip(header, r)) for r in rows}
    theirs = {r[0]: dict(zip(theirs_header, r)) for r in theirs}
    assert list(ours) == list(theirs)
    for column, expected in theirs.items():
        got = ours[column]
        assert got["column_type"] == expected["column_type"], column
        assert got["count"] == expected["count"] == "9", column
        assert got["null_percentage"] == expected["null_percentage"], column
        if column in ("id", "small", "name", "day"):
            assert (got["min"], got["max"]) == (expected["min"], expected["max"]), column
        if column in ("id", "small", "name"):
            assert got["approx_unique"] == expected["approx_unique"], column
    header, rows = quiver.csv("SUMMARIZE SELECT id * 2 AS twice FROM 't.parquet'", cwd=typed)
    assert rows[0][:4] == ["twice", "BIGINT", "2", "6"]


# the shell


class Terminal:
    """`quiver` on a pseudo-terminal: what a person at a keyboard sees."""

    def __init__(self, quiver, cwd, home):
        self.main, child = pty.openpty()
        os.set_blocking(self.main, False)
        env = dict(os.environ, HOME=str(home), TERM="xterm", COLUMNS="100", LINES="40")
        # Its own session with the pty as controlling terminal, so that Ctrl-C is SIGINT.
        self.proc = subprocess.Popen(
            [quiver.path], stdin=child, stdout=child, stderr=child, cwd=cwd, env=env,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(child)
        self.seen = ""

    def read_until(self, pattern, timeout=60):
        deadline = time.time() + timeout
        while not re.search(pattern, self.seen):
            if time.time() > deadline:
                raise AssertionError(f"{pattern!r} did not appear; the terminal shows:\n{self.seen}")
            ready, _, _ = select.select([self.main], [], [], 0.2)
            if ready:
                try:
                    text = os.read(self.main, 65536).decode(errors="replace")
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    text = ""
                # The line editor may ask where the cursor is; a terminal answers.
                for _ in range(text.count("\x1b[6n")):
                    os.write(self.main, b"\x1b[1;1R")
                self.seen += text
        return self.seen

    def send(self, text):
        self.seen = ""
        os.write(self.main, text.encode())

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.main)


def test_the_shell_runs_statements_over_lines_keeps_errors_and_cancels(quiver, typed, tmp_path):
    n = 100_000
    pq.write_table(pa.table({"k": pa.array(range(n), pa.int64())}), typed / "k.parquet")
    term = Terminal(quiver, typed, tmp_path)
    try:
        term.read_until(r"quiver> ")
        term.send("SELECT count(*)\r")
        term.read_until(r"\.\.\.> ")
        term.send("AS n FROM 't.parquet';\r")
        term.read_until(r"│ +3 │[\s\S]*quiver> ")
        term.send("SELEC nothing;\r")
        term.read_until(r"Error: [\s\S]*quiver> ")
        term.send(".mode csv\r")
        term.read_until(r"quiver> ")
        term.send(".timer on\r")
        term.read_until(r"quiver> ")
        term.send("SELECT 42 AS answer;\r")
        term.read_until(r"answer\r?\n42[\s\S]*Run Time \(s\): real [\d.]+[\s\S]*quiver> ")
        # Ctrl-C stops a query that would run for minutes, and the session goes on.
        term.send("SELECT count(*) AS pairs FROM 'k.parquet' a, 'k.parquet' b "
                  "WHERE a.k + b.k = -1;\r")
        time.sleep(2)
        started = time.time()
        os.write(term.main, b"\x03")
        term.read_until(r"Interrupted[\s\S]*quiver> ", timeout=30)
        assert time.time() - started < 20
        term.send("SELECT 7 AS still_here;\r")
        term.read_until(r"still_here\r?\n7")
        term.send(".quit\r")
        assert term.proc.wait(timeout=30) == 0
    finally:
        term.close()
    history = (tmp_path / ".quiver_history").read_text()
    assert "SELECT 42 AS answer;" in history and "AS n FROM 't.parquet';" in history


def test_quiver_alone_runs_piped_sql_as_a_script(quiver, typed):
    proc = subprocess.run([quiver.path], input="SELECT count(*) AS n FROM 't.parquet';",
                          cwd=typed, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"│\s+n\s+│", proc.stdout) and re.search(r"│\s+3\s+│", proc.stdout)
    assert "shell" in quiver.ok("--help")


def piped(quiver, script, cwd):
    """`quiver < script` in `cwd`, as a user pipes a script."""
    return subprocess.run([quiver.path], input=script, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_a_piped_script_runs_as_duckdb_runs_it(quiver, typed):
    """`quiver < script.sql` as `duckdb < script.sql`: dot commands, every statement's answer,
    an error that does not stop the script but fails the run."""
    script = ("-- a DuckDB script\n.mode csv\n.timer on\n"
              "CREATE VIEW t AS SELECT * FROM 't.parquet';\n"
              "SELECT count(*) AS n FROM t;\nSELECT nope FROM t;\n"
              "SELECT max(id) AS top\nFROM t\n")
    proc = piped(quiver, script, typed)
    assert proc.returncode == 1, proc.stderr
    assert "n\n3\n" in proc.stdout and "top\n3\n" in proc.stdout, proc.stdout
    assert proc.stdout.count("Run Time (s): real") == 4, proc.stdout
    assert "nope" in proc.stderr and "1 statement of the script failed" in proc.stderr


def test_a_script_writes_results_to_files_and_lists_its_views_as_duckdb_does(quiver, typed):
    """`.output FILE` (every result after it, until `.output`), `.once FILE` (the next one),
    `.tables` and `.schema`, as DuckDB's shell writes them (each CSV result with its header;
    the names in columns; a view's CREATE statement)."""
    script = (".mode csv\n.output out.csv\nSELECT id FROM 't.parquet' ORDER BY id;\n"
              "SELECT 42 AS x;\n.output\nCREATE VIEW v AS SELECT id FROM 't.parquet';\n"
              "CREATE VIEW w AS SELECT 1 AS one;\n.tables\n.once once.csv\nSELECT 7 AS y;\n"
              "SELECT 8 AS z;\n.schema w\n")
    proc = piped(quiver, script, typed)
    assert proc.returncode == 0, proc.stderr
    for name, expected in [("out.csv", "id\n1\n2\n3\nx\n42\n"), ("once.csv", "y\n7\n")]:
        assert (typed / name).read_text() == expected, name
    assert proc.stdout.splitlines()[:1] == ["v  w"], proc.stdout
    assert "z\n8\n" in proc.stdout, proc.stdout
    assert "VIEW w AS SELECT 1 AS one;" in proc.stdout, proc.stdout
    assert "VIEW v" not in proc.stdout, proc.stdout


# DuckDB's values, names and identifiers


def test_arithmetic_and_casts_give_duckdb_values(quiver, typed):
    sql = ("SELECT 7 / 2 AS a, 1 / 3 AS b, 7 // 2 AS c, -7 // 2 AS d, 2 ^ 3 AS e, "
           "xor(2, 3) AS f, CAST(3.7 AS INTEGER) AS g, CAST(2.5 AS INTEGER) AS h, "
           "CAST(2.5::DOUBLE AS INTEGER) AS i, CAST(3.5::DOUBLE AS INTEGER) AS j, "
           "CAST(-2.5 AS INTEGER) AS k, sum(id) / count(*) AS l, sum(price) / 2 AS m, "
           "CAST(sum(ratio) AS BIGINT) AS n, 1 / 0 AS o FROM 't.parquet'")
    header, rows = quiver.csv(sql, cwd=typed)
    theirs_header, theirs = duck(sql, typed)
    assert header == theirs_header
    assert [float(v) for v in rows[0]] == [float(v) for v in theirs[0]], (rows, theirs)


def test_avg_of_decimals_is_duckdbs_double(quiver, tmp_path):
    """avg over a DECIMAL is DuckDB's DOUBLE, to the last bit: the exact sum over the count,
    grouped (partial states merged across files), alone, filtered and over a sliding window
    (session/duckdb/decimal_avg.rs). DISTINCT and a DECIMAL(38) average as DOUBLEs, to the
    last digits."""
    for part in range(3):
        cents = [(part * 7919 + i * 104729) % 100003 - 50000 for i in range(400)]
        pq.write_table(pa.table({
            "g": pa.array([i % 5 for i in range(400)], pa.int64()),
            "i": pa.array(range(part * 400, part * 400 + 400), pa.int64()),
            "x": pa.array([None if c % 13 == 0 else decimal.Decimal(c).scaleb(-2)
                           for c in cents], pa.decimal128(15, 2)),
        }), tmp_path / f"p{part}.parquet")
    sqls = ["SELECT g, avg(x), avg(x) FILTER (WHERE i % 3 = 0) "
            "FROM '*.parquet' GROUP BY g ORDER BY g",
            "SELECT g, avg(DISTINCT x), avg(x::DECIMAL(38, 2)) AS wide "
            "FROM '*.parquet' GROUP BY g ORDER BY g",
            "SELECT avg(x), avg(x) FILTER (WHERE x < 0) FROM '*.parquet'",
            "SELECT i, avg(x) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS w "
            "FROM '*.parquet' ORDER BY i LIMIT 60"]
    for sql in sqls:
        header, rows = quiver.csv(sql, cwd=tmp_path)
        here = os.getcwd()
        os.chdir(tmp_path)
        try:
            relation = duckdb.connect().sql(sql)
            theirs, types = relation.fetchall(), relation.types
        finally:
            os.chdir(here)
        assert all(str(t) == "DOUBLE" for t in types[-1:]), types
        ours = [[None if v == "" else float(v) for v in row] for row in rows]
        theirs = [[None if v is None else float(v) for v in row] for row in theirs]
        # DuckDB divides in x87 long double and rounds twice: a last bit may differ. Each
        # value cast to DOUBLE first (DISTINCT, DECIMAL(38)) differs in the last digits.
        tolerance = 1e-12 if "DISTINCT" in sql else 1e-15
        assert sum(ours, []) == pytest.approx(sum(theirs, []), rel=tolerance), (sql, ours[:3])


def test_duckdb_function_names_give_duckdb_answers(quiver, typed):
    sql = ("SELECT strlen(name), year(day), month(day), day(day), dayofweek(day), hour(\"at\"), "
           "count_if(ok), arg_max(name, id), min_by(id, ratio), "
           "regexp_matches(name, '^[ab]'), lcase('AB'), suffix('abc', 'bc'), length(tags), "
           "len(concat(tags, tags)), len('abc'), date_diff('day', day, DATE '2024-03-01'), "
           "date_diff('hour', \"at\", TIMESTAMP '2024-01-02 00:30:00') "
           "FROM 't.parquet' WHERE id = 1 GROUP BY ALL")
    header, rows = quiver.csv(sql, cwd=typed)
    theirs_header, theirs = duck(sql, typed)
    assert header[0] == "strlen(name)"
    lower = lambda row: [v.lower().replace(" ", "") for v in row]
    assert lower(rows[0]) == lower(theirs[0]), (rows, theirs)
    # A format COPY does not write is refused, never written as Parquet under its name.
    proc = quiver.run("query", "COPY (SELECT 1 AS a) TO 'out.avro' (FORMAT avro)", cwd=typed)
    assert proc.returncode != 0 and "not avro" in proc.stderr, proc.stderr
    assert not (typed / "out.avro").exists()


def test_age_hash_product_and_quantiles_give_duckdb_values(quiver, typed):
    """age() counts years, months and days as DuckDB does (over pairs of timestamps around
    month ends, both ways); hash() gives DuckDB's own numbers for text, integers, dates and
    NULL; product, quantile_disc, histogram, mad and make_date of a struct are DuckDB's
    (session/duckdb/{numbers,hashes,aggregates}.rs and macros.rs)."""
    moments = ["2001-04-10 00:00:00", "1992-09-20 13:45:10.5", "2024-02-29 23:59:59",
               "2024-03-31 00:00:01", "2023-01-31 12:00:00", "2024-12-01 06:30:00"]
    pairs = [(a, b) for a in moments for b in moments]
    sqls = [" UNION ALL ".join(
        f"SELECT {i} AS i, age(TIMESTAMP '{a}', TIMESTAMP '{b}') AS v"
        for i, (a, b) in enumerate(pairs)) + " ORDER BY i"]
    sqls += [
        "SELECT hash(name) AS a, hash(id) AS b, hash(day) AS c, hash(name, id) AS d, "
        "hash(NULL) AS e FROM 't.parquet' ORDER BY id",
        "SELECT product(id) AS p, product(ratio) AS r, quantile_disc(id, 0.5) AS q, "
        "quantile_disc(ratio, 0.25) AS qr, quantile(id, 0.9) AS q9 FROM 't.parquet'",
        "SELECT make_date({'year': 2024, 'month': 11, 'day': 14}) AS d",
        # Three files: the partial histograms and value lists of several partitions merge.
        "SELECT histogram(small) AS h, histogram(name) AS hn, mad(id) AS m, mad(ratio) AS mr "
        "FROM 'many/*.parquet'",
        "SELECT histogram(id) AS h, mad(id) AS m FROM 't.parquet' WHERE id > 5",
    ]
    for sql in sqls:
        ours, error = duckdb_functions.quivers_answer(quiver.path, sql, cwd=typed)
        assert error is None, (sql, error)
        here = os.getcwd()
        os.chdir(typed)
        try:
            theirs = duckdb.connect().sql(sql).fetchall()
        finally:
            os.chdir(here)
        assert len(ours) == len(theirs), sql
        for o, t in zip(ours, theirs):
            assert duckdb_functions.same(list(o), list(t)), (sql, o, t)


def test_copy_writes_csv_and_json_as_duckdb_does(quiver, typed):
    """The format by the extension or FORMAT, DuckDB's HEADER and DELIMITER, JSON one object
    per line: the same bytes as DuckDB writes."""
    query = "SELECT id, name, price, day FROM 't.parquet' ORDER BY id"
    for target, options in [("a.csv", ""), ("b.csv", " (HEADER false, DELIMITER '|')"),
                            ("c.tsv", ""), ("d.json", ""), ("e.out", " (FORMAT json)")]:
        sql = f"COPY ({query}) TO '{target}'{options}"
        proc = quiver.run("query", sql, cwd=typed)
        assert proc.returncode == 0, proc.stderr
        ours = (typed / target).read_text()
        duckdb.connect().sql(sql.replace(f"'{target}'", f"'{typed / ('duck-' + target)}'")
                             .replace("'t.parquet'", f"'{typed / 't.parquet'}'"))
        theirs = (typed / ("duck-" + target)).read_text()
        if "json" in target + options:
            # The same objects; a DECIMAL's trailing zeros (1.50, DuckDB's 1.5) aside.
            ours, theirs = ([json.loads(line, parse_float=decimal.Decimal)
                             for line in text.splitlines()] for text in (ours, theirs))
        assert ours == theirs, target


def test_identifiers_match_columns_whatever_their_case(quiver, tmp_path):
    hits = pa.table({"AdvEngineID": pa.array([0, 2, 2, 3], pa.int16()),
                     "UserID": pa.array([1, 2, 3, 4], pa.int64())})
    pq.write_table(hits, tmp_path / "hits.parquet")
    # ClickBench's own spelling, through a view, as DuckDB runs it.
    sql = ("CREATE VIEW hits AS SELECT * FROM 'hits.parquet'; "
           "SELECT AdvEngineID, COUNT(*) AS c, count(DISTINCT userid) AS u FROM hits "
           "WHERE advengineid <> 0 GROUP BY \"advengineid\" ORDER BY C DESC")
    header, rows = quiver.csv(sql, cwd=tmp_path)
    expected = (["AdvEngineID", "c", "u"], [["2", "2", "2"], ["3", "1", "1"]])
    assert duck(sql, tmp_path) == expected
    assert (header, rows) == expected
    pq.write_table(pa.table({"id": [1], "ID": [2]}), tmp_path / "two.parquet")
    proc = quiver.run("query", "SELECT Id FROM 'two.parquet'", cwd=tmp_path)
    error = proc.stderr
    assert proc.returncode != 0
    assert '"ID" and "id"' in error or '"id" and "ID"' in error, error
    assert quiver.csv("SELECT id, ID FROM 'two.parquet'", cwd=tmp_path)[1] == [["1", "2"]]


def test_duckdb_function_examples_only_get_better(quiver):
    """Every example of DuckDB's duckdb_functions(), run in both (tests/duckdb_functions.py;
    docs/duckdb-functions.md lists them): no fewer of DuckDB's values than when last counted,
    and no silently different value beyond the ones known."""
    results = duckdb_functions.run(quiver.path)
    tally = duckdb_functions.counts(results)
    different = {example for _, example, verdict, _ in results
                 if verdict == duckdb_functions.DIFFERENT}
    assert not different, sorted(different)
    assert tally[duckdb_functions.SAME] >= 422, dict(tally)
    share, ran = duckdb_functions.most_used(results)
    assert share >= 0.9, f"{share:.0%} of {ran} examples of the most used functions"


def test_arg_max_and_operators_duckdb_reads_otherwise(quiver, typed):
    """arg_max skips a row whose value is NULL (arg_max_null does not); `~`, `**`, `4!` and
    `16_000` are DuckDB's operators and literals; a BLOB literal is the bytes its escapes
    write; list_distinct drops NULL."""
    sql = ("SELECT arg_max(a, b) AS a1, arg_max_null(a, b) AS a2, arg_min(a, b) AS a3, "
           "~15 AS n, 2 ** 3 AS p, 4! AS f, 16_000 AS u, hex('\\xAA\\x41'::BLOB) AS h, "
           "len(list_distinct([1, NULL, 1])) AS d "
           "FROM (VALUES (NULL, 10), ('x', 5), ('y', 1)) t(a, b)")
    header, rows = quiver.csv(sql, cwd=typed)
    assert (header, rows) == duck(sql, typed)


def test_semi_and_anti_joins_and_order_by_all(quiver, typed):
    for sql in ["SELECT file FROM glob('many/*.parquet') ORDER BY file",
                "SELECT count(*) AS n FROM glob('many/*.nothing')",
                "SELECT id, name FROM 't.parquet' t SEMI JOIN (SELECT 2 AS id) u "
                "ON t.id = u.id",
                "SELECT id FROM 't.parquet' t ANTI JOIN (SELECT 2 AS id) u USING (id) "
                "ORDER BY ALL DESC",
                "SELECT name, id FROM 't.parquet' ORDER BY ALL",
                # A `*`, known once planned; NULLs last in both directions, as in DuckDB.
                "SELECT * FROM (SELECT small, name FROM 't.parquet') ORDER BY ALL DESC LIMIT 2",
                "SELECT small, name FROM 't.parquet' ORDER BY small DESC, name"]:
        header, rows = quiver.csv(sql, cwd=typed)
        assert (header, rows) == duck(sql, typed), sql


def test_asof_joins_pair_each_row_with_its_nearest_match_as_duckdb_does(quiver, tmp_path):
    """`ASOF [LEFT] JOIN … ON keys AND one inequality` (session/duckdb/asof.rs): each trade
    with the latest price of its symbol at or before it (`>=`, `>`), or the earliest at or
    after it (`<=`), none where there is none (LEFT keeps the trade); equal to DuckDB."""
    trades = pa.table({"sym": ["a", "a", "b", "b", "c"], "ts": [5, 10, 3, 8, 1],
                       "qty": [1, 2, 3, 4, 5]})
    prices = pa.table({"sym": ["a", "a", "a", "b", "b"], "ts": [1, 5, 9, 4, 9],
                       "price": [1.0, 1.5, 2.0, 7.0, 8.0]})
    pq.write_table(trades, tmp_path / "trades.parquet")
    pq.write_table(prices, tmp_path / "prices.parquet")
    for sql in [
        "SELECT t.sym, t.ts, p.ts AS at, price FROM 'trades.parquet' t ASOF JOIN "
        "'prices.parquet' p ON t.sym = p.sym AND t.ts >= p.ts ORDER BY ALL",
        "SELECT t.sym, t.ts, p.ts AS at, price FROM 'trades.parquet' t ASOF LEFT JOIN "
        "'prices.parquet' p ON t.sym = p.sym AND t.ts > p.ts ORDER BY ALL",
        "SELECT t.sym, t.ts, p.ts AS at, qty * price AS v FROM 'trades.parquet' t "
        "ASOF LEFT JOIN 'prices.parquet' p ON p.sym = t.sym AND p.ts >= t.ts ORDER BY ALL",
        "SELECT count(*) AS n, sum(price) AS s FROM 'trades.parquet' t ASOF JOIN "
        "(SELECT * FROM 'prices.parquet' WHERE price < 8) p ON t.sym = p.sym AND t.ts >= p.ts",
    ]:
        assert quiver.csv(sql, cwd=tmp_path) == duck(sql, tmp_path), sql
    error = quiver.run("query", "SELECT * FROM 'trades.parquet' t ASOF JOIN 'prices.parquet' p "
                       "ON t.sym = p.sym", cwd=tmp_path).stderr
    assert "exactly one inequality" in error and "panic" not in error, error
    error = quiver.run("query", "SELECT * FROM 'trades.parquet' POSITIONAL JOIN "
                       "'prices.parquet'", cwd=tmp_path).stderr
    assert "POSITIONAL JOIN is not supported" in error and "row_number()" in error, error


def test_a_shredded_variant_column_reads_as_pyarrow_reads_it(quiver, tmp_path):
    """DuckDB writes a VARIANT as Parquet's shredded group (metadata, value, typed_value);
    Quiver gives the same struct pyarrow gives, value for value, rather than a VARIANT of its
    own reading."""
    duckdb.connect().sql(
        "COPY (SELECT {'a': 1, 'b': 'x'}::VARIANT AS v, 1 AS id "
        f"UNION ALL SELECT 42::VARIANT, 2) TO '{tmp_path / 'variant.parquet'}'")
    ours, error = duckdb_functions.quivers_answer(
        quiver.path, "SELECT * FROM 'variant.parquet' ORDER BY id", cwd=tmp_path)
    assert error is None, error
    theirs = pq.read_table(tmp_path / "variant.parquet").sort_by("id").to_pylist()
    assert [dict(zip(("v", "id"), row)) for row in ours] == theirs


def test_columns_picks_the_columns_its_selector_names_as_duckdb_does(quiver, tmp_path):
    pq.write_table(pa.table({"id": [1, 2, 3], "small": [1, None, 3], "name": ["a", None, "c"],
                             "number": [2.5, 1.0, None], "numbers": [7, 8, 9]}),
                   tmp_path / "t.parquet")
    for sql in ["SELECT max(COLUMNS(*)) FROM 't.parquet'",
                "SELECT COLUMNS('^(id|small)$') + 1 FROM 't.parquet' ORDER BY ALL",
                "SELECT min(COLUMNS(['name', 'id'])) FROM 't.parquet'",
                "SELECT COLUMNS(lambda c: c LIKE '%m%' AND c NOT IN ('numbers')) "
                "FROM 't.parquet' ORDER BY name",
                "SELECT id FROM 't.parquet' WHERE COLUMNS('^(id|small)$') > 1 ORDER BY id",
                # A FROM clause's columns are known once it is planned: a join, a subquery,
                # a CTE.
                "SELECT COLUMNS('i') FROM 't.parquet' a JOIN (SELECT id AS k FROM 't.parquet') b "
                "ON a.id = b.k ORDER BY ALL",
                "SELECT count(COLUMNS(*)) FROM (SELECT COLUMNS('^[a-n]') FROM 't.parquet')",
                "WITH c AS (SELECT id, name FROM 't.parquet') SELECT max(COLUMNS(*)) FROM c",
                r"SELECT COLUMNS('(n)(.*)') AS '\2_x' FROM 't.parquet' ORDER BY ALL"]:
        header, rows = quiver.csv(sql, cwd=tmp_path)
        assert (header, rows) == duck(sql, tmp_path), sql
    refused = quiver.run("query", "SELECT COLUMNS(lambda c: length(c) > 2) FROM 't.parquet'",
                         cwd=tmp_path)
    assert refused.returncode != 0 and "COLUMNS(lambda …): cannot evaluate" in refused.stderr, \
        refused.stderr


def test_pivot_and_unpivot_in_both_of_duckdb_s_forms(quiver, tmp_path):
    pq.write_table(pa.table({"country": ["NL", "NL", "US", "US", "US"],
                             "year": [2000, 2010, 2000, 2010, 2010],
                             "population": [10, 11, 200, 250, None],
                             "note": ["a", "b", "c", "d", "e"]}), tmp_path / "c.parquet")
    pq.write_table(pa.table({"id": [1, 2], "jan": [5, None], "feb": [7, 8]}),
                   tmp_path / "m.parquet")
    for sql in [
            # The values of the column, found by a query (no IN), become columns in order.
            "PIVOT 'c.parquet' ON year USING sum(population) GROUP BY country ORDER BY country",
            "PIVOT (SELECT country, year, population FROM 'c.parquet') ON year IN (2000, 2010) "
            "USING sum(population) AS p, count(*) AS n ORDER BY ALL",
            "SELECT * FROM (SELECT country, year, population FROM 'c.parquet') "
            "PIVOT (sum(population) FOR year IN (2000, 2010)) ORDER BY country",
            "UNPIVOT 'm.parquet' ON jan, feb INTO NAME month VALUE sales ORDER BY ALL",
            "SELECT * FROM 'm.parquet' UNPIVOT INCLUDE NULLS (sales FOR month IN (jan, feb)) "
            "ORDER BY id, month"]:
        header, rows = quiver.csv(sql, cwd=tmp_path)
        assert (header, rows) == duck(sql, tmp_path), sql


def test_create_macro_expands_as_duckdb_does(quiver, typed):
    """A macro with a default, a macro calling it, named by its call; in one script."""
    script = ("CREATE MACRO plus(a, b := 1) AS a + b; CREATE MACRO twice(x) AS plus(x, x); "
              "SELECT plus(id, 10), plus(id), twice(id) AS t FROM 't.parquet' ORDER BY id")
    header, rows = quiver.csv(script, cwd=typed)
    con = duckdb.connect()
    here = os.getcwd()
    os.chdir(typed)
    try:
        for statement in script.split("; ")[:-1]:
            con.sql(statement)
        relation = con.sql(script.split("; ")[-1])
        theirs = list(relation.columns), [[str(v) for v in row] for row in relation.fetchall()]
    finally:
        os.chdir(here)
    assert (header, rows) == theirs
    proc = quiver.run("query", "CREATE MACRO m() AS TABLE SELECT 1", cwd=typed)
    assert proc.returncode != 0 and "AS TABLE is not supported" in proc.stderr, proc.stderr


def test_timestamp_literals_read_as_duckdb_reads_them(quiver):
    """A UTC offset on a TIMESTAMP literal is dropped, the wall clock kept; a time without
    seconds is read (DataFusion converts the first to UTC and refuses the second)."""
    header, rows = quiver.csv("SELECT TIMESTAMP '1992-04-20 15:26:00-07' AS a, "
                              "CAST('2006-01-01 12:00' AS TIMESTAMP) AS b, "
                              "TIMESTAMPTZ '1992-04-20 15:26:00-07' = "
                              "TIMESTAMPTZ '1992-04-20 22:26:00Z' AS c")
    expected = duckdb.sql("SELECT TIMESTAMP '1992-04-20 15:26:00-07', "
                          "CAST('2006-01-01 12:00' AS TIMESTAMP)").fetchall()[0]
    assert rows == [[expected[0].isoformat(), expected[1].isoformat(), "true"]]


# CSV and JSON as tables


def write_text_tables(folder, rows=150_000):
    """The same rows as CSV (about 8 MB: several of the reader's chunks, with quoted commas,
    quotes and newlines in names), newline-delimited JSON and a JSON array."""
    import csv
    records = [{"id": i, "name": (f'n{i % 97}, "q"\nline' if i % 1000 == 7 else f"n{i % 97}"),
                "price": i * 0.25, "day": str(datetime.date(2024, 1, 1)
                                              + datetime.timedelta(days=i % 300)),
                "seen": f"2024-02-0{1 + i % 9} 10:{i % 60:02d}:00", "ok": i % 3 == 0,
                "empty": None} for i in range(rows)]
    with open(folder / "data.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    with open(folder / "data.ndjson", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    with open(folder / "data.json", "w") as f:
        json.dump(records, f, indent=1)
    import gzip
    with open(folder / "data.csv", "rb") as f, gzip.open(folder / "data.csv.gz", "wb") as out:
        out.write(f.read())
    with pa.CompressedOutputStream(str(folder / "data.ndjson.zst"), "zstd") as out:
        out.write((folder / "data.ndjson").read_bytes())


def test_csv_and_json_files_read_as_duckdb_reads_them(quiver, tmp_path):
    """By extension and through read_csv / read_json: the columns DuckDB's sniffer finds,
    the same answers, across the reader's chunk boundaries, gzip and zstd files too, with
    DuckDB's options."""
    write_text_tables(tmp_path)
    summary = ("SELECT count(*), sum(id), count(name), max(name), sum(price), min(day), "
               "max(seen), sum(ok::INT), count(empty) FROM {}")
    for table in ["'data.csv'", "'data.ndjson'", "'data.json'", "read_csv('data.csv', header = true)",
                  "read_json('data.json', format = 'array')", "read_ndjson_auto('data.ndjson')",
                  "'data.csv.gz'", "read_json('data.ndjson.zst')"]:
        describe = f"DESCRIBE SELECT * FROM {table}"
        ours = [row[:2] for row in quiver.csv(describe, cwd=tmp_path)[1]]
        # (A JSON key that is null in every sampled row is VARCHAR here, DuckDB's "NULL".)
        theirs = [[name, "VARCHAR" if kind == '"NULL"' else kind]
                  for name, kind, *_ in duck(describe, tmp_path)[1]]
        assert ours == theirs, table
        ours = quiver.csv(summary.format(table), cwd=tmp_path)[1]
        theirs = duck(summary.format(table), tmp_path)[1]
        assert [v.replace("T", " ") for v in ours[0]] == theirs[0], table
    # DuckDB's options: no header, another delimiter, everything as text, the file's name.
    (tmp_path / "pipes.txt").write_text("1|a|x\n2|b|\n")
    sql = ("SELECT column0 || '!' AS c, column2, filename FROM read_csv('pipes.txt', delim = '|', "
           "header = false, all_varchar = true, filename = true) ORDER BY 1")
    assert quiver.csv(sql, cwd=tmp_path) == duck(sql, tmp_path)
    sql = ("SELECT count(column1) AS n, count(*) AS rows FROM read_csv('pipes.txt', delim = '|', "
           "header = false, nullstr = 'b')")
    assert quiver.csv(sql, cwd=tmp_path) == duck(sql, tmp_path) == (["n", "rows"], [["1", "2"]])
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(3):
        (parts / f"p{i}.csv").write_text(f"k,v\n{i},{i * 10}\n{i},1\n")
    sql = "FROM 'parts/*.csv' SELECT k, sum(v) AS s GROUP BY ALL ORDER BY ALL"
    assert quiver.csv(sql, cwd=tmp_path) == duck(sql, tmp_path)


def test_text_files_that_do_not_read_give_errors_naming_them(quiver, tmp_path):
    with open(tmp_path / "late.csv", "w") as f:
        f.write("a,b\n" + "".join(f"{i},{i}\n" for i in range(30_000)) + "oops,1\n")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n")
    (tmp_path / "not.json").write_text("{oops")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "plain.csv.gz").write_text("a,b\n1,2\n")
    for sql, expected in [
        ("SELECT sum(a) FROM 'late.csv'", "late.csv: Error while parsing value 'oops'"),
        ("SELECT * FROM 'ragged.csv'", "ragged.csv: "),
        ("SELECT * FROM 'not.json'", "not.json: not JSON"),
        ("SELECT * FROM 'empty.csv'", "empty.csv: the file is empty"),
        ("SELECT * FROM 'plain.csv.gz'", "plain.csv.gz: not valid gzip data"),
        ("SELECT * FROM 'missing.csv'", "missing.csv: no such file"),
        ("SELECT * FROM read_csv('late.csv', skip_rows = 1)", "option 'skip_rows' is not supported"),
    ]:
        proc = quiver.run("query", sql, cwd=tmp_path)
        assert proc.returncode != 0 and expected in proc.stderr, (sql, proc.stderr)
    # The hint says how to read such a file anyway, and that way reads it.
    assert "all_varchar = true" in quiver.run("query", "SELECT sum(a) FROM 'late.csv'",
                                              cwd=tmp_path).stderr
    sql = "SELECT count(*), max(a) FROM read_csv('late.csv', all_varchar = true)"
    assert quiver.csv(sql, cwd=tmp_path)[1] == [["30001", "oops"]]


def test_lambdas_in_both_spellings_give_duckdb_values(quiver, typed):
    """DuckDB's `lambda x : …` and older DuckDB's `x -> …`, under each name of the list
    functions that take them, over a file's lists too."""
    sql = ("SELECT id, list_transform([1, 2, 3], lambda x : x + id) AS a, "
           "apply(tags, lambda t : strlen(t || '!')) AS b, list_filter([1, 2, 3, 4], x -> x % 2 = 0) AS c, "
           "filter([3, 4, 5], lambda x : x > id + 2) AS d FROM 't.parquet' ORDER BY id")
    # DuckDB 2.0 takes the arrow (older DuckDB's spelling) only when told.
    arrows = "SET lambda_syntax = 'ENABLE_SINGLE_ARROW'; "
    assert quiver.csv(sql, cwd=typed) == duck(arrows + sql, typed)


def test_samples_keep_the_share_or_the_rows_asked_for_never_the_whole_table(quiver, tmp_path):
    """DuckDB's `USING SAMPLE` and `TABLESAMPLE`: a percentage keeps about that share of the
    rows, a count exactly that many distinct rows; a sample that cannot be taken is an
    error, never the whole table."""
    pq.write_table(pa.table({"id": pa.array(range(20_000), pa.int64())}), tmp_path / "t.parquet")
    share = "SELECT count(*) AS n FROM 't.parquet' USING SAMPLE 10%"
    counts = [int(quiver.csv(share, cwd=tmp_path)[1][0][0]) for _ in range(3)]
    assert all(1_600 < n < 2_400 for n in counts) and len(set(counts)) > 1, counts
    for sql in ["SELECT count(*) AS n, count(DISTINCT id) AS d FROM 't.parquet' USING SAMPLE 25 ROWS",
                "SELECT count(*) AS n, count(DISTINCT t.id) AS d FROM 't.parquet' AS t "
                "TABLESAMPLE reservoir(25 ROWS) WHERE t.id >= 0"]:
        assert quiver.csv(sql, cwd=tmp_path)[1] == [["25", "25"]], sql
    proc = quiver.run("query", "SELECT count(*) FROM 't.parquet' a JOIN 't.parquet' b USING (id) "
                      "USING SAMPLE 1%", cwd=tmp_path)
    assert proc.returncode != 0 and "USING" in proc.stderr, proc.stderr
