"""The TPC-H tables of one data layout (see scripts/gen_tpch.py), as SQL views, and the queries.

prelude(root, layout, engine) gives 8 `CREATE VIEW <table> AS SELECT * FROM read_parquet(...)`
statements, for engine "quiver" (named arguments with =>) or "duckdb" (with =). In the hive
layout the partition columns (l_returnflag, o_orderstatus) are strings in both engines.
root is a local folder or a URL (s3://bucket/prefix, http://127.0.0.1:8000/prefix).
"""
import os
import posixpath

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
LAYOUTS = ["single", "many", "hive"]
HIVE_PARTITIONED = {"lineitem", "orders"}
QUERY_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "queries")
QUERIES = list(range(1, 23))


def query_sql(n):
    with open(os.path.join(QUERY_DIR, f"q{n:02d}.sql")) as f:
        return f.read()


def table_glob(root, layout, table):
    join = posixpath.join if "://" in root else os.path.join
    if layout == "single":
        return join(root, "single", f"{table}.parquet")
    if layout == "many":
        return join(root, "many", table, "*.parquet")
    if layout == "hive":
        pattern = "**/*.parquet" if table in HIVE_PARTITIONED else "*.parquet"
        return join(root, "hive", table, pattern)
    raise ValueError(f"unknown layout {layout!r}")


def read_parquet(root, layout, table, engine):
    path = "'" + table_glob(root, layout, table).replace("'", "''") + "'"
    if layout != "hive" or table not in HIVE_PARTITIONED:
        return f"read_parquet({path})"
    if engine == "quiver":
        return f"read_parquet({path}, hive_partitioning => true)"
    if engine == "duckdb":
        return f"read_parquet({path}, hive_partitioning = true, hive_types_autocast = false)"
    raise ValueError(f"unknown engine {engine!r}")


def prelude(root, layout, engine):
    # One file per table: let quiver split even these small files into buckets for every
    # thread, so that multi-bucket scans and merges are what the single layout tests.
    settings = "SET quiver.min_bucket_bytes = 0;\n" if engine == "quiver" and layout == "single" else ""
    return settings + "".join(
        f"CREATE VIEW {t} AS SELECT * FROM {read_parquet(root, layout, t, engine)};\n"
        for t in TABLES
    )
