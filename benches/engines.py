"""The engines under comparison, behind one interface.

engine.view(name, glob, hive, files) gives the statements that make a table `name` over Parquet
files in that engine's dialect; `files=True` adds the columns `_path` (full path) and `_file`
(file name). engine.run(setup, sql, threads) runs the setup statements and the query in a fresh
session (a new `quiver` process; a new connection for the others) and returns Result(rows,
seconds): the time from opening the session to holding the whole result as Arrow, setup
included (quiver must run it in every process, so every engine does).

DuckDB, chDB and DataFusion run in one worker process each: a crash or a hang costs that query
(the worker is killed and restarted), not the harness. A worker warms its engine up once before
its first timed run, so one-time library start-up (chDB starts an embedded server) is not timed.
Rows are lists of plain Python cells (dates as ISO strings), compared by tests/tpch/compare.py.
"""
import datetime
import multiprocessing
import subprocess
import time
from dataclasses import dataclass, field
from importlib.metadata import version as package_version

import pyarrow as pa
import pyarrow.ipc


class EngineError(Exception):
    """The engine failed the query (error, crash or timeout); the message says which."""


@dataclass
class Result:
    rows: list
    seconds: float
    stats: dict = field(default_factory=dict)  # quiver's --profile lines


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def rows_of(table):
    """An Arrow table as a list of rows of plain cells; dates become ISO strings."""
    columns = [[_cell(v) for v in column.to_pylist()] for column in table.columns]
    return [list(row) for row in zip(*columns)]


def _cell(value):
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _tail(text, lines=3):
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(kept[-lines:])[:400] or "no message"


class Quiver:
    """The `quiver` command, one process per run; --profile's lines are kept as stats."""

    name, label = "quiver", "Quiver"

    def __init__(self, binary, timeout, executor="datafusion"):
        self.binary, self.timeout, self.executor = binary, timeout, executor
        if executor != "datafusion":
            self.name, self.label = f"quiver-{executor}", f"Quiver ({executor})"

    def version(self):
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout
        build = "debug build, " if "/debug/" in self.binary else ""
        return f"{out.strip() or 'quiver'} ({build}{self.binary})"

    def view(self, name, glob, hive=(), files=False):
        options = ", hive_partitioning => true" if hive else ""
        return [f"CREATE VIEW {name} AS SELECT * FROM read_parquet({sql_string(glob)}{options})"]

    def run(self, setup, sql, threads=None):
        args = [self.binary, "query", "--format", "arrow", "--profile", "--executor", self.executor]
        if threads:
            args += ["--threads", str(threads)]
        script = "".join(statement + ";\n" for statement in setup) + sql
        start = time.perf_counter()
        try:
            proc = subprocess.run(args + ["-"], input=script.encode(), capture_output=True,
                                  timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise EngineError(f"timed out after {self.timeout:.0f} s") from None
        seconds = time.perf_counter() - start
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0 or "panicked" in stderr:
            raise EngineError(f"exit code {proc.returncode}: {_tail(stderr)}")
        table = pa.ipc.open_file(proc.stdout).read_all()
        return Result(rows_of(table), seconds, _profile(stderr))

    def close(self):
        pass


def _profile(stderr):
    """`key: value` lines of --profile, e.g. {'requests': '8 (1 for footers, ...)'}."""
    stats = {}
    for line in stderr.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and not key.startswith(" "):
            stats[key.strip()] = value.strip()
    return stats


# --- in-process engines: a driver runs inside the worker, a handle in the harness -------------

class DuckDBDriver:
    def __init__(self):
        import duckdb
        self.duckdb = duckdb

    def run(self, setup, sql, threads):
        con = self.duckdb.connect(config={"threads": threads} if threads else {})
        try:
            for statement in setup:
                con.execute(statement)
            return con.sql(sql).to_arrow_table()
        finally:
            con.close()


class ChDBDriver:
    # SQL-standard outer joins (NULL, not 0, for a missing match); ClickHouse's TPC-H guide
    # sets the same.
    SETTINGS = ["SET join_use_nulls = 1"]

    def __init__(self):
        from chdb import session
        self.session = session

    def run(self, setup, sql, threads):
        s = self.session.Session()
        try:
            settings = self.SETTINGS + ([f"SET max_threads = {threads}"] if threads else [])
            for statement in settings + setup:
                s.query(statement)
            return s.query(sql, "ArrowTable")
        finally:
            s.close()


class DataFusionDriver:
    def __init__(self):
        import datafusion
        self.datafusion = datafusion

    def run(self, setup, sql, threads):
        config = self.datafusion.SessionConfig()
        if threads:
            config = config.with_target_partitions(threads)
        ctx = self.datafusion.SessionContext(config)
        for statement in setup:
            ctx.sql(statement)  # DDL runs when planned
        return ctx.sql(sql).to_arrow_table()


DRIVERS = {"duckdb": DuckDBDriver, "chdb": ChDBDriver, "datafusion": DataFusionDriver}


def _serve(conn, name):
    """Worker loop: (setup, sql, threads) in; ("ok", rows, seconds) or ("error", message) out."""
    driver = DRIVERS[name]()
    driver.run([], "SELECT 1", None)
    while True:
        request = conn.recv()
        if request is None:
            return
        try:
            start = time.perf_counter()
            table = driver.run(*request)
            seconds = time.perf_counter() - start
            conn.send(("ok", rows_of(table), seconds))
        except Exception as e:  # the engine's own error: report it, keep serving
            conn.send(("error", _tail(f"{type(e).__name__}: {e}"), None))


class InProcess:
    """Harness-side handle of an engine that runs in a worker process."""

    package = None

    def __init__(self, timeout):
        self.timeout = timeout
        self.proc = self.conn = None

    def version(self):
        return f"{self.label} {package_version(self.package)} (Python package {self.package})"

    def run(self, setup, sql, threads=None):
        if self.proc is None:
            self._start()
        try:
            self.conn.send((setup, sql, threads))
            if not self.conn.poll(self.timeout):
                self.close()
                raise EngineError(f"timed out after {self.timeout:.0f} s")
            status, payload, seconds = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.close()
            raise EngineError(f"worker process died (exit code {code})") from None
        if status != "ok":
            raise EngineError(payload)
        return Result(payload, seconds)

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.name), daemon=True)
        self.proc.start()
        child.close()

    def close(self):
        if self.proc is None:
            return
        if self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()
        self.proc = self.conn = None


