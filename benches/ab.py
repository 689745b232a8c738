#!/usr/bin/env python3
"""Two quiver builds (or settings) on one suite's queries, interleaved: is B faster than A?

usage: benches/ab SUITE A B [--passes N] [--queries q01,q05] [--a-args ARGS] [--b-args ARGS]
                  [--datafusion]
  SUITE   tpch, tpchgen, tpcds, clickbench (one file) or clickbench_many (100 files), SF 1
  A, B    quiver binaries (the same one twice to compare settings through --a-args/--b-args,
          e.g. --b-args '--set datafusion.optimizer.prefer_hash_join=false')

For each query, A and B run in turn (A B, then B A, ...) as fresh processes (`quiver query`, the
suite's views, then the query, as benches/run times them), `passes` times each (default 4), so a
machine whose speed drifts slows both alike: on the Firecracker VMs here identical runs differ
by a third from minute to minute, and a bench of A followed by a bench of B measures that drift.
Each binary runs from a fresh copy out of the page cache (as benches/run does; a copy whose code
sits cached in large folios starts milliseconds faster and maps megabytes more).

Prints per query: the best wall time of each and B/A; the median system time, minor page faults
and peak RSS of each (from /usr/bin/time, so exact counts, not samples: faults and memory tell a
change's effect where times drift). Then the geomean of B/A and the totals. Answers are not
checked here (benches/run checks them against DuckDB).

--datafusion adds DataFusion-python's time, as benches/run takes it (one warm session in this
process, the best of `passes` runs after one more, each run beside a pass of A and B) and B over
it, and lists the queries where B is slower by issue 33's rule: a query whose process takes 0.1 s
or more as a whole process, a shorter one as a statement in a warm session (B's fourth run of it
in one `quiver query` process, its `time plan` + `time execute`; marked `w`).
"""
import argparse
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[0] = REPO
sys.path.insert(1, os.path.join(REPO, "tests"))

from benches import clickbench, data, tpcds  # noqa: E402
from benches import engines  # noqa: E402
from benches.engines import DataFusion, DataFusionDriver  # noqa: E402
from benches.memory import TIME  # noqa: E402
from benches.scenarios import tpch as tpch_scenario, tpchgen as tpchgen_scenario  # noqa: E402
from benches.harness import installed  # noqa: E402
from tpch.tables import QUERIES, query_sql  # noqa: E402

SUITES = ("tpch", "tpchgen", "tpcds", "clickbench", "clickbench_many")


def suite(name):
    """({view: path or glob}, {label: SQL, or {engine: SQL}}) of a suite at scale factor 1."""
    tpch_queries = {f"q{n:02d}": query_sql(n) for n in QUERIES}
    if name == "tpch":
        return tpch_scenario.tables_in(data.tpch("1")), tpch_queries
    if name == "tpchgen":
        return tpchgen_scenario.tables_in(data.tpchgen("1")), tpch_queries
    if name == "tpcds":
        tables = tpcds.table_paths(data.tpcds("1"))
        return tables, {f"q{n:02d}": text for n, text in tpcds.queries().items()}
    layout = "one" if name == "clickbench" else "many"
    return {"hits": clickbench.hits_glob(clickbench.hits("default"), layout)}, clickbench.queries()


def spelling(sql, engine):
    """The query as `engine` takes it (ClickBench's differ: benches/clickbench.py)."""
    return sql[engine] if isinstance(sql, dict) else sql


class DataFusionPeer:
    """DataFusion-python in one warm session in this process, as benches/run times it; each
    query runs once to warm up, then once per pass beside A and B, so that the machine's drift
    from minute to minute meets all three alike."""

    def __init__(self, tables):
        self.session = DataFusionDriver().open(None)
        engine = DataFusion(timeout=None)
        for name, glob in tables.items():
            for statement in engine.view(name, glob):
                self.session.execute(statement)

    def warm_up(self, sql):
        self.session.arrow(spelling(sql, "datafusion"))

    def seconds(self, sql):
        start = time.perf_counter()
        self.session.arrow(spelling(sql, "datafusion"))
        return time.perf_counter() - start


def run(command, script):
    """(wall s, system s, minor faults, peak RSS MB) of one process reading `script`.

    The counts come from /usr/bin/time, the process's parent: a process forked from this
    one (Python, and DataFusion with --datafusion) would report this one's memory as its own
    peak (the kernel keeps the larger of the two across exec)."""
    with tempfile.NamedTemporaryFile("r") as counts, tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.run([TIME, "-f", "%S %R %M", "-o", counts.name] + command,
                              input=script.encode(), stdout=subprocess.DEVNULL, stderr=errors,
                              env={**os.environ, "QUIVER_DISK_CACHE_BYTES": "0"})
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip().splitlines()[-3:]
            raise SystemExit(f"ab: {shlex.join(command)} failed (exit {proc.returncode}): "
                             + " / ".join(tail))
        system, faults, rss_kb = counts.read().split()[-3:]
    return wall, float(system), int(faults), int(rss_kb) / 1024


