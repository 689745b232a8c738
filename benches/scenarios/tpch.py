"""Scenario 1: TPC-H, 22 queries over one Parquet file per table, cold and hot, every engine.

Time per query per engine, Quiver's ratio against each peer per query and overall (total and
geometric mean), Quiver's statement beside its whole process, and each engine's peak memory
per query (a fresh process each, see benches/memory.py). Queries and file paths come from
tests/tpch; the data from scripts/gen_tpch.py (pyarrow, layout single). Scenario `tpchgen`
runs the same queries over tpchgen-cli's files.
"""
import os

from tpch.tables import QUERIES, TABLES, query_sql, table_glob

from benches import data, suite

NAME = "tpch"
TITLE = "TPC-H: 22 queries, cold and hot"


def tables_in(root):
    """{table: file} of scripts/gen_tpch.py's data under `root` (layout single)."""
    return {t: table_glob(root, "single", t) for t in TABLES}


def run(bench):
    root = data.tpch(bench.mode.sf)
    tables = tables_in(root)
    return run_tables(bench, NAME, tables, f"`{root}/single` (scripts/gen_tpch.py: pyarrow, "
                      "decimals as fixed-length bytes)")


def run_tables(bench, name, tables, written):
    """The 22 queries over `tables` ({table: path}), written as `written` says."""
    files = list(tables.values())
    size = sum(os.path.getsize(f) for f in files) / 1e6
    sf = bench.mode.sf
    intro = (f"TPC-H at scale factor {sf}: {len(files)} files (one per table), {size:.0f} MB "
             f"of Parquet in {written}. Every run is a fresh session that creates the 8 views "
             f"and runs one query.")
    queries = {f"q{n:02d}": query_sql(n) for n in QUERIES}
    return suite.run(bench, name, f"TPC-H SF {sf}: 22 queries, cold and hot ({name})", intro,
                     tables, queries, files, f"TPC-H SF {sf} ({name})")
