"""One query on every engine: checked against the reference, then timed cold and hot.

The reference engine (DuckDB) runs first. Each engine's first run is its cold
run (data files evicted from the page cache just before, in a fresh session); its result is
compared with the reference's (tests/tpch/compare.py: in order, or as multisets for ties, floats
within a relative 1e-6). Only then do times count: hot is the best of `reps` further runs.

An Outcome's status: "ok" (times count), "wrong" (result differs; times dropped), "error" (the
engine failed), "n/a" (the engine cannot express the query), "unchecked" (no reference result).
"""
from dataclasses import dataclass, field

from tpch.compare import difference

from benches.engines import EngineError


@dataclass
class NA:
    """Stands for a query an engine cannot express, with the reason."""
    reason: str


@dataclass
class Outcome:
    status: str
    cold: float = None
    hot: float = None
    note: str = ""
    stats: dict = field(default_factory=dict)
    hot_stats: dict = field(default_factory=dict)  # the best hot run's (Quiver: --profile)

    @property
    def ok(self):
        return self.status == "ok"

    def time(self, kind):
        """cold or hot seconds when they count, else None."""
        return getattr(self, kind) if self.ok else None


def compare(engines, setup, sql, *, reference, reps, evict=None, threads=None, keys=None):
    """{engine name: Outcome} for one query; `reference` names the engine whose result counts.

    setup: {engine name: [statements]}; sql: the query text, or {engine name: text or NA}.
    evict: a function that empties the page cache of the query's files (None: no cold run).
    keys: the columns (indexes) to check, when the rest of a row may rightly differ (which of
    several tied groups a LIMIT keeps); None checks every column.
    """
    outcomes, expected = {}, None
    for engine in sorted(engines, key=lambda e: e.name != reference):
        query = sql.get(engine.name, sql.get("*")) if isinstance(sql, dict) else sql
        if isinstance(query, NA):
            outcomes[engine.name] = Outcome("n/a", note=query.reason)
            continue
        is_reference = engine.name == reference
        if not is_reference and expected is None:
            outcomes[engine.name] = Outcome("unchecked", note="no reference result")
            continue
        outcome, rows = _measure(engine, setup[engine.name], query, expected, reps, evict, threads,
                                 keys)
        outcomes[engine.name] = outcome
        if is_reference:
            expected = rows
    return {e.name: outcomes[e.name] for e in engines}


def _measure(engine, setup, query, expected, reps, evict, threads, keys):
    if evict is not None:
        evict()
    try:
        first = engine.run(setup, query, threads)
    except EngineError as e:
        return Outcome("error", note=str(e)), None
    if expected is not None:
        problem = check(expected, first.rows, keys)
        if problem is not None:
            return Outcome("wrong", note=problem), first.rows
    try:
        best = min((engine.run(setup, query, threads) for _ in range(reps)),
                   key=lambda r: r.seconds)
    except EngineError as e:
        return Outcome("error", note=f"on a hot run: {e}"), first.rows
    cold = first.seconds if evict is not None else None
    return Outcome("ok", cold=cold, hot=best.seconds, stats=first.stats,
                   hot_stats=best.stats), first.rows


def check(expected, actual, keys=None):
    """None when the results agree (in the `keys` columns only, when given), else what
    differs (one line)."""
    if keys is not None:
        expected = [[row[k] for k in keys] for row in expected]
        actual = [[row[k] for k in keys if k < len(row)] for row in actual]
    problem = difference(expected, actual)
    return None if problem is None else " ".join(problem.split())[:300]
