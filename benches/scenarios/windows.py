"""Scenario `windows`: running aggregates over ClickBench's hits (one file), every engine,
answers checked against DuckDB. `sum(x) OVER (PARTITION BY a ORDER BY b)` is a RANGE frame
from the partition's start to the row's last peer; DataFusion evaluates it row by row, and
Quiver's `RunningWindowExec` in one pass per batch (docs/decisions.md, "Running
aggregates"). Each query reduces its window to one row, so the answer's transfer is not
timed.
"""
import os

from benches import clickbench, data, suite

NAME = "windows"
TITLE = "Running aggregates over ClickBench's hits"

QUERIES = {
    # A RANGE frame over 10 M rows in 17 k users' partitions, peers tied on EventTime.
    "range_sum": 'SELECT max(r), count(*) FROM (SELECT sum("ResolutionWidth") OVER '
                 '(PARTITION BY "UserID" ORDER BY "EventTime") AS r FROM hits)',
    # The same as a ROWS frame: every row its own value.
    "rows_sum": 'SELECT max(r), count(*) FROM (SELECT sum("ResolutionWidth") OVER '
                '(PARTITION BY "UserID" ORDER BY "EventTime" ROWS UNBOUNDED PRECEDING) AS r '
                'FROM hits)',
    # Several aggregates over one window: one sort, one pass each.
    "rows_min_max_count": 'SELECT max(lo), min(hi), max(n) FROM (SELECT min("ResolutionWidth") '
                          'OVER w AS lo, max("ResolutionWidth") OVER w AS hi, count(*) OVER w '
                          'AS n FROM hits WINDOW w AS (PARTITION BY "UserID" ORDER BY '
                          '"EventTime", "WatchID" ROWS UNBOUNDED PRECEDING))',
    # A running count per day over a small aggregate (the window is not the cost).
    "daily_running": 'SELECT "CounterID", "EventDate", c, sum(c) OVER (PARTITION BY '
                     '"CounterID" ORDER BY "EventDate") AS running FROM (SELECT "CounterID", '
                     '"EventDate", count(*) AS c FROM hits GROUP BY 1, 2) ORDER BY running '
                     'DESC, 1, 2 LIMIT 5',
}


def run(bench):
    root = clickbench.hits(bench.mode.name)
    glob = clickbench.hits_glob(root, "one")
    files = data.parquet_files(os.path.join(root, "one"))
    rows = clickbench.ROWS[bench.mode.name]
    intro = (f"{len(QUERIES)} queries of running aggregates over ClickBench's hits table "
             f"({rows:,} rows, one file, `{glob}`), each reduced to a few rows.")
    return suite.run(bench, NAME, TITLE, intro, {"hits": glob}, QUERIES, files,
                     "Running aggregates over hits", peak_memory=False)
