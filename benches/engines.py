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

Over S3 (scenario s3): engine.s3_view(name, key, s3, files) makes the same table over an object
in a bucket (s3 is an S3Endpoint: the server's URL, bucket and credentials), and
engine.session_runs(setup, sql, count, counter) runs the query `count` times in one session (the
first run includes opening it and the setup; the later ones only the query), with `counter`
(an object with reset() and read(), e.g. the counting proxy's) reset before and read after each
run, so each run's requests are counted by the server's side.
"""
import datetime
import multiprocessing
import os
import re
import subprocess
import sys
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
    server: dict = field(default_factory=dict)  # the counter's read() after the run (S3)


@dataclass
class S3Endpoint:
    """An S3-compatible server (path-style) as the engines reach it: `url` is what they connect
    to (the counting proxy), `bucket` holds the data."""
    url: str
    bucket: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def s3_url(self, key):
        return f"s3://{self.bucket}/{key}"

    def http_url(self, key):
        return f"{self.url}/{self.bucket}/{key}"

    @property
    def host_port(self):
        return self.url.split("://", 1)[1].rstrip("/")

    def env(self):
        """AWS_* variables that point a process at this server (and nowhere else)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region, "AWS_ENDPOINT_URL": self.url,
                "AWS_EC2_METADATA_DISABLED": "true"}


@dataclass
class RegisterS3:
    """A setup step (not SQL) for DataFusion: register the endpoint's bucket as s3://bucket."""
    endpoint: S3Endpoint


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
    """The `quiver` command, one process per run; --profile's lines are kept as stats.

    `args` are extra command-line flags (e.g. --coalesce-gap 0), `env` extra environment
    variables (e.g. S3Endpoint.env()); `name` and `label` tell such variants apart."""

    name, label = "quiver", "Quiver"

    def __init__(self, binary, timeout, executor="datafusion", args=(), env=None, name=None,
                 label=None):
        self.binary, self.timeout, self.executor = binary, timeout, executor
        self.args, self.env = list(args), dict(env or {})
        if executor != "datafusion":
            self.name, self.label = f"quiver-{executor}", f"Quiver ({executor})"
        self.name, self.label = name or self.name, label or self.label

    def version(self):
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout
        build = "debug build, " if "/debug/" in self.binary else ""
        return f"{out.strip() or 'quiver'} ({build}{self.binary})"

    def view(self, name, glob, hive=(), files=False):
        options = ", hive_partitioning => true" if hive else ""
        return [f"CREATE VIEW {name} AS SELECT * FROM read_parquet({sql_string(glob)}{options})"]

    def s3_view(self, name, key, s3, files=False):
        """`_path` and `_file` are virtual columns; the endpoint comes from self.env."""
        return self.view(name, s3.s3_url(key))

    def run(self, setup, sql, threads=None, repeat=1):
        """One process running the setup, then the query `repeat` times; the result and the
        --profile lines (stats) are the last statement's, seconds the whole process's."""
        args = [self.binary, "query", "--format", "arrow", "--profile", "--executor", self.executor]
        args += self.args
        if threads:
            args += ["--threads", str(threads)]
        script = "".join(statement + ";\n" for statement in setup)
        script += "".join(_statement(sql) + ";\n" for _ in range(repeat - 1)) + sql
        # The disk cache off, unless this variant turns it on (scenario disk_cache): a cold
        # run reads from the source, never from what an earlier run kept.
        start = time.perf_counter()
        try:
            proc = subprocess.run(args + ["-"], input=script.encode(), capture_output=True,
                                  timeout=self.timeout, env=self._env())
        except subprocess.TimeoutExpired:
            raise EngineError(f"timed out after {self.timeout:.0f} s") from None
        seconds = time.perf_counter() - start
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0 or "panicked" in stderr:
            raise EngineError(f"exit code {proc.returncode}: {_tail(stderr)}")
        table = pa.ipc.open_file(proc.stdout).read_all()
        return Result(rows_of(table), seconds, _profile(stderr))

    def _env(self):
        """The environment of a run: the disk cache off, this variant's variables in."""
        env = {**os.environ, "QUIVER_DISK_CACHE_BYTES": "0"}
        if self.env:
            env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
            env.update(self.env)
        return env

    def warm_seconds(self, setup, sql, runs=4):
        """The query's best time in a warm session: one `quiver` shell process runs the setup
        and then the query `runs` times under `.timer on`; the best of the runs after the
        first counts (the shell's timer, ms resolution). None if a run failed."""
        script = ".timer on\n.output /dev/null\n" + "".join(f"{s};\n" for s in setup)
        # The ; on its own line: a query may end in a comment.
        script += f"{_statement(sql)}\n;\n" * runs
        try:
            proc = subprocess.run([self.binary], input=script.encode(), capture_output=True,
                                  timeout=self.timeout, env=self._env())
        except subprocess.TimeoutExpired:
            return None
        times = [float(t) for t in re.findall(rb"Run Time \(s\): real ([0-9.]+)", proc.stdout)]
        if proc.returncode != 0 or len(times) != len(setup) + runs:
            return None
        return min(times[-(runs - 1):])

    def warm_statement_seconds(self, setup, sql, repeat=4):
        """The query's own time (`time plan` + `time execute` from --profile) the `repeat`th
        time one process runs it: a statement in a warm session, with this variant's flags."""
        return _statement_seconds(self.run(setup, sql, repeat=repeat).stats)

    def session_runs(self, setup, sql, count=2, counter=None, threads=None):
        """[first, later...]: the first run is a fresh process (setup and query, timed whole);
        run k is a process running the query k times, timed by the last statement's own
        `time plan` + `time execute` (--profile), so a later run is the same query again in
        the same process, after its caches filled. Its server counts are that process's minus
        the (k-1)-run process's: what the last statement alone asked for."""
        results, previous = [], {}
        for k in range(1, count + 1):
            if counter is not None:
                counter.reset()
            result = self.run(setup, sql, threads, repeat=k)
            total = counter.read() if counter is not None else {}
            result.server = _minus(total, previous)
            previous = total
            if k > 1:
                result.seconds = _statement_seconds(result.stats)
            results.append(result)
        return results

    def close(self):
        pass


def _statement(sql):
    """A query without its trailing semicolon, to repeat it in a script."""
    return sql.strip().rstrip(";").strip()


def _statement_seconds(stats):
    """The last statement's time from --profile: `time plan` + `time execute` (ms)."""
    total = 0.0
    for phase in ("time plan", "time execute"):
        value = stats.get(phase, "")
        if not value.endswith(" ms"):
            raise EngineError(f"--profile gave no '{phase}' line")
        total += float(value[:-3])
    return total / 1e3


def _minus(total, previous):
    """Server counts of one run from two cumulative reads ({"counts": {}, "bytes": {}})."""
    return {part: {kind: value - previous.get(part, {}).get(kind, 0)
                   for kind, value in total.get(part, {}).items()}
            for part in ("counts", "bytes")} if total else {}


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
    def __init__(self, site=None):
        if site:  # another DuckDB, installed there (see DuckDB.over_s3); it replaces the
            # one the harness's modules imported into this worker as it started
            sys.path.insert(0, site)
            for module in [m for m in sys.modules if m.split(".")[0] in ("duckdb", "_duckdb")]:
                del sys.modules[module]
        import duckdb
        self.duckdb = duckdb

    def open(self, threads):
        con = self.duckdb.connect(config={"threads": threads} if threads else {})
        return _Session(con.execute, lambda sql: con.sql(sql).to_arrow_table(), con.close)


class ChDBDriver:
    # SQL-standard outer joins (NULL, not 0, for a missing match); ClickHouse's TPC-H guide
    # sets the same.
    SETTINGS = ["SET join_use_nulls = 1"]

    def __init__(self):
        from chdb import session
        self.session = session

    def open(self, threads):
        s = self.session.Session()
        session = _Session(s.query, lambda sql: s.query(sql, "ArrowTable"), s.close)
        try:
            for statement in self.SETTINGS + ([f"SET max_threads = {threads}"] if threads else []):
                s.query(statement)
        except BaseException:
            s.close()
            raise
        return session


class DataFusionDriver:
    def __init__(self):
        import datafusion
        self.datafusion = datafusion

    def open(self, threads):
        config = self.datafusion.SessionConfig()
        if threads:
            config = config.with_target_partitions(threads)
        ctx = self.datafusion.SessionContext(config)

        def execute(statement):
            if isinstance(statement, RegisterS3):
                from datafusion.object_store import AmazonS3
                e = statement.endpoint
                store = AmazonS3(bucket_name=e.bucket, region=e.region,
                                 access_key_id=e.access_key, secret_access_key=e.secret_key,
                                 endpoint=e.url, allow_http=e.url.startswith("http://"))
                ctx.register_object_store("s3://", store, e.bucket)
            else:
                ctx.sql(statement)  # DDL runs when planned

        return _Session(execute, lambda sql: ctx.sql(sql).to_arrow_table(), lambda: None)


@dataclass
class _Session:
    """One engine session: execute(setup statement), arrow(query) -> Arrow table, close()."""
    execute: object
    arrow: object
    close: object


DRIVERS = {"duckdb": DuckDBDriver, "chdb": ChDBDriver, "datafusion": DataFusionDriver}


def _session_runs(driver, setup, sql, threads, count, counter):
    """[(rows, seconds, server counts)]: `count` runs of sql in one session. The first run's
    time includes opening the session and the setup; the counter is reset before and read
    after each run, outside the timed part."""
    runs = []
    if counter is not None:
        counter.reset()
    start = time.perf_counter()
    session = driver.open(threads)
    try:
        for statement in setup:
            session.execute(statement)
        for i in range(count):
            if i:
                if counter is not None:
                    counter.reset()
                start = time.perf_counter()
            table = session.arrow(sql)
            seconds = time.perf_counter() - start
            server = counter.read() if counter is not None else {}
            runs.append((rows_of(table), seconds, server))
    finally:
        session.close()
    return runs


def _serve(conn, name, site=None):
    """Worker loop: (setup, sql, threads[, count, counter]) in; ("ok", [(rows, seconds,
    server)], None) or ("error", message, None) out. `site`: a folder of packages that come
    before this Python's (DuckDB.over_s3's)."""
    driver = DRIVERS[name](site) if site else DRIVERS[name]()
    _session_runs(driver, [], "SELECT 1", None, 1, None)
    while True:
        request = conn.recv()
        if request is None:
            return
        setup, sql, threads, count, counter = (tuple(request) + (1, None))[:5]
        try:
            conn.send(("ok", _session_runs(driver, setup, sql, threads, count, counter), None))
        except Exception as e:  # the engine's own error: report it, keep serving
            conn.send(("error", _tail(f"{type(e).__name__}: {e}"), None))


class InProcess:
    """Harness-side handle of an engine that runs in a worker process."""

    package = None
    site = None  # a folder of packages the worker puts first on its path

    def __init__(self, timeout):
        self.timeout = timeout
        self.proc = self.conn = None

    def over_s3(self):
        """(the engine as it reads S3 here, None) or (self, why it cannot)."""
        reason = self.s3_support() if hasattr(self, "s3_support") else None
        return self, reason

    def version(self):
        return f"{self.label} {package_version(self.package)} (Python package {self.package})"

    def run(self, setup, sql, threads=None):
        return self.session_runs(setup, sql, 1, None, threads)[0]

    def session_runs(self, setup, sql, count=2, counter=None, threads=None):
        """`count` runs of sql in one session (see _session_runs); a Result per run."""
        if self.proc is None:
            self._start()
        try:
            self.conn.send((setup, sql, threads, count, counter))
            if not self.conn.poll(self.timeout * count):
                self.close()
                raise EngineError(f"timed out after {self.timeout * count:.0f} s")
            status, payload, _ = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.close()
            raise EngineError(f"worker process died (exit code {code})") from None
        if status != "ok":
            raise EngineError(payload)
        return [Result(rows, seconds, server=server) for rows, seconds, server in payload]

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.name, self.site), daemon=True)
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

    def over_s3(self):
        """This DuckDB if it loads httpfs here; else DuckDB 1.4.4, for which PyPI ships httpfs
        (`duckdb-ext-httpfs`), installed once under the data folder and imported by its own
        worker ahead of this Python's DuckDB; else (self, why neither can)."""
        reason = self.s3_support()
        if reason is None:
            return self, None
        try:
            site, load = _httpfs_site()
        except (OSError, subprocess.CalledProcessError) as e:
            return self, f"{reason}; DuckDB {HTTPFS_DUCKDB} with PyPI's httpfs: {e}"
        engine = DuckDB(self.timeout)
        engine.site, engine.load = site, load
        engine.label = f"DuckDB {HTTPFS_DUCKDB}"
        return engine, None

    def version(self):
        if self.site:
            return f"DuckDB {HTTPFS_DUCKDB} with httpfs (PyPI, in {self.site})"
        return super().version()

    def s3_view(self, name, key, s3, files=False):
        """Needs the httpfs extension (see over_s3); the secret makes it path-style."""
        secret = (f"CREATE OR REPLACE SECRET bench_s3 (TYPE s3, KEY_ID {sql_string(s3.access_key)}, "
                  f"SECRET {sql_string(s3.secret_key)}, REGION {sql_string(s3.region)}, "
                  f"ENDPOINT {sql_string(s3.host_port)}, URL_STYLE 'path', "
                  f"USE_SSL {'true' if s3.url.startswith('https') else 'false'})")
        load = getattr(self, "load", None) or _httpfs_load()
        return [load, secret] + self.view(name, s3.s3_url(key), files=files)

    @staticmethod
    def s3_support(timeout=20):
        """None when DuckDB can load httpfs here, else why not. httpfs is an extension: DuckDB
        downloads it on INSTALL, or PyPI's `duckdb-extension-httpfs` of the same version as
        `duckdb` ships it (used when installed). This tries LOAD, then INSTALL once (in a child
        process, killed after `timeout` s). A failed INSTALL is remembered for a day in
        data.ROOT/duckdb-httpfs.failed (delete it to try again), so runs do not retry it."""
        from benches import data  # a data set root, also where the failure is remembered

        marker = os.path.join(data.ROOT, "duckdb-httpfs.failed")
        load = _httpfs_load()
        code = ("import duckdb, sys\ncon = duckdb.connect()\n"
                "try:\n    con.execute(sys.argv[2])\nexcept Exception:\n"
                "    if sys.argv[1] == 'load': raise\n"
                "    con.execute('INSTALL httpfs')\n    con.execute('LOAD httpfs')\n")
        fresh = os.path.exists(marker) and time.time() - os.path.getmtime(marker) < 86400
        attempt = "load" if fresh or load != "LOAD httpfs" else "install"
        try:
            proc = subprocess.run([sys.executable, "-c", code, attempt, load],
                                  capture_output=True, text=True, timeout=timeout)
            problem = None if proc.returncode == 0 else _duckdb_error(proc.stderr)
        except subprocess.TimeoutExpired:
            problem = f"INSTALL httpfs did not finish in {timeout} s"
        if problem is None:
            return None
        if attempt == "load" and fresh:
            with open(marker) as f:
                return f.read().strip()
        if attempt == "load":
            return f"`{load}` failed: {problem}"
        reason = (f"the httpfs extension is not installed and `INSTALL httpfs` failed "
                  f"({problem}); DuckDB {package_version('duckdb')} downloads it at run time")
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with open(marker, "w") as f:
            f.write(reason + "\n")
        return reason


