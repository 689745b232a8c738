"""TPC-H for the end-to-end tests: queries, table views per data layout, result comparison."""
