"""Scenario 5: scaling with threads (1 and 2), hot, on a mix of TPC-H queries.

Every engine is limited to N threads its own way: quiver --threads, DuckDB's `threads`, chDB's
`max_threads`, DataFusion's target_partitions (its Tokio pool keeps one thread per core, but a
plan with one partition computes on one). The speedup is the 1-thread time over the N-thread
time, over the queries the engine got right at both counts.
"""
import os

from tpch.tables import TABLES, query_sql, table_glob

from benches import charts, data, report

NAME = "threads"
TITLE = "Scaling with threads"
THREADS = (1, 2)
QUERIES = [1, 3, 6, 9, 13, 18]  # scan-bound, join-bound, aggregation-bound


def run(bench):
    root = data.tpch(bench.mode.sf)
    setup = bench.views({t: table_glob(root, "single", t) for t in TABLES})
    results = {t: {f"q{n:02d}": bench.compare(f"{NAME} q{n:02d} threads={t}", setup,
                                              query_sql(n), [], cold=False, threads=t)
                   for n in QUERIES}
               for t in THREADS}

    low, high = THREADS[0], THREADS[-1]
    queries = list(results[low])
    pairs = {e.name: {q: (results[low][q][e.name], results[high][q][e.name]) for q in queries}
             for e in bench.engines}
    speedup = {name: {q: a.hot / b.hot if a.ok and b.ok else None for q, (a, b) in by_query.items()}
               for name, by_query in pairs.items()}

    def scaled(a, b):
        return f"{report.seconds(a)} → {report.seconds(b)} ({report.times(a / b)})"

    def cell(name, q):
        a, b = pairs[name][q]
        return scaled(a.hot, b.hot) if speedup[name][q] else (b.status if a.ok else a.status)

    totals = {}
    for e in bench.engines:
        counted = [pairs[e.name][q] for q in queries if speedup[e.name][q]]
        totals[e.name] = ((sum(a.hot for a, _ in counted), sum(b.hot for _, b in counted))
                          if counted else None)
    rows = [[q] + [cell(e.name, q) for e in bench.engines] for q in queries]
    rows.append(["**total**"] + [scaled(*totals[e.name]) if totals[e.name] else "-"
                                 for e in bench.engines])
    body = (f"TPC-H SF {bench.mode.sf}, layout single, hot (best of {bench.mode.reps} run(s) "
            f"after a checked warm-up). Cells: seconds at {low} → {high} threads (speedup); "
            f"totals over the queries the engine got right at both.\n\n"
            + report.table(["query"] + [e.label for e in bench.engines], rows)
            + "\n### Notes\n\n"
            + report.grouped_notes({f"{t} thread(s), ": results[t] for t in THREADS},
                                   bench.engines))

    chart = f"{NAME}.png"
    panels = [(f"speedup from {low} to {high} threads (hot; {high} = ideal)",
               {e.label: (e.name, [speedup[e.name][q] for q in queries]) for e in bench.engines})]
    charts.grouped_bars(os.path.join(bench.results, chart),
                        f"Threads {low} → {high}, TPC-H SF {bench.mode.sf}", queries, panels,
                        "speedup", reference_line=float(high))
    summary = [f"{e.label}: speedup {low} → {high} threads "
               f"{report.times(totals[e.name][0] / totals[e.name][1])} (total over "
               f"{sum(1 for v in speedup[e.name].values() if v)} queries)"
               for e in bench.engines if totals[e.name]]
    return report.Section(NAME, f"{TITLE} ({low} and {high}), TPC-H SF {bench.mode.sf}", body,
                          [chart], summary)