HTTPFS_DUCKDB = "1.4.4"


def add_s3_peer(engine, engines, unsupported):
    """Appends `engine` to `engines` as it reads S3 here (see over_s3); why it cannot, if it
    cannot, goes into `unsupported` under its name."""
    peer, reason = engine.over_s3()
    engines.append(peer)
    if reason:
        unsupported[engine.name] = reason


def _httpfs_site():
    """(folder, LOAD statement): DuckDB 1.4.4 and its httpfs from PyPI, installed once into a
    folder under the data root (pip --target), checked by loading it there."""
    from benches import data

    site = os.path.join(data.ROOT, "python", f"duckdb-{HTTPFS_DUCKDB}-httpfs")
    extension = os.path.join(site, "duckdb_ext", "extensions", f"v{HTTPFS_DUCKDB}",
                             "linux_amd64", "httpfs.duckdb_extension")
    if not os.path.exists(extension):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        site, f"duckdb=={HTTPFS_DUCKDB}", f"duckdb-ext-httpfs~={HTTPFS_DUCKDB}.0"],
                       check=True, capture_output=True, timeout=600)
    load = f"LOAD {sql_string(extension)}"
    check = (f"import sys; sys.path.insert(0, sys.argv[1]); import duckdb; "
             f"assert duckdb.__version__ == {HTTPFS_DUCKDB!r}, duckdb.__version__; "
             f"duckdb.connect().execute(sys.argv[2])")
    subprocess.run([sys.executable, "-c", check, site, load], check=True, capture_output=True,
                   timeout=60)
    return site, load


