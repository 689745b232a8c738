"""Scenario `sort_under_load`: a sort that fits its memory limit must fit it however the
threads are scheduled. tpchgen-cli's SF 1 lineitem sorted to Parquet under
`quiver.memory_limit = 268435456` (256 MiB), RUNS times (20; QUIVER_SORT_RUNS), each a fresh
process, while two busy loops hold both cores (a busy machine made that sort fail about one
run in two: "Failed to allocate additional … for SortPreservingMergeExec"). Every output is
checked by its row count and a checksum against the input's. No peer: this is about Quiver
keeping its own limit.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import duckdb

from benches import data, report
from benches.memory import TIME

NAME = "sort_under_load"
TITLE = "A 256 MiB sort on a busy machine"
LIMIT = 268435456
SQL = "SELECT * FROM read_parquet('{path}') ORDER BY l_shipdate, l_orderkey, l_linenumber"
CHECK = "count(*), sum(l_orderkey), sum(l_linenumber)"
BUSY = "while True: pass"


def run(bench):
    if not os.access(TIME, os.X_OK):
        return report.Section(NAME, TITLE, f"Not run: {TIME} is missing.\n")
    runs = int(os.environ.get("QUIVER_SORT_RUNS", "20"))
    lineitem = os.path.join(data.tpchgen("1"), "lineitem.parquet")
    expected = duckdb.sql(f"SELECT {CHECK} FROM read_parquet('{lineitem}')").fetchall()
    scratch = tempfile.mkdtemp(prefix="quiver-sort-load-")
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
    rows, passed = [], 0
    try:
        for n in range(1, runs + 1):
            row = _sort(bench.base.binary, lineitem, scratch, expected)
            passed += row[0] == "yes"
            rows.append([n, *row])
            print(f"  run {n}: {row}", flush=True)
    finally:
        for process in busy:
            process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    body = (f"tpchgen-cli SF 1 lineitem ({os.path.getsize(lineitem) / 1e6:.0f} MB, 6,001,215 "
            f"rows) `ORDER BY l_shipdate, l_orderkey, l_linenumber` to Parquet with "
            f"`quiver.memory_limit = {LIMIT}`, while two Python busy loops hold both cores. "
            f"\"right\": the output's {CHECK} equal the input's.\n\n**{passed} of {runs} runs "
            f"completed and right.**\n\n"
            + report.table(["run", "right", "peak MB", "s", "error"], rows))
    return report.Section(NAME, TITLE, body, [],
                          [f"256 MiB sort of SF 1 lineitem with both cores busy: {passed} of "
                           f"{runs} runs completed and right"])


def _sort(quiver, lineitem, scratch, expected):
    """(right, peak MB, seconds, error) of one run."""
    out = os.path.join(scratch, "sorted.parquet")
    env = {**os.environ, "TMPDIR": os.path.join(scratch, "spill")}
    os.makedirs(env["TMPDIR"], exist_ok=True)
    args = [TIME, "-f", "peak-kb %M", quiver, "query", "--format", "parquet", "--output", out,
            "--set", f"quiver.memory_limit={LIMIT}", SQL.format(path=lineitem)]
    started = time.time()
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    took = time.time() - started
    peak = next((line.split()[1] for line in reversed(proc.stderr.splitlines())
                 if line.startswith("peak-kb ")), "0")
    if proc.returncode != 0:
        error = next((line for line in proc.stderr.splitlines() if "error" in line.lower()),
                     proc.stderr[-300:])
        return ["**no**", f"{int(peak) / 1024:.0f}", report.seconds(took), error[:300]]
    got = duckdb.sql(f"SELECT {CHECK} FROM read_parquet('{out}')").fetchall()
    os.remove(out)
    right = "yes" if got == expected else f"**no**: {got}"
    return [right, f"{int(peak) / 1024:.0f}", report.seconds(took), ""]
