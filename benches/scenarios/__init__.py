"""The scenarios, in the order they run. Each module has NAME, TITLE and run(bench) -> Section
(see benches/harness.py for `bench`). To add one, write a module like these and list it here."""
import importlib

from benches.scenarios import (clickbench, clickbench_s3, disk_cache, iceberg, index,
                               memory_limit, partitioned, s3, small_files, sort_under_load,
                               stalls, threads, tpcds, tpch, tpchgen, windows)

# `lambda` is a Python keyword: its module is imported by name.
lambda_workers = importlib.import_module("benches.scenarios.lambda")

lambda_joins = importlib.import_module("benches.scenarios.lambda_joins")
lambda_memory = importlib.import_module("benches.scenarios.lambda_memory")
from benches.scenarios import placement  # noqa: E402

SCENARIOS = [tpch, tpchgen, tpcds, clickbench, partitioned, s3, small_files, threads,
             lambda_workers, lambda_joins, index, memory_limit, sort_under_load, lambda_memory,
             stalls, disk_cache, clickbench_s3, iceberg, placement, windows]

# Issue 4's scenarios that wait for parts of Quiver not built yet (none now: the Lambda
# fan-out is measured by scenario `lambda`, benches/scenarios/lambda.py).
PENDING = {}
