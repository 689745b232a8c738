"""Scenario 4: thousands of small files in a hive layout (events/date=YYYY-MM-DD/...).

Three queries, cold and hot: a filter on the hive column `date`, a filter on the file path, and
a listing-only query (SELECT DISTINCT _file). Each engine names the path columns its own way;
engines.view() maps them all to `_path` and `_file`, so the query text is the same everywhere.
"""
import os

from benches import charts, data, report

NAME = "small_files"
TITLE = "Thousands of small files in a hive layout"
KINDS = ("cold", "hot")
QUERIES = {
    "date filter": "SELECT count(*) AS n, sum(amount) AS total FROM events "
                   "WHERE date >= '2024-02-01' AND date < '2024-03-01'",
    "_path filter": "SELECT count(*) AS n, sum(amount) AS total FROM events "
                    "WHERE _path LIKE '%/part-0-%'",
    "listing only": "SELECT DISTINCT _file FROM events ORDER BY _file",
}
PATH_COLUMNS = {
    "quiver": "virtual columns `_path`, `_file`",
    "duckdb": "`read_parquet(..., filename = true)`: `filename` as `_path`, "
              "`parse_filename(filename)` as `_file`",
    "chdb": "virtual columns `_path`, `_file` of `file()`",
    "datafusion": "`input_file_name()` (per row, after reading; no file pruning), "
                  "prefixed with `/`, and its last part as `_file`",
}


def run(bench):
    n = bench.mode.small_files
    root = data.small_files(n)
    files = data.parquet_files(root)
    setup = bench.views({"events": os.path.join(root, "events", "*", "*.parquet")},
                        hive=["date"], files=True)
    results = {name: bench.compare(f"{NAME} {name}", setup, sql, files)
               for name, sql in QUERIES.items()}

    engines, base, peers = bench.engines, bench.base, bench.peers
    queries = "".join(f"- {name}: `{sql}`\n" for name, sql in QUERIES.items())
    columns = "".join(f"- {e.label}: {PATH_COLUMNS.get(e.name.split('-')[0], '?')}\n"
                      for e in engines)
    stats = [[q, o[base.name].stats.get("files", "-"), o[base.name].stats.get("requests", "-")]
             for q, o in results.items()]
    body = (f"{n:,} files of {data.SMALL_FILE_ROWS:,} rows under `{root}/events/`, "
            f"{data.FILES_PER_DAY} a day from {data.FIRST_DAY}.\n\n" + queries
            + "\nPath columns per engine:\n\n" + columns
            + report.timing_sections(results, bench, KINDS)
            + f"\n### What {base.label} read (its --profile, cold run)\n\n"
            + report.table(["query", "files", "requests"], stats)
            + "\n### Notes\n\n" + report.notes(results, engines))

    chart = f"{NAME}.png"
    charts.time_chart(os.path.join(bench.results, chart), f"{n:,} small files, hive layout",
                      results, engines)
    summary = report.ratio_lines(results, base, peers, KINDS)
    return report.Section(NAME, f"{TITLE} ({n:,} files)", body, [chart], summary)
