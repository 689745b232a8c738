#!/usr/bin/env python3
"""DuckDB's answers for the browser benchmark (run.mjs), on the local copy of the files the
browser reads over HTTP: prints {qNN: {columns, rows}} as JSON (numbers as numbers, decimals
and dates as strings, as the browser tests' fixtures write them).

    python3 benches/browser/oracle.py TPCH_ROOT 1,3,6
"""
import importlib.util
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))

import duckdb  # noqa: E402

from tpch.tables import prelude, query_sql  # noqa: E402


def json_cell():
    """tests/browser/fixtures.py's json_cell (the browser tests and this agree on cells)."""
    path = os.path.join(REPO, "tests", "browser", "fixtures.py")
    spec = importlib.util.spec_from_file_location("browser_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.json_cell


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, numbers = sys.argv[1], [int(n) for n in sys.argv[2].split(",")]
    cell = json_cell()
    con = duckdb.connect()
    con.execute(prelude(root, "single", "duckdb"))
    results = {}
    for n in numbers:
        cur = con.execute(query_sql(n))
        rows = cur.fetchall()
        results[f"q{n:02d}"] = {"columns": [d[0] for d in cur.description],
                                "rows": [[cell(v) for v in row] for row in rows]}
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
