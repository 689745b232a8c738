"""DuckDB's own function examples (every `examples` entry of `duckdb_functions()`), each run in
Quiver and in DuckDB, the oracle, and sorted by verdict:

- same: Quiver's value equals DuckDB's (numbers within 1e-6, lists and structs element-wise);
- different: Quiver answers with another value, silently: the worst verdict;
- refused: Quiver errors (an unknown function, a type it does not take);
- skipped: DuckDB itself cannot run the example alone (it names a table that is not there),
  or its value changes from run to run (`now()`, `random()`, `uuid()`, `version()`).

Examples that name columns (the aggregates' `A`, `x`, `y`) run over a small table of those
columns. Run as a script it writes docs/duckdb-functions.md; tests/test_duckdb_conventions.py
runs it and holds the counts to floors.
    python3 tests/duckdb_functions.py [QUIVER_BIN]
"""
import collections
import concurrent.futures
import datetime
import decimal
import math
import os
import subprocess
import sys

import duckdb
import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(os.path.dirname(HERE), "docs", "duckdb-functions.md")
# The columns DuckDB's aggregate examples name, three rows.
TABLE = ("(VALUES (1, 2, 1.5, 2.5, 3, 'a'), (3, 4, 2.0, 1.0, 5, 'b'), (5, 1, 3.5, 4.0, 7, 'c')) "
         "AS t(A, B, x, y, col, s)")
SAME, DIFFERENT, REFUSED, SKIPPED = "same", "different", "refused", "skipped"
VOLATILE = {"now", "get_current_timestamp", "transaction_timestamp", "current_timestamp",
            "current_date", "today", "get_current_time", "current_localtimestamp",
            "current_localtime", "random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7",
            "version", "txid_current", "current_query", "setseed"}


# The functions people use most, for the share of their examples Quiver answers as DuckDB
# does (issue 34: at least 90%). There is no published count of DuckDB's function calls, so
# the list is ours, written down once: the functions the issue names (strings, dates, lists
# and structs, aggregates, JSON), the everyday ones of text, numbers and dates every SQL
# user reaches for, and the aggregates of TPC-H, TPC-DS and ClickBench's queries.
MOST_USED = set("""
    strlen len length string_split str_split regexp_matches regexp_extract
    regexp_extract_all regexp_replace printf format md5 sha256 hash lower upper lcase ucase
    substring substr trim ltrim rtrim replace concat concat_ws contains starts_with
    ends_with prefix suffix left right lpad rpad reverse repeat split_part position instr
    strpos like ilike ascii chr coalesce nullif greatest least ifnull abs round floor ceil
    ceiling trunc sqrt pow power ln log log10 log2 exp mod sign strftime strptime year
    month day hour minute second dayofweek dayofyear dayname monthname week weekofyear
    quarter date_diff datediff date_sub date_add age epoch epoch_ms make_date
    make_timestamp make_time to_timestamp date_trunc datetrunc date_part datepart extract
    last_day list_value list_contains list_has list_sort list_reverse_sort list_distinct
    unnest array_length list_concat list_cat array_concat list_slice list_filter filter
    list_transform apply list_reduce reduce flatten range generate_series list_extract
    list_element array_extract list_position list_aggregate struct_pack struct_extract row
    count sum avg mean min max list array_agg first last any_value mode arg_max arg_min
    argmax argmin max_by min_by count_if countif histogram product variance var_samp
    var_pop stddev stddev_samp stddev_pop median quantile quantile_cont quantile_disc
    approx_count_distinct approx_quantile string_agg group_concat listagg bool_and bool_or
    corr covar_pop covar_samp json_extract json_extract_string to_json json_object
    json_array json_keys
""".split())


# Functions whose lists DuckDB documents as in no order ("does not preserve the original
# order"): their elements are compared sorted.
UNORDERED = {"list_distinct", "array_distinct"}


def unordered(rows):
    return [tuple(sorted(v, key=repr) if isinstance(v, list) else v for v in row) for row in rows]


def examples():
    """[(function, example SQL)], each pair once, in DuckDB's order."""
    rows = duckdb.connect().sql(
        "SELECT DISTINCT function_name, unnest(examples) AS e FROM duckdb_functions() "
        "WHERE len(examples) > 0 ORDER BY function_name, e").fetchall()
    return [(name, example.strip().rstrip(";")) for name, example in rows]


def statement(example):
    """The statement an example runs as, and DuckDB's answer to it (or None)."""
    con = duckdb.connect()
    for sql in (f"SELECT {example}", f"SELECT {example} FROM {TABLE}"):
        try:
            return sql, con.sql(sql).fetchall()
        except Exception:
            continue
    return None, None


def quivers_answer(quiver_bin, sql, cwd=None):
    """Quiver's rows for `sql` (run in `cwd`), or the first line of its error."""
    proc = subprocess.run([quiver_bin, "query", "--format", "arrow", sql], capture_output=True,
                          timeout=60, cwd=cwd)
    if proc.returncode != 0:
        error = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, (error[0] if error else f"exit {proc.returncode}")
    table = pa.ipc.open_file(pa.BufferReader(proc.stdout)).read_all()
    try:
        return [tuple(row.values()) for row in table.to_pylist()], None
    except (OverflowError, ValueError) as e:  # a timestamp past Python's year 9999
        return None, f"the answer does not convert to Python values ({e})"



