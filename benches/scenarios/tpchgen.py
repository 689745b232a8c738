"""Scenario `tpchgen`: TPC-H as tpchgen-cli writes it, the files a new user makes first
(parquet-rs, decimals as INT64, snappy, ~114k-row row groups), with scenario 1's queries,
checks and reports.
"""
import os

from tpch.tables import TABLES

from benches import data
from benches.scenarios import tpch

NAME = "tpchgen"
TITLE = "TPC-H as tpchgen-cli writes it: 22 queries, cold and hot"


def tables_in(root):
    """{table: file} of tpchgen-cli's data under `root`: one file per table."""
    return {t: os.path.join(root, f"{t}.parquet") for t in TABLES}


def run(bench):
    root = data.tpchgen(bench.mode.sf)
    tables = tables_in(root)
    return tpch.run_tables(bench, NAME, tables, f"`{root}` (tpchgen-cli: parquet-rs, decimals "
                           "as INT64)")
