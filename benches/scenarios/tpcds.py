"""Scenario `tpcds`: TPC-DS, all 99 queries (DuckDB's texts) over the 24 tables as tpcgen-cli
writes them, cold and hot, every engine, answers checked against DuckDB (benches/tpcds.py).
"""
import os

from benches import data, suite, tpcds

NAME = "tpcds"
TITLE = "TPC-DS: 99 queries, cold and hot"


def run(bench):
    sf = bench.mode.sf
    root = data.tpcds(sf)
    tables = tpcds.table_paths(root)
    files = list(tables.values())
    size = sum(os.path.getsize(f) for f in files) / 1e6
    intro = (f"TPC-DS at scale factor {sf}: {len(files)} files (one per table), {size:.0f} MB "
             f"of Parquet in `{root}` (tpcgen-cli). The 99 queries are DuckDB's (its tpcds "
             f"extension, {tpcds.DUCKDB_VERSION}); every run is a fresh session that creates "
             f"the 24 views and runs one query.")
    queries = {f"q{n:02d}": text for n, text in tpcds.queries().items()}
    return suite.run(bench, NAME, f"TPC-DS SF {sf}: 99 queries, cold and hot", intro, tables,
                     queries, files, f"TPC-DS SF {sf}")
