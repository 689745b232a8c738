"""Scenario `clickbench`: ClickBench's 43 queries over a hits-shaped table (benches/clickbench.py)
as one file of 23 row groups and as the same rows in 100 files, cold and hot, every engine,
answers checked against DuckDB (where a LIMIT may keep either of tied groups, the counts that
order them are checked). One file as fast as 100 is the seeds' headline.
"""
import os

from benches import clickbench, data, report, suite

NAME = "clickbench"
TITLE = "ClickBench: 43 queries over one file and over 100 files"


def run(bench):
    root = clickbench.hits(bench.mode.name)
    queries = clickbench.queries()
    rows = clickbench.ROWS[bench.mode.name]
    sections = []
    for layout, what in [
        ("one", f"one file of {clickbench.ONE_FILE_ROW_GROUPS} row groups"),
        ("many", f"{clickbench.FILES} files"),
    ]:
        glob = clickbench.hits_glob(root, layout)
        files = data.parquet_files(os.path.join(root, layout))
        size = sum(os.path.getsize(f) for f in files) / 1e6
        intro = (f"ClickBench's 43 queries (verbatim from its duckdb folder, each engine in "
                 f"the spelling ClickBench's folder for it uses: columns quoted for Quiver and "
                 f"DataFusion) over a hits table of {rows:,} rows with ClickBench's 105 "
                 f"columns, sorted as the original, {size:.0f} MB in {what} (`{glob}`).")
        sections.append(suite.run(bench, f"{NAME}_{layout}", f"{TITLE}: {what}", intro,
                                  {"hits": glob}, queries, files, f"ClickBench, {what}",
                                  keys=clickbench.KEYS))
    body = "\n".join(f"## {s.title}\n\n{s.body}" for s in sections)
    summary = [f"{s.name}: {line}" for s in sections for line in s.summary]
    return report.Section(NAME, TITLE, body, [c for s in sections for c in s.charts], summary)
