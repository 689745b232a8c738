"""TPC-DS for scenario `tpcds`: the 24 tables as tpcgen-cli writes them (benches/data.py) and
the 99 query texts as DuckDB's tpcds extension gives them. PyPI packages that extension as
`duckdb-extension-tpcds`, built for DuckDB 1.5.5 only, so it is loaded in a venv of its own
(under the data folder) and its queries are written out once; the engines under test run
them as text. tpcgen-cli's data is not dsdgen's byte for byte, so DuckDB's own answer tables
do not apply: answers are checked against DuckDB on the same files, as everywhere here.
"""
import glob
import os
import subprocess
import sys

from benches import data

DUCKDB_VERSION = "1.5.5"
QUERIES = list(range(1, 100))
TABLES = [
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer",
    "customer_address", "customer_demographics", "date_dim", "household_demographics",
    "income_band", "inventory", "item", "promotion", "reason", "ship_mode", "store",
    "store_returns", "store_sales", "time_dim", "warehouse", "web_page", "web_returns",
    "web_sales", "web_site",
]

_DUMP = """
import duckdb, glob, os, site, sys
found = glob.glob(os.path.join(site.getsitepackages()[0], "duckdb_extension_tpcds",
                               "extensions", "*", "tpcds.duckdb_extension"))
con = duckdb.connect()
con.execute(f"LOAD '{found[0]}'")
for n, text in con.execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY 1").fetchall():
    with open(os.path.join(sys.argv[1], f"q{n:02d}.sql"), "w") as f:
        f.write(text)
"""


def queries():
    """{n: SQL text} of the 99 queries."""
    folder = data.generate("tpcds-queries", DUCKDB_VERSION, _dump_queries)
    texts = {}
    for n in QUERIES:
        with open(os.path.join(folder, f"q{n:02d}.sql")) as f:
            texts[n] = f.read()
    return texts


def _dump_queries(out):
    venv = os.path.join(data.ROOT, "venvs", f"duckdb-{DUCKDB_VERSION}")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", f"duckdb=={DUCKDB_VERSION}",
                        f"duckdb-extension-tpcds=={DUCKDB_VERSION}"], check=True)
    subprocess.run([python, "-c", _DUMP, out], check=True)
    written = glob.glob(os.path.join(out, "q*.sql"))
    if len(written) != len(QUERIES):
        raise RuntimeError(f"the tpcds extension gave {len(written)} queries, not 99")


def table_paths(root):
    """{table: path} of tpcgen-cli's files under `root`."""
    return {t: os.path.join(root, f"{t}.parquet") for t in TABLES}