def _httpfs_load():
    """LOAD for httpfs: from PyPI's duckdb-extension-httpfs when it is installed for this very
    DuckDB version (no download needed), else plain `LOAD httpfs` (DuckDB's own folder)."""
    try:
        version = package_version("duckdb")
        if package_version("duckdb-extension-httpfs") == version:
            import duckdb_extension_httpfs

            path = os.path.join(os.path.dirname(duckdb_extension_httpfs.__file__), "extensions",
                                f"v{version}", "httpfs.duckdb_extension")
            if os.path.exists(path):
                return f"LOAD {sql_string(path)}"
    except Exception:  # not installed, or laid out otherwise: DuckDB's own way
        pass
    return "LOAD httpfs"


def _duckdb_error(stderr):
    """The error line of a Python traceback from DuckDB, with the network cause if given."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    error = next((line.split(": ", 1)[1] for line in reversed(lines)
                  if "Exception: " in line), _tail(stderr, 1))
    cause = next((line for line in lines if line.startswith("For more info") and "(ERROR" in line),
                 "")
    if cause:
        error += ": " + cause[cause.index("(ERROR") + 7:].rstrip(")")
    return error[:300]


class ChDB(InProcess):
    name, label, package = "chdb", "chDB", "chdb"

    def s3_view(self, name, key, s3, files=False):
        """The s3() table function (path-style URL, credentials inline); globs in the key."""
        columns = "*, _path, _file" if files else "*"
        source = (f"s3({sql_string(s3.http_url(key))}, {sql_string(s3.access_key)}, "
                  f"{sql_string(s3.secret_key)}, 'Parquet')")
        return [f"CREATE VIEW {name} AS SELECT {columns} FROM {source}"]

    def view(self, name, glob, hive=(), files=False):
        columns = "*, _path, _file" if files else "*"
        settings = ["SET use_hive_partitioning = 1"] if hive else []
        return settings + [f"CREATE VIEW {name} AS SELECT {columns} "
                           f"FROM file({sql_string(glob)}, Parquet)"]


class DataFusion(InProcess):
    name, label, package = "datafusion", "DataFusion", "datafusion"

    def s3_view(self, name, key, s3, files=False):
        """An AmazonS3 object store registered for s3://bucket; a glob becomes the folder above
        its first wildcard (every object under it: the scenario's keys hold nothing else)."""
        if any(c in key for c in "*?[{"):
            key = _folder_of(key) + "/"
        return [RegisterS3(s3)] + self.view(name, s3.s3_url(key), files=files)

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

    The Lambda executor is not an engine here: scenario `lambda` (benches/scenarios/lambda.py)
    measures it at 1, 2, 4 and 8 workers under cargo-lambda's emulator.
    """
    makers = {
        "quiver": lambda: Quiver(quiver_bin, timeout),
        "quiver-fragments": lambda: Quiver(quiver_bin, timeout, executor="fragments"),
        "duckdb": lambda: DuckDB(timeout),
        "chdb": lambda: ChDB(timeout),
        "datafusion": lambda: DataFusion(timeout),
    }
    return [makers[n]() for n in names + ([REFERENCE] if REFERENCE not in names else [])]
