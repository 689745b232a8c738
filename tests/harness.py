"""Helpers for the end-to-end tests: find and run the `quiver` binary, parse its CSV.

QUIVER_BIN names the binary (default ${CARGO_TARGET_DIR:-target}/debug/quiver, relative to the
repo root). Every run checks that quiver did not panic.
"""
import csv
import io
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = float(os.environ.get("QUIVER_TEST_TIMEOUT", "300"))


def quiver_bin():
    default = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "debug", "quiver")
    return os.path.join(REPO, os.environ.get("QUIVER_BIN", default))


def parse_csv(text):
    """(header, rows) of CSV text; rows are lists of strings."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return [], []
    return rows[0], rows[1:]


class Quiver:
    def __init__(self, path):
        self.path = path

    def run(self, *args, input=None, cwd=None, timeout=TIMEOUT, env=None):
        """Run `quiver ARGS` (in `env`, default this process's); returns the CompletedProcess
        (text mode). Fails on a panic."""
        proc = subprocess.run([self.path, *args], input=input, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, env=env)
        assert "panicked" not in proc.stderr, f"quiver panicked:\n{proc.stderr}"
        return proc

    def ok(self, *args, **kwargs):
        """Run and require exit code 0; returns stdout."""
        proc = self.run(*args, **kwargs)
        assert proc.returncode == 0, (
            f"quiver {' '.join(args)} exited {proc.returncode}\nstderr:\n{proc.stderr}")
        return proc.stdout

    def csv(self, sql, *args, **kwargs):
        """Run `quiver query --format csv ... SQL`; returns (header, rows)."""
        return parse_csv(self.ok("query", "--format", "csv", *args, sql, **kwargs))
