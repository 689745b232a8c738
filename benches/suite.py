"""A query suite on every engine over one set of tables: each query checked against DuckDB,
timed cold and hot as a whole process, Quiver's statement alone beside it, and each engine's
peak memory per query. TPC-H (both writers' files), TPC-DS and ClickBench are suites.
"""
from benches import charts, memory, report
from benches.engines import EngineError

KINDS = ("cold", "hot")


def run(bench, name, title, intro, tables, queries, files, chart_title, *, peak_memory=True,
        keys=None):
    """A report Section for `queries` ({label: SQL, or {engine: SQL or NA}}) over `tables`
    ({view name: path or glob}); `files` are evicted before each cold run. `keys`: {label:
    the columns checked} for queries whose other columns may rightly differ (measure.py)."""
    setup = bench.views(tables)
    results = {}
    for label, sql in queries.items():
        key = (keys or {}).get(label)
        results[label] = bench.compare(f"{name} {label}", setup, sql, files, keys=key)
    engines, base, peers = bench.engines, bench.base, bench.peers
    body = (intro + "\n"
            + report.timing_sections(results, bench, KINDS)
            + f"\n### {base.label} / peer per query (below 1x: {base.label} is faster)\n\n"
            + report.per_query_ratio_table(results, base, peers, KINDS)
            + statement_section(results, base, peers, len(tables))
            + (memory_section(bench, setup, queries) if peak_memory else "")
            + "\n### Notes\n\n" + report.notes(results, engines))
    chart = f"{name}.png"
    charts.time_chart(f"{bench.results}/{chart}", chart_title, results, engines)
    summary = report.ratio_lines(results, base, peers, KINDS)
    return report.Section(name, title, body, [chart], summary)


def statement_section(results, base, peers, views):
    """Quiver's hot run split: the statement (its --profile `time plan` + `time execute`)
    and the rest of the process (start, the views, the answer written as Arrow to a pipe), which the in-process peers do not pay in the same way."""
    if base.name != "quiver":
        return ""
    datafusion = next((p for p in peers if p.name == "datafusion"), None)
    rows, ratios = [], []
    for q, outcomes in results.items():
        o = outcomes[base.name]
        stats = o.hot_stats if o.ok else {}
        try:
            statement = sum(float(stats[k].removesuffix(" ms")) for k in
                            ("time plan", "time execute")) / 1e3
        except (KeyError, ValueError):
            continue
        peer = outcomes[datafusion.name].time("hot") if datafusion else None
        if peer:
            ratios.append(statement / peer)
        rows.append([q, report.seconds(o.hot), report.seconds(statement),
                     f"{(o.hot - statement) * 1e3:.0f}",
                     f"{statement / peer:.2f}x" if peer else "-"])
    if not rows:
        return ""
    geomean = f"; geomean of statement / DataFusion {report.geomean(ratios):.2f}x" if ratios else ""
    return ("\n### Quiver's hot run: the statement and the rest of the process\n\n"
            f"The whole process (as timed above), its last statement's own time (`time plan` + "
            f"`time execute` from `--profile`), and the rest in ms: process start, the {views} "
            f"views (each lists its paths; the views the query names are planned, their "
            f"footers read, in its `time plan`), the answer written as Arrow IPC to the "
            f"harness. The peers run in the harness's process; their times include their "
            f"session and views, not a process start{geomean}.\n\n"
            + report.table(["query", "process s", "statement s", "rest ms",
                            "statement / DataFusion"], rows))


def memory_section(bench, setup, queries):
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
    for label, sql in queries.items():
        row = [label]
        for e in bench.engines:
            query = sql.get(e.name, sql.get("*")) if isinstance(sql, dict) else sql
            if not isinstance(query, str):
                row.append("n/a")
                continue
            try:
                row.append(f"{memory.peak_mb(e, setup[e.name], query):.0f}")
            except EngineError:
                row.append("error")
        rows.append(row)
    rows.append(["`SELECT 1`"] + [floors[e.name] for e in bench.engines])
    return ("\n### Peak memory: max RSS per query, MB\n\n"
            "A fresh process per engine and query (`/usr/bin/time -f %M`); the Python engines' "
            "numbers include the interpreter and library, whose floor is the last row.\n\n"
            + report.table(["query"] + [e.label for e in bench.engines], rows))
