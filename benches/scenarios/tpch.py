"""Scenario 1: TPC-H, 22 queries over one Parquet file per table, cold and hot, every engine.

Time per query per engine, Quiver's ratio against each peer per query and overall (total and
geometric mean), and each engine's peak memory per query (a fresh process each, see
benches/memory.py). Queries and file paths come from tests/tpch; the data from
scripts/gen_tpch.py (layout single).
"""
import os

from tpch.tables import QUERIES, TABLES, query_sql, table_glob

from benches import charts, data, memory, report
from benches.engines import EngineError

NAME = "tpch"
TITLE = "TPC-H: 22 queries, cold and hot"
KINDS = ("cold", "hot")


def run(bench):
    root = data.tpch(bench.mode.sf)
    files = data.parquet_files(os.path.join(root, "single"))
    setup = bench.views({t: table_glob(root, "single", t) for t in TABLES})
    results = {}
    for n in QUERIES:
        results[f"q{n:02d}"] = bench.compare(f"{NAME} q{n:02d}", setup, query_sql(n), files)

    engines, base, peers = bench.engines, bench.base, bench.peers
    size = sum(os.path.getsize(f) for f in files) / 1e6
    body = (f"TPC-H at scale factor {bench.mode.sf}: {len(files)} files (one per table), "
            f"{size:.0f} MB of Parquet in `{root}/single`. Every run is a fresh session that "
            f"creates the 8 views and runs one query.\n\n"
            f"### Hot: best of {bench.mode.reps} run(s), seconds\n\n"
            + report.time_table(results, engines, "hot")
            + "\n### Cold: first run, data files out of the page cache, seconds\n\n"
            + report.time_table(results, engines, "cold")
            + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
            + report.ratio_table(results, base, peers, KINDS)
            + f"\n### {base.label} / peer per query (below 1x: {base.label} is faster)\n\n"
            + report.per_query_ratio_table(results, base, peers, KINDS)
            + statement_section(results, base, peers)
            + memory_section(bench, setup)
            + "\n### Notes\n\n" + report.notes(results, engines))

    chart = f"{NAME}.png"
    charts.time_chart(os.path.join(bench.results, chart), f"TPC-H SF {bench.mode.sf}", results,
                      engines)
    summary = report.ratio_lines(results, base, peers, KINDS)
    return report.Section(NAME, f"TPC-H SF {bench.mode.sf}: 22 queries, cold and hot", body,
                          [chart], summary)


def statement_section(results, base, peers):
    """Quiver's hot run split: the statement (its --profile `time plan` + `time execute`)
    and the rest of the process (start, the 8 views and their footers, the answer written
    as Arrow to a pipe), which the in-process peers do not pay in the same way."""
    if base.name != "quiver":
        return ""
    datafusion = next((p for p in peers if p.name == "datafusion"), None)
    rows = []
    for q, outcomes in results.items():
        o = outcomes[base.name]
        stats = o.hot_stats if o.ok else {}
        try:
            statement = sum(float(stats[k].removesuffix(" ms")) for k in
                            ("time plan", "time execute")) / 1e3
        except (KeyError, ValueError):
            continue
        peer = outcomes[datafusion.name].time("hot") if datafusion else None
        rows.append([q, report.seconds(o.hot), report.seconds(statement),
                     f"{(o.hot - statement) * 1e3:.0f}",
                     f"{statement / peer:.2f}x" if peer else "-"])
    if not rows:
        return ""
    return ("\n### Quiver's hot run: the statement and the rest of the process\n\n"
            "The whole process (as timed above), its last statement's own time (`time plan` + "
            "`time execute` from `--profile`), and the rest in ms: process start, the 8 views "
            "(each reads its file's footer), the answer written as Arrow IPC to the harness. "
            "The peers run in the harness's process; their times include their session and "
            "views, not a process start.\n\n"
            + report.table(["query", "process s", "statement s", "rest ms",
                            "statement / DataFusion"], rows))


def memory_section(bench, setup):
    """Peak RSS per query and engine, each in a fresh process, after the timed runs."""
    missing = memory.available()
    if missing:
        return f"\n### Peak memory\n\nNot measured: {missing}.\n"
    print("  peak memory per query (a fresh process each)", flush=True)
    floors, rows = {}, []
    for e in bench.engines:
        try:
            floors[e.name] = f"{memory.baseline(e):.0f}"
        except EngineError as error:
            floors[e.name] = f"error ({error})"
    for n in QUERIES:
        row = [f"q{n:02d}"]
        for e in bench.engines:
            try:
                row.append(f"{memory.peak_mb(e, setup[e.name], query_sql(n)):.0f}")
            except EngineError:
                row.append("error")
        rows.append(row)
    rows.append(["`SELECT 1`"] + [floors[e.name] for e in bench.engines])
    return ("\n### Peak memory: max RSS per query, MB\n\n"
            "A fresh process per engine and query (`/usr/bin/time -f %M`); the Python engines' "
            "numbers include the interpreter and library, whose floor is the last row.\n\n"
            + report.table(["query"] + [e.label for e in bench.engines], rows))
