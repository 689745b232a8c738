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
            + statement_section(results, base, peers, setup, queries)
            + (memory_section(bench, setup, queries) if peak_memory else "")
            + "\n### Notes\n\n" + report.notes(results, engines))
    chart = f"{name}.png"
    charts.time_chart(f"{bench.results}/{chart}", chart_title, results, engines)
    summary = report.ratio_lines(results, base, peers, KINDS)
    return report.Section(name, title, body, [chart], summary)


def statement_section(results, base, peers, setup, queries):
    """Quiver's hot run split: the statement (its --profile `time plan` + `time execute`)
    and the rest of the process (start, the views, the answer written as Arrow to a pipe), which
    the in-process peers do not pay in the same way; and the statement in a warm session (the
    best of the query's runs 2-4 in one process), as the peers' hot times are (best of 3 in
    one session)."""
    if base.name != "quiver":
        return ""
    datafusion = next((p for p in peers if p.name == "datafusion"), None)
    print("  Quiver's statement in a warm session (a process running each query 4 times)",
          flush=True)
    rows, firsts, warms = [], [], []
    for q, outcomes in results.items():
        o = outcomes[base.name]
        first = _statement_seconds(o.hot_stats if o.ok else {})
        if first is None:
            continue
        warm = _warm_statement(base, setup[base.name], _spelling(queries[q], base))
        peer = outcomes[datafusion.name].time("hot") if datafusion else None
        ratio = (lambda t: f"{t / peer:.2f}x" if peer and t else "-")
        if peer:
            firsts.append(first / peer)
            if warm:
                warms.append(warm / peer)
        rows.append([q, report.seconds(o.hot), report.seconds(first),
                     f"{(o.hot - first) * 1e3:.0f}", ratio(first),
                     report.seconds(warm) if warm else "error", ratio(warm)])
    if not rows:
        return ""
    geomeans = ""
    if firsts and warms:
        geomeans = (f"; geomeans against DataFusion: first statement "
                    f"{report.geomean(firsts):.2f}x, warm statement {report.geomean(warms):.2f}x "
                    f"({sum(r > 1 for r in warms)} of {len(warms)} queries over 1x warm)")
    return ("\n### Quiver's hot run: the statement and the rest of the process\n\n"
            f"The whole process (as timed above); its one statement's own time (`time plan` + "
            f"`time execute` from `--profile`: the views the query names planned, their "
            f"footers read and parsed, memory first touched); the rest in ms (process start, "
            f"the {len(setup[base.name])} views listed, the answer written as Arrow IPC to "
            f"the harness); and the statement in a warm session: one `quiver` shell process runs "
            f"the query 4 times under `.timer on`, the best of runs 2-4 counts (ms "
            f"resolution), as the peers' hot times are their best of 3 in one session, "
            f"footers and listings kept{geomeans}.\n\n"
            + report.table(["query", "process s", "first statement s", "rest ms",
                            "first / DataFusion", "warm statement s", "warm / DataFusion"],
                           rows))


def _statement_seconds(stats):
    try:
        return sum(float(stats[k].removesuffix(" ms")) for k in
                   ("time plan", "time execute")) / 1e3
    except (KeyError, ValueError):
        return None


def _spelling(sql, engine):
    """The query as `engine` writes it (a suite's query is its text, or {engine: text})."""
    return sql.get(engine.name, sql.get("*")) if isinstance(sql, dict) else sql


def _warm_statement(engine, setup, sql):
    return engine.warm_seconds(setup, sql) if isinstance(sql, str) else None


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
            query = _spelling(sql, e)
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
