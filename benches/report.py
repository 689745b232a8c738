"""Markdown for the results: time tables, ratios against peers, notes, and the machine.

A ratio is Quiver's time divided by the peer's, over the queries both got right: below 1x
Quiver is faster. "total" divides the sums of times; "geomean" is the geometric mean of the
per-query ratios (every query weighs the same, however long it runs).
"""
import math
import os
import platform
from dataclasses import dataclass, field

STATUS_CELL = {"wrong": "wrong", "error": "error", "n/a": "n/a", "unchecked": "unchecked"}


@dataclass
class Section:
    """What a scenario hands back: markdown body, charts (file names), summary lines."""
    name: str
    title: str
    body: str
    charts: list = field(default_factory=list)
    summary: list = field(default_factory=list)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def seconds(value):
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def times(value):
    return "-" if value is None else f"{value:.2f}x"


def cell(outcome, kind):
    if outcome.ok:
        return seconds(getattr(outcome, kind))
    return STATUS_CELL[outcome.status]


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def time_table(results, engines, kind):
    """Queries down, engines across, seconds in the cells; a last row sums each column."""
    header = ["query"] + [e.label for e in engines]
    rows = [[q] + [cell(outcomes[e.name], kind) for e in engines]
            for q, outcomes in results.items()]
    totals = []
    for e in engines:
        values = [o[e.name].time(kind) for o in results.values() if o[e.name].ok]
        missing = len(results) - len(values)
        total = seconds(sum(values)) if values else "-"
        totals.append(total + (f" ({missing} missing)" if missing and values else ""))
    rows.append(["**total**"] + totals)
    return table(header, rows)


def ratio(results, base, peer, kind):
    """(total ratio, geomean ratio, queries compared) of base over peer."""
    pairs = [(o[base].time(kind), o[peer].time(kind)) for o in results.values()
             if o[base].ok and o[peer].ok and o[base].time(kind) and o[peer].time(kind)]
    if not pairs:
        return None, None, 0
    total = sum(b for b, _ in pairs) / sum(p for _, p in pairs)
    return total, geomean([b / p for b, p in pairs]), len(pairs)


def ratio_table(results, base, peers, kinds):
    """One row per peer: base/peer, total and geomean, for each kind (cold, hot)."""
    header = ["ratio", "queries"]
    for kind in kinds:
        header += [f"total {kind}", f"geomean {kind}"]
    rows = []
    for peer in peers:
        row = [f"{base.label} / {peer.label}", None]
        for kind in kinds:
            total, gm, n = ratio(results, base.name, peer.name, kind)
            row[1] = n if row[1] is None else min(row[1], n)
            row += [times(total), times(gm)]
        rows.append(row)
    return table(header, rows)


def timing_sections(results, bench, kinds=("cold", "hot")):
    """The hot and cold time tables and the ratio against each peer: the core of a report
    whose runs are timed cold and hot."""
    engines, base = bench.engines, bench.base
    return (f"\n### Hot: best of {bench.mode.reps} run(s), seconds\n\n"
            + time_table(results, engines, "hot")
            + "\n### Cold: first run, data files out of the page cache, seconds\n\n"
            + time_table(results, engines, "cold")
            + f"\n### {base.label} against each peer (below 1x: {base.label} is faster)\n\n"
            + ratio_table(results, base, bench.peers, kinds))


def per_query_ratio_table(results, base, peers, kinds):
    """Queries down; base/peer for each peer and kind across; the geomean in the last row."""
    header = ["query"] + [f"/ {p.label} {kind}" for p in peers for kind in kinds]
    rows = []
    for q, o in results.items():
        row = [q]
        for peer in peers:
            for kind in kinds:
                b, p = o[base.name].time(kind), o[peer.name].time(kind)
                row.append(times(b / p) if b and p else "-")
        rows.append(row)
    rows.append(["**geomean**"] + [times(ratio(results, base.name, peer.name, kind)[1])
                                   for peer in peers for kind in kinds])
    return table(header, rows)


def ratio_lines(results, base, peers, kinds):
    """Summary lines like 'Quiver/DuckDB: hot 0.80x, cold 1.10x (total over 22 queries)'."""
    lines = []
    for peer in peers:
        parts, count = [], 0
        for kind in kinds:
            total, _, count = ratio(results, base.name, peer.name, kind)
            parts.append(f"{kind} {times(total)}")
        lines.append(f"{base.label}/{peer.label}: {', '.join(parts)} (total over {count} queries)")
    return lines


def request_totals(results, columns, first="engine", kinds=("cold", "hot"), kind_label=None):
    """The counting proxy's totals per column (an engine, or a worker count), over the queries
    it got right: GetObject requests and MB sent, for each kind; scenarios s3 and lambda show
    it under their request tables. An ok outcome's stats[kind] holds the proxy's "counts" and
    "bytes" per S3 API. Returns (table, {(column name, kind): (GETs, MB)})."""
    kind_label = kind_label or {}
    rows, totals = [], {}
    for c in columns:
        ran = [o[c.name] for o in results.values() if o[c.name].ok]
        row = [c.label, f"{len(ran)} of {len(results)}"]
        for kind in kinds:
            gets = sum(o.stats[kind]["counts"].get("GetObject", 0) for o in ran)
            mb = sum(sum(o.stats[kind]["bytes"].values()) / 1e6 for o in ran)
            totals[(c.name, kind)] = (gets, mb)
            row += [gets, f"{mb:.1f}"] if ran else ["-", "-"]
        rows.append(row)
    header = [first, "queries"] + [f"{kind_label.get(kind, kind)} {what}" for kind in kinds
                                   for what in ("GETs", "MB")]
    return table(header, rows), totals


def notes(results, engines):
    """A bullet per query an engine did not run cleanly, with the reason."""
    return grouped_notes({"": results}, engines)


def notes_or_na(results, engines):
    """`notes`, with one line instead for an engine that could run no query at all (n/a)."""
    lines = []
    for e in engines:
        outcomes = [o[e.name] for o in results.values()]
        if outcomes and all(o.status == "n/a" for o in outcomes):
            lines.append(f"- {e.label}: **n/a** for every query: {outcomes[0].note}")
    shown = [e for e in engines if not any(line.startswith(f"- {e.label}:") for line in lines)]
    rest = notes(results, shown)
    if not lines:
        return rest
    return "\n".join(lines) + "\n" + ("" if rest.startswith("Every engine") else rest)


def grouped_notes(groups, engines):
    """notes() over several result sets ({label: results}), each bullet starting with its label."""
    lines = [f"- {label}{q}, {e.label}: **{o[e.name].status}**: {o[e.name].note}"
             for label, results in groups.items() for q, o in results.items() for e in engines
             if not o[e.name].ok]
    if not lines:
        return "Every engine ran every query and agreed with DuckDB.\n"
    return "\n".join(lines) + "\n"


def machine():
    """One line about where the numbers came from."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    ram = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
            ram = f", {kib / (1 << 20):.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{cpu}, {os.cpu_count()} cores{ram}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def load():
    """The 1-minute load average when the run starts, with a warning when the machine is busy."""
    value, cores = os.getloadavg()[0], os.cpu_count()
    text = f"load average at start: {value:.1f} on {cores} cores"
    if value > 0.5 * cores:
        text += " (**other work was running: treat these numbers as unreliable**)"
    return text