class DuckDB(InProcess):
    name, label, package = "duckdb", "DuckDB", "duckdb"

    def view(self, name, glob, hive=(), files=False):
        options = ((", hive_partitioning = true" if hive else "")
                   + (", filename = true" if files else ""))
        columns = ("* EXCLUDE (filename), filename AS _path, parse_filename(filename) AS _file"
                   if files else "*")
        return [f"CREATE VIEW {name} AS SELECT {columns} "
                f"FROM read_parquet({sql_string(glob)}{options})"]


class ChDB(InProcess):
    name, label, package = "chdb", "chDB", "chdb"

    def view(self, name, glob, hive=(), files=False):
        columns = "*, _path, _file" if files else "*"
        settings = ["SET use_hive_partitioning = 1"] if hive else []
        return settings + [f"CREATE VIEW {name} AS SELECT {columns} "
                           f"FROM file({sql_string(glob)}, Parquet)"]


class DataFusion(InProcess):
    name, label, package = "datafusion", "DataFusion", "datafusion"

    def view(self, name, glob, hive=(), files=False):
        # A partitioned listing table wants its folder (a glob finds no files) and its partition
        # columns named; input_file_name() gives the object-store path (no leading slash).
        table = f"{name}_files" if files else name
        partitioned = f" PARTITIONED BY ({', '.join(hive)})" if hive else ""
        location = _folder_of(glob) + "/" if hive else glob
        statements = [f"CREATE EXTERNAL TABLE {table} STORED AS PARQUET{partitioned} "
                      f"LOCATION {sql_string(location)}"]
        if files:
            statements.append(
                f"CREATE VIEW {name} AS SELECT *, '/' || input_file_name() AS _path, "
                f"regexp_replace(input_file_name(), '^.*/', '') AS _file FROM {table}")
        return statements


def _folder_of(glob):
    """The folder above a glob's first wildcard: /data/events/*/*.parquet -> /data/events."""
    parts = glob.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?[{"))
    return "/".join(parts[:first])


NAMES = ["quiver", "duckdb", "chdb", "datafusion", "quiver-fragments"]
DEFAULT = ["quiver", "duckdb", "chdb", "datafusion"]
REFERENCE = "duckdb"


def make(names, quiver_bin, timeout):
    """Engines by name, in the order given, with the reference (DuckDB) always in.

    TODO(lambda): a `quiver-lambda` engine (the Lambda executor, 8 emulated workers) joins
    here when the Lambda executor lands.
    """
    makers = {
        "quiver": lambda: Quiver(quiver_bin, timeout),
        "quiver-fragments": lambda: Quiver(quiver_bin, timeout, executor="fragments"),
        "duckdb": lambda: DuckDB(timeout),
        "chdb": lambda: ChDB(timeout),
        "datafusion": lambda: DataFusion(timeout),
    }
    return [makers[n]() for n in names + ([REFERENCE] if REFERENCE not in names else [])]