def as_duckdb_interval(value):
    """An Arrow interval as DuckDB's client gives an INTERVAL: a timedelta, months as 30 days,
    in microseconds; anything else as it is."""
    if isinstance(value, pa.MonthDayNano):
        return datetime.timedelta(days=value.months * 30 + value.days,
                                  microseconds=value.nanoseconds // 1000)
    return value


def same(a, b):
    """Whether two values are equal as a DuckDB user reads them."""
    a, b = as_duckdb_interval(a), as_duckdb_interval(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float, decimal.Decimal)) and isinstance(b, (int, float, decimal.Decimal)):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, dict) or isinstance(a, dict) and isinstance(b, tuple):
        # An unnamed STRUCT: DuckDB gives a tuple, Arrow a dict of made-up field names.
        values = lambda v: list(v.values()) if isinstance(v, dict) else list(v)
        return same(values(a), values(b))
    if isinstance(a, dict) or isinstance(b, dict):
        # A MAP: DuckDB gives a dict, Arrow a list of (key, value) pairs.
        pairs = lambda m: sorted(m.items()) if isinstance(m, dict) else list(m)
        return same(pairs(a), pairs(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, datetime.datetime) and isinstance(b, datetime.datetime):
        # TIMESTAMPTZ: DuckDB's session is in UTC; Arrow's may come without a zone.
        utc = lambda t: t.astimezone(datetime.timezone.utc).replace(tzinfo=None) \
            if t.tzinfo else t
        return utc(a) == utc(b)
    if isinstance(a, datetime.timedelta) or isinstance(b, datetime.timedelta):
        return str(a) == str(b)
    return a == b


def run(quiver_bin, threads=2):
    """[(function, example, verdict, detail)] for every example."""
    cases = examples()

    def one(case):
        name, example = case
        if name in VOLATILE:
            return name, example, SKIPPED, "its value changes from run to run"
        sql, theirs = statement(example)
        if sql is None:
            return name, example, SKIPPED, "DuckDB cannot run it alone"
        ours, error = quivers_answer(quiver_bin, sql)
        if error is not None:
            return name, example, REFUSED, error
        if name in UNORDERED:
            ours, theirs = unordered(ours), unordered(theirs)
        if len(ours) == len(theirs) and all(same(list(o), list(t)) for o, t in zip(ours, theirs)):
            return name, example, SAME, ""
        return name, example, DIFFERENT, f"Quiver {ours!r}, DuckDB {theirs!r}"

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, cases))


def counts(results):
    return collections.Counter(verdict for _, _, verdict, _ in results)


def most_used(results):
    """The share of the examples of MOST_USED functions that give DuckDB's value, and the
    count of those that ran."""
    ran = [verdict for name, _, verdict, _ in results if name in MOST_USED and verdict != SKIPPED]
    return (ran.count(SAME) / len(ran) if ran else 0.0), len(ran)


def write_report(results, path=REPORT):
    tally = counts(results)
    ran = len(results) - tally[SKIPPED]
    cell = lambda text: str(text).replace("|", "\\|").replace("\n", " ")[:160]
    lines = [
        "# DuckDB's function examples in Quiver",
        "",
        "Every example of DuckDB's `duckdb_functions()` (DuckDB "
        f"{duckdb.__version__}), run in Quiver and compared with DuckDB's answer "
        "(tests/duckdb_functions.py; regenerate with `python3 tests/duckdb_functions.py`).",
        "",
        f"- **{tally[SAME]} of {ran}** give DuckDB's value "
        f"({100 * tally[SAME] / max(ran, 1):.0f}%)",
        f"- {tally[DIFFERENT]} give another value (the list below: each is a bug)",
        f"- of the {most_used(results)[1]} examples of the {len(MOST_USED)} most used "
        f"functions (`MOST_USED` in the script), {100 * most_used(results)[0]:.0f}% give "
        "DuckDB's value",
        f"- {tally[REFUSED]} are refused with an error",
        f"- {tally[SKIPPED]} not counted: DuckDB cannot run them alone (they name tables), "
        "or their value changes from run to run",
        "",
    ]
    for verdict in (DIFFERENT, REFUSED, SAME):
        rows = [r for r in results if r[2] == verdict]
        lines += [f"## {verdict} ({len(rows)})", "", "| function | example | detail |",
                  "| --- | --- | --- |"]
        lines += [f"| {cell(n)} | `{cell(e)}` | {cell(d)} |" for n, e, _, d in rows]
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    from harness import quiver_bin
    binary = sys.argv[1] if len(sys.argv) > 1 else quiver_bin()
    results = run(binary)
    write_report(results)
    print(dict(counts(results)), "->", REPORT)