def main(argv):
    usage = "\n".join(__doc__.split("\n")[2:4])[len("usage: "):]
    parser = argparse.ArgumentParser(prog="benches/ab", usage=usage,
                                     description=__doc__.split("\n")[0],
                                     epilog="\n".join(__doc__.split("\n")[7:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", choices=SUITES, metavar="SUITE", help=", ".join(SUITES))
    parser.add_argument("a", metavar="A", help="the baseline quiver binary")
    parser.add_argument("b", metavar="B", help="the candidate quiver binary")
    parser.add_argument("--passes", type=int, default=4,
                        help="runs of each (default 4; even, so each runs first as often)")
    parser.add_argument("--queries", help="labels, comma-separated (default: all)")
    parser.add_argument("--a-args", default="", help="extra arguments for A's `quiver query`")
    parser.add_argument("--b-args", default="", help="extra arguments for B's `quiver query`")
    parser.add_argument("--datafusion", action="store_true",
                        help="add DataFusion-python's warm time and B over it")
    args = parser.parse_args(argv)
    for binary in (args.a, args.b):
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            parser.error(f"{binary} is not an executable file")
    if not os.access(TIME, os.X_OK):
        parser.error(f"{TIME} is missing (apt-get install time): it counts each run")
    tables, queries = suite(args.suite)
    if args.queries:
        wanted = args.queries.split(",")
        unknown = [q for q in wanted if q not in queries]
        if unknown:
            parser.error(f"no such queries in {args.suite}: {', '.join(unknown)}")
        queries = {q: queries[q] for q in wanted}
    quiver = engines.Quiver(args.a, timeout=None)  # the views as benches/run makes them
    setup = [statement for name, glob in tables.items() for statement in quiver.view(name, glob)]
    views = "".join(f"{statement};\n" for statement in setup)
    commands = {side: [installed(os.path.abspath(binary), "ab", side), "query"]
                + shlex.split(extra) + ["-"]
                for side, binary, extra in (("A", args.a, args.a_args),
                                            ("B", args.b, args.b_args))}
    print(f"{args.suite}: {len(queries)} queries, {args.passes} passes, load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  A: {shlex.join(commands['A'])}\n  B: {shlex.join(commands['B'])}")
    peer = DataFusionPeer(tables) if args.datafusion else None
    # B with its flags, for the warm statement a short query is judged by.
    warm_b = engines.Quiver(commands["B"][0], timeout=None, args=shlex.split(args.b_args))
    print(f"{'query':6} {'A s':>7} {'B s':>7} {'B/A':>5}   {'sys A':>5} {'sys B':>5}   "
          f"{'faults A':>8} {'faults B':>8}   {'RSS A':>6} {'RSS B':>6}"
          + (f"   {'DF s':>7} {'B/DF':>5}" if peer else ""))
    ratios, over_peer = [], []
    totals = {"A": [0.0, 0.0, 0, 0.0], "B": [0.0, 0.0, 0, 0.0]}
    for label, sql in queries.items():
        runs = {"A": [], "B": []}
        peer_seconds = []
        if peer:
            peer.warm_up(sql)
        for turn in range(args.passes):
            # A then B, then B then A: whichever runs second meets the pages and caches the
            # first left (identical builds, always in one order: 0.98x).
            for side in ("A", "B") if turn % 2 == 0 else ("B", "A"):
                runs[side].append(run(commands[side], views + spelling(sql, "quiver")))
            if peer:
                peer_seconds.append(peer.seconds(sql))
        row = {}
        for side, samples in runs.items():
            row[side] = (min(s[0] for s in samples),
                         *(statistics.median(s[i] for s in samples) for i in (1, 2, 3)))
            totals[side] = [t + v for t, v in zip(totals[side], row[side])]
        ratio = row["B"][0] / row["A"][0]
        ratios.append(ratio)
        a, b = row["A"], row["B"]
        peer_column = ""
        if peer:
            best_peer = min(peer_seconds)
            # The rule: a process of 0.1 s or more is judged whole, a shorter query
            # as a statement in B's warm session.
            judged, how = b[0], "process"
            if judged < 0.1:
                judged = warm_b.warm_statement_seconds(setup, spelling(sql, "quiver"))
                how = "warm"
            over_peer.append((label, how, judged / best_peer))
            mark = "w" if how == "warm" else ""
            peer_column = f"   {best_peer:7.3f} {judged / best_peer:5.2f}{mark}"
        print(f"{label:6} {a[0]:7.3f} {b[0]:7.3f} {ratio:5.2f}   {a[1]:5.2f} {b[1]:5.2f}   "
              f"{a[2] / 1e3:7.1f}k {b[2] / 1e3:7.1f}k   {a[3]:5.0f}M {b[3]:5.0f}M"
              + peer_column, flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    a, b = totals["A"], totals["B"]
    print(f"geomean B/A {geomean:.3f} over {len(ratios)} queries; totals: best wall "
          f"{a[0]:.2f} / {b[0]:.2f} s, system {a[1]:.2f} / {b[1]:.2f} s, faults "
          f"{a[2] / 1e3:.0f}k / {b[2] / 1e3:.0f}k, peak RSS summed {a[3]:.0f} / {b[3]:.0f} MB; "
          f"load average {os.getloadavg()[0]:.2f}")
    if peer:
        over = [f"{label} {ratio:.2f}x ({how})" for label, how, ratio in over_peer if ratio > 1]
        geomean_peer = math.exp(sum(math.log(r) for _, _, r in over_peer) / len(over_peer))
        print(f"B/DataFusion geomean {geomean_peer:.3f} (w: a warm statement, the process "
              f"being under 0.1 s); B slower than DataFusion: {', '.join(over) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
