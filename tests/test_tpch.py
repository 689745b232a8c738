"""TPC-H end to end: the 22 queries through `quiver query`, checked against DuckDB.

Parametrised over data layout (single, many, hive) x executor (datafusion, fragments) x query.
The data (SF 0.1 unless QUIVER_TPCH_SF says otherwise) is generated once by
scripts/gen_tpch.py into QUIVER_DATA (default ~/.cache/quiver-data/tpch-sf<SF>), outside the repo.
DuckDB reads the same files for the expected results.
"""
import os
import subprocess
import sys

import duckdb
import pytest

from harness import REPO, parse_csv
from tpch.compare import difference
from tpch.tables import LAYOUTS, QUERIES, prelude, query_sql

SF = os.environ.get("QUIVER_TPCH_SF", "0.1")
EXECUTORS = ["datafusion", "fragments"]


@pytest.fixture(scope="session")
def tpch_data():
    root = os.environ.get("QUIVER_DATA",
                          os.path.expanduser(f"~/.cache/quiver-data/tpch-sf{SF}"))
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_tpch.py"), SF, root],
                   check=True)
    return root


class DuckDBOracle:
    """Expected results, one DuckDB connection per layout, each result computed once."""

    def __init__(self, root):
        self.root = root
        self.connections = {}
        self.results = {}

    def expected(self, layout, n):
        if (layout, n) not in self.results:
            if layout not in self.connections:
                con = duckdb.connect()
                con.execute(prelude(self.root, layout, "duckdb"))
                self.connections[layout] = con
            cur = self.connections[layout].execute(query_sql(n))
            rows = cur.fetchall()
            self.results[(layout, n)] = (len(cur.description), rows)
        return self.results[(layout, n)]


@pytest.fixture(scope="session")
def oracle(tpch_data):
    return DuckDBOracle(tpch_data)


@pytest.mark.parametrize("n", QUERIES, ids=lambda n: f"q{n:02d}")
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tpch(quiver, tpch_data, oracle, layout, executor, n):
    columns, expected = oracle.expected(layout, n)
    sql = prelude(tpch_data, layout, "quiver") + query_sql(n)
    header, actual = parse_csv(quiver.ok("query", "--format", "csv", "--executor", executor,
                                         "-", input=sql))
    assert len(header) == columns, f"column count: expected {columns}, got {header}"
    problem = difference(expected, actual)
    assert problem is None, f"q{n:02d} on {layout} with {executor}: {problem}"
