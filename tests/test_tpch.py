"""TPC-H end to end: the 22 queries through `quiver query`, checked against DuckDB.

Parametrised over data layout (single, many, hive) x executor (datafusion, fragments) x query.
The data (SF 0.1 unless QUIVER_TPCH_SF says otherwise) is generated once by
scripts/gen_tpch.py into QUIVER_DATA (default ~/.cache/quiver-data/tpch-sf<SF>), outside the repo.
DuckDB reads the same files for the expected results (fixtures tpch_data and oracle, in
conftest.py).
"""
import pytest

from harness import parse_csv
from tpch.compare import difference
from tpch.tables import LAYOUTS, QUERIES, prelude, query_sql

EXECUTORS = ["datafusion", "fragments"]


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
