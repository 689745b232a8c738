"""Benchmarks against peers on the same files; see benches/README.md."""
