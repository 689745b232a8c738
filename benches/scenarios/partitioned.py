"""Scenario 2: one file against the same data as 16 files, on every engine.

TPC-H lineitem as one file (single/lineitem.parquet) and cut into 16 files (data.split16);
lineitem-only queries Q1 and Q6, cold and hot. The number that matters is each engine's
single/partitioned ratio: above 1x, the engine is slower on one big file than on 16 pieces of it
(it does not split one file across its threads as well as it spreads files).

The Lambda fan-out is measured by scenario `lambda` (benches/scenarios/lambda.py: 1, 2, 4
and 8 workers under cargo-lambda's emulator), which supersedes the 8-emulated-workers variant
of this scenario once planned here.
"""
import os

from tpch.tables import query_sql

from benches import charts, data, report

NAME = "partitioned"
TITLE = "One file against the same data as 16 files"
QUERIES = [1, 6]
KINDS = ("cold", "hot")
SINGLE, SPLIT = "1 file", f"{data.SPLIT_FILES} files"


def run(bench):
    single = os.path.join(data.tpch(bench.mode.sf), "single", "lineitem.parquet")
    split = os.path.join(data.split16(bench.mode.sf), "lineitem")
    layouts = {SINGLE: (single, [single]),
               SPLIT: (os.path.join(split, "*.parquet"), data.parquet_files(split))}
    results = {layout: {} for layout in layouts}
    for n in QUERIES:
        for layout, (glob, files) in layouts.items():
            setup = bench.views({"lineitem": glob})
            results[layout][f"q{n:02d}"] = bench.compare(
                f"{NAME} q{n:02d} {layout}", setup, query_sql(n), files)

    header = ["query", "engine"]
    for kind in KINDS:
        header += [f"{SINGLE} {kind}", f"{SPLIT} {kind}", f"single/partitioned {kind}"]
    rows, ratios = [], {}
    for q in results[SINGLE]:
        for e in bench.engines:
            one, many = results[SINGLE][q][e.name], results[SPLIT][q][e.name]
            row = [q, e.label]
            for kind in KINDS:
                a, b = one.time(kind), many.time(kind)
                r = a / b if a and b else None
                ratios.setdefault((e.name, kind), []).append(r)
                row += [report.cell(one, kind), report.cell(many, kind), report.times(r)]
            rows.append(row)
    body = (f"TPC-H lineitem at scale factor {bench.mode.sf}: `{single}` against "
            f"`{split}/` ({data.SPLIT_FILES} files of equal row count, row groups of at most "
            f"{data.ROW_GROUP:,} rows in both). Seconds; hot is the best of {bench.mode.reps} "
            f"run(s). single/partitioned above 1x: the engine is slower on the one file.\n\n"
            + report.table(header, rows)
            + "\n### Notes\n\n"
            + report.grouped_notes({f"{layout}, ": results[layout] for layout in layouts},
                                   bench.engines))

    chart = f"{NAME}.png"
    queries = list(results[SINGLE])
    panels = [(f"{kind}: single-file time / 16-file time (1 = no difference)",
               {e.label: (e.name, ratios[(e.name, kind)]) for e in bench.engines})
              for kind in ("hot", "cold")]
    charts.grouped_bars(os.path.join(bench.results, chart),
                        f"One file vs {data.SPLIT_FILES} files, TPC-H SF {bench.mode.sf} lineitem",
                        queries, panels, "ratio", reference_line=1.0)
    summary = []
    for e in bench.engines:
        parts = [f"{kind} {report.times(report.geomean([r for r in ratios[(e.name, kind)] if r]))}"
                 for kind in KINDS]
        summary.append(f"{e.label} single/partitioned: {', '.join(parts)} "
                       f"(geomean over {', '.join(queries)})")
    return report.Section(NAME, f"{TITLE} (TPC-H SF {bench.mode.sf} lineitem)", body, [chart],
                          summary)
