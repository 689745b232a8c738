"""Scenario 9: stalled connections. TPC-H Q1 and Q6 over the single lineitem file on MinIO,
behind the counting proxy of scenario 3 (--s3-latency ms before each request, --s3-bandwidth
per connection), first without faults, then with a share of GETs stalled: the proxy sends
half of the first chunk of the answer, then nothing for STALL_SECONDS, then closes the
connection (tests/servers/s3_proxy.py, fault `stall`). That is what issue 16 measured: Q6
took 45.8 s instead of 0.4 s when 5% of connections stalled.

Each run is a fresh session (a new `quiver` process; a new connection for the others), so
nothing is cached and the first reads are exposed too. Quiver runs as is (late reads hedged)
and with `quiver.hedge_multiple=0` (hedging off), beside the peers that reach S3 here.
The stalls are drawn from a seeded generator reset before each run, so every engine meets
the same sequence of stalled GETs (by order; engines order their GETs differently).
The main number: each engine's stalled/fault-free time ratio.
"""
import os
import time

from tpch.tables import query_sql

from benches import data, measure, objectstore, report
from benches.engines import EngineError, Quiver
from benches.scenarios import s3 as s3_scenario

NAME = "stalls"
TITLE = "Stalled connections: fault-free against a share of GETs stalled"
QUERIES = {"q01": 1, "q06": 6}
STALL_SHARE = 0.05
STALL_SECONDS = 15
NO_HEDGE, NO_HEDGE_LABEL = "quiver-nohedge", "Quiver, hedging off"


def run(bench):
    options = bench.options
    sf = bench.mode.sf
    lineitem = os.path.join(data.tpch(sf), "single", "lineitem.parquet")
    key = f"tpch-sf{sf}/single/lineitem.parquet"
    try:
        objects = {key: lineitem}
        with objectstore.bucket_behind_proxy(options, objects, NAME) as (_, proxy, endpoint):
            engines, unsupported = _engines(bench, endpoint)
            rows = _measure_all(bench, engines, unsupported, key, lineitem, endpoint,
                                proxy.counter)
    except objectstore.ServerError as e:
        print(f"  {NAME}: not run: {e}", flush=True)
        return report.Section(NAME, TITLE, f"Not run: {e}\n", [], [f"not run: {e}"])

    body = (f"TPC-H SF {sf} lineitem (`single` layout) in MinIO behind the proxy: "
            f"{options.s3_latency:.0f} ms before each request, "
            f"{options.s3_bandwidth:g} MB/s per connection. Stalled: each GET with chance "
            f"{STALL_SHARE:.0%} sends half a chunk, then nothing for {STALL_SECONDS} s, then its "
            f"connection is closed. One fresh session per cell; answers checked against DuckDB "
            f"on the local file. GETs are the proxy's count; \"hedged\" is Quiver's own "
            f"(`--profile`).\n\n" + report.table(
                ["query", "engine", "fault-free s", "stalled s", "stalled / fault-free",
                 "GETs fault-free", "GETs stalled", "stalls met", "hedged"], rows))
    summary = [f"{r[0]} {r[1]}: {r[2]} s fault-free, {r[3]} s stalled ({r[4]}), "
               f"{r[7]} stalls met, {r[8]} hedged" for r in rows]
    return report.Section(NAME, TITLE, body, [], summary)


def _engines(bench, endpoint):
    engines, unsupported = s3_scenario._engines(bench, endpoint)
    engines = [e for e in engines if e.name != s3_scenario.NOCOALESCE]
    for e in list(engines):
        if e.name == "quiver":
            engines.insert(engines.index(e) + 1, Quiver(
                e.binary, e.timeout, e.executor, e.args + ["--set", "quiver.hedge_multiple=0"],
                e.env, NO_HEDGE, NO_HEDGE_LABEL))
    return engines, unsupported


def _measure_all(bench, engines, unsupported, key, lineitem, endpoint, counter):
    reference = next(e for e in bench.engines if e.name == "duckdb")
    rows = []
    for label, n in QUERIES.items():
        sql = query_sql(n)
        expected = reference.run(reference.view("lineitem", lineitem), sql).rows
        for e in engines:
            if e.name in unsupported:
                rows.append([label, e.label, "n/a", "n/a", unsupported[e.name], "", "", "", ""])
                continue
            setup = e.s3_view("lineitem", key, endpoint)
            clean = _run(e, setup, sql, expected, counter, stalled=False)
            stalled = _run(e, setup, sql, expected, counter, stalled=True)
            row = [label, e.label, *_cells(clean, stalled)]
            print(f"  {NAME} {label} {e.name}: {row[2:]}", flush=True)
            rows.append(row)
    return rows


def _run(engine, setup, sql, expected, counter, stalled):
    """(seconds, GETs, stalls met, hedged) of one checked run, or the error's text."""
    counter.reset()  # clears faults and reseeds the proxy's generator
    if stalled:
        counter.stall(STALL_SHARE, STALL_SECONDS)
    try:
        # Without the counter: the engines reset it before a run, which would clear the fault.
        result = engine.session_runs(setup, sql, count=1)[0]
    except EngineError as e:
        return f"error: {e}"
    wrong = measure.check(expected, result.rows)
    if wrong is not None:
        return f"wrong: {wrong}"
    counts = counter.read()["counts"]
    stalls = counter.stalls_met() if stalled else 0
    hedged = _hedged(result.stats) if isinstance(engine, Quiver) else ""
    # A stalled GET the engine gave up on is still asleep in the proxy, which logs it when it
    # wakes: wait for that, so that it is not counted in the next run.
    deadline = time.time() + STALL_SECONDS + 5
    while stalls and counter.stalled_closed() < stalls and time.time() < deadline:
        time.sleep(0.5)
    return result.seconds, counts.get("GetObject", 0), stalls, hedged


def _hedged(stats):
    """`N hedged` from --profile's requests line."""
    requests = stats.get("requests", "")
    for part in requests.replace("(", ",").replace(")", ",").split(","):
        if part.strip().endswith(" hedged"):
            return int(part.split()[0])
    return ""


def _cells(clean, stalled):
    if isinstance(clean, str) or isinstance(stalled, str):
        problem = clean if isinstance(clean, str) else stalled
        return ["", "", problem, "", "", "", ""]
    return [report.seconds(clean[0]), report.seconds(stalled[0]),
            f"{stalled[0] / clean[0]:.1f}x", clean[1], stalled[1], stalled[2], stalled[3]]
