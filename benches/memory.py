"""Peak memory of one query: a fresh process per engine and query, measured by the kernel.

`/usr/bin/time -f %M` reports the process's peak resident set (max RSS). Quiver runs as its
own command; DuckDB, chDB and DataFusion run in a fresh Python process that loads the engine,
creates the views and fetches the result as Arrow, so their numbers include the interpreter
and the engine's library (`baseline()` gives that floor: the same process for `SELECT 1`).
Memory is measured in runs of its own, never during timed runs.
"""
import os
import subprocess
import sys

from benches import engines

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME = "/usr/bin/time"

# Runs in the fresh Python process: argv[1] is the engine's name; stdin holds the setup
# statements and the query, separated by NUL bytes, the query last.
_IN_PROCESS = """
import sys
from benches import engines
parts = sys.stdin.read().split("\\0")
session = engines.DRIVERS[sys.argv[1]]().open(None)
for statement in parts[:-1]:
    session.execute(statement)
session.arrow(parts[-1])
session.close()
"""


def available():
    """None when peak memory can be measured here, else why not."""
    return None if os.access(TIME, os.X_OK) else f"{TIME} is missing (apt-get install time)"


def peak_mb(engine, setup, sql, timeout=900):
    """Peak RSS in MB of one fresh process running `setup` and then `sql` on `engine`."""
    if isinstance(engine, engines.Quiver):
        args = [engine.binary, "query", "--format", "arrow", "--executor", engine.executor,
                *engine.args, "-"]
        stdin = "".join(s + ";\n" for s in setup) + sql
        env = None
    else:
        args = [sys.executable, "-c", _IN_PROCESS, engine.name]
        stdin = "\0".join(list(setup) + [sql])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "tests")])}
    proc = subprocess.run([TIME, "-f", "peak-kb %M", *args], input=stdin.encode(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout,
                          cwd=REPO, env=env)
    stderr = proc.stderr.decode(errors="replace")
    line = next((line for line in reversed(stderr.splitlines()) if line.startswith("peak-kb ")),
                None)
    if proc.returncode != 0 or line is None:
        raise engines.EngineError(f"exit code {proc.returncode}: {stderr.strip()[-300:]}")
    return int(line.split()[1]) / 1024


def baseline(engine):
    """The floor of `peak_mb` for this engine: its process running `SELECT 1`."""
    return peak_mb(engine, [], "SELECT 1")
