"""DuckDB 1.4.4 with its iceberg extension, the reference reader of tests/test_iceberg.py.

The extension comes from PyPI wheels (duckdb-ext-iceberg, duckdb-ext-avro) pinned to DuckDB
1.4.4, so it lives in a venv of its own, apart from the tests' duckdb: created on first use
at $QUIVER_DUCKDB_ICEBERG_VENV (default ~/.cache/quiver-venvs/duckdb-iceberg-1.4.4) and
reused after.

    run(statements) -> one result per statement, each {"columns", "types", "rows"} or
                       {"error": "<exception class>: <message>"}

runs the statements in order on one connection, in a subprocess of the venv's python running
this file. Rows come back as lists of text, written by `cell_text`; `canonical` turns that
text, or the CSV text of `quiver query --format csv`, into one form, so that tests compare
the two (and pyiceberg's rows, through cell_text too) with ==:
    NULL             ''            (CSV writes NULL as an empty field)
    floats           repr(float)   ('62.5', '65.0')
    timestamps       '2024-01-01 05:50:00', '2026-11-27 14:05:09.861000' (Python's
                     isoformat with a space: quiver writes a 'T' and milliseconds)
    dates, integers, strings as written.
This file imports nothing but the standard library (and duckdb when run as the script).
"""
import datetime
import decimal
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys

PACKAGES = ["duckdb==1.4.4", "duckdb-ext-iceberg==1.4.4.20260205",
            "duckdb-ext-avro==1.4.4.20260205"]
VENV = os.environ.get("QUIVER_DUCKDB_ICEBERG_VENV") or os.path.expanduser(
    "~/.cache/quiver-venvs/duckdb-iceberg-1.4.4")
TIMEOUT = 300


class VenvError(Exception):
    pass


def venv_python():
    """The venv's python, creating the venv first if missing (under a lock; the finished
    venv is marked by a file naming the packages, so a half-made one is made again)."""
    python = os.path.join(VENV, "bin", "python")
    marker = os.path.join(VENV, "quiver-packages.txt")
    wanted = "\n".join(PACKAGES) + "\n"

    def ready():
        try:
            with open(marker) as f:
                return f.read() == wanted
        except FileNotFoundError:
            return False

    if ready():
        return python
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    with open(VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready():
            shutil.rmtree(VENV, ignore_errors=True)
            steps = [[sys.executable, "-m", "venv", VENV],
                     [python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                      *PACKAGES]]
            for step in steps:
                proc = subprocess.run(step, capture_output=True, text=True, timeout=900)
                if proc.returncode != 0:
                    raise VenvError(f"making the DuckDB iceberg venv at {VENV} failed: "
                                    f"{' '.join(step)}\n{proc.stderr}{proc.stdout}")
            with open(marker, "w") as f:
                f.write(wanted)
    return python


def run(statements):
    """Runs `statements` (SQL strings) in order on one DuckDB connection with the iceberg
    extension loaded; returns one result per statement (see the module docstring)."""
    proc = subprocess.run([venv_python(), os.path.abspath(__file__)],
                          input=json.dumps(list(statements)), capture_output=True, text=True,
                          timeout=TIMEOUT)
    if proc.returncode != 0:
        raise VenvError(f"DuckDB (iceberg) exited {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def cell_text(value):
    """A Python value (DuckDB's or pyarrow's) as text, in `canonical` form."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, decimal.Decimal)):
        return str(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?")
FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+|inf|nan|NaN)")


def canonical(text):
    """Text of a cell (quiver's CSV or cell_text's) in one form: timestamps and floats are
    written again as cell_text writes them; anything else is left as is."""
    if TIMESTAMP.fullmatch(text):
        return cell_text(datetime.datetime.fromisoformat(text.replace("T", " ")))
    if FLOAT.fullmatch(text):
        return repr(float(text))
    return text


def canonical_rows(rows):
    return [[canonical(cell) for cell in row] for row in rows]


def _serve():
    """The script side: statements (JSON) on stdin, results (JSON) on stdout."""
    import importlib.util

    import duckdb

    extensions = os.path.join(
        importlib.util.find_spec("duckdb_ext").submodule_search_locations[0], "extensions")

    def connect():
        con = duckdb.connect(config={"autoinstall_known_extensions": False})
        con.execute(f"SET extension_directory = '{extensions}'")
        con.execute("LOAD iceberg")  # loads avro from the same folder
        return con

    con = connect()
    results = []
    for sql in json.load(sys.stdin):
        try:
            relation = con.sql(sql)
            if relation is None:  # a statement without a result (SET ...)
                results.append({"columns": [], "types": [], "rows": []})
                continue
            rows = relation.fetchall()
            results.append({"columns": list(relation.columns),
                            "types": [str(t) for t in relation.types],
                            "rows": [[cell_text(v) for v in row] for row in rows]})
        except duckdb.Error as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
            if isinstance(e, duckdb.FatalException):  # the connection is unusable now
                con = connect()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    _serve()
