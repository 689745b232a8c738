"""The scenarios, in the order they run. Each module has NAME, TITLE and run(bench) -> Section
(see benches/harness.py for `bench`). To add one, write a module like these and list it here."""
from benches.scenarios import partitioned, s3, small_files, threads, tpch

SCENARIOS = [tpch, partitioned, s3, small_files, threads]

# Issue 4's scenarios that wait for parts of Quiver not built yet.
PENDING = {
    "lambda": "scenario 2 through the Lambda fan-out with 8 emulated workers; waits for the "
              "Lambda executor (hook: TODO(lambda) in engines.py and scenarios/partitioned.py)",
}
