"""Shared pytest fixtures.

`quiver` runs the binary under test (see harness.py). `tpch_data` generates TPC-H once per
session and `oracle` gives DuckDB's answers on it. For remote reads: `minio` (a real MinIO on
loopback, via scripts/minio.sh and servers/minio.py), `s3` (a bucket holding the TPC-H single
and many layouts and small files, reached through a counting proxy) and `http_server` (a
range-capable static server over the same data). Servers started here stop at the end of the
session.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import duckdb
import pytest

from harness import REPO, Quiver, quiver_bin
from servers.minio import MinIO, MinIOError, ensure_bucket, upload_tree
from tpch.tables import prelude, query_sql

SF = os.environ.get("QUIVER_TPCH_SF", "0.1")

# The disk cache would serve a later test's GETs from an earlier one's: off, but where
# test_disk_cache.py turns it on in a folder of its own.
os.environ["QUIVER_DISK_CACHE_BYTES"] = "0"
# The measured rates (rates.json) are kept in a folder of this session's, not the user's.
os.environ["QUIVER_CACHE_DIR"] = tempfile.mkdtemp(prefix="quiver-test-cache-")
atexit.register(shutil.rmtree, os.environ["QUIVER_CACHE_DIR"], ignore_errors=True)
MINIO_PORT = os.environ.get("QUIVER_MINIO_PORT", "9000")
BUCKET = "quiver-test"
REMOTE_LAYOUTS = ["single", "many"]


@pytest.fixture(scope="session")
def quiver():
    path = quiver_bin()
    if not os.access(path, os.X_OK):
        pytest.fail(f"quiver binary not found at {path}: run `cargo build -p quiver-cli` "
                    f"or set QUIVER_BIN", pytrace=False)
    return Quiver(path)


# TPC-H


@pytest.fixture(scope="session")
def tpch_data():
    """The TPC-H folder (SF 0.1 unless QUIVER_TPCH_SF says otherwise; QUIVER_DATA moves it)."""
    root = os.environ.get("QUIVER_DATA",
                          os.path.expanduser(f"~/.cache/quiver-data/tpch-sf{SF}"))
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_tpch.py"), SF, root],
                   check=True)
    return root


class DuckDBOracle:
    """Expected results, one DuckDB connection per layout, each result computed once."""

    def __init__(self, root):
        self.root = root
        self.connections = {}
        self.results = {}

    def expected(self, layout, n):
        if (layout, n) not in self.results:
            if layout not in self.connections:
                con = duckdb.connect()
                con.execute(prelude(self.root, layout, "duckdb"))
                self.connections[layout] = con
            cur = self.connections[layout].execute(query_sql(n))
            rows = cur.fetchall()
            self.results[(layout, n)] = (len(cur.description), rows)
        return self.results[(layout, n)]


@pytest.fixture(scope="session")
def oracle(tpch_data):
    return DuckDBOracle(tpch_data)


# remote reads: MinIO, the S3 proxy, the HTTP server


@pytest.fixture(scope="session")
def minio():
    """MinIO on 127.0.0.1:$QUIVER_MINIO_PORT (default 9000), installed if missing. Fails (never
    skips) when it cannot be installed or started. Stopped at the end only if started here."""
    server = MinIO(MINIO_PORT)
    try:
        server.install()
        server.start()
    except MinIOError as e:
        pytest.fail(f"MinIO is needed for the S3 tests: {e}", pytrace=False)
    yield server
    server.stop()


@dataclass
class S3:
    """The test bucket, reached through `proxy` (an S3Proxy in front of MinIO). TPC-H is under
    tpch/{single,many}/, small files under small/."""
    minio: MinIO
    proxy: object
    bucket: str = BUCKET
    small: dict = field(default_factory=dict)

    @property
    def endpoint(self):
        return self.proxy.url

    @property
    def control(self):
        return self.proxy.control

    def url(self, key=""):
        return f"s3://{self.bucket}/{key}"

    def env(self, **overrides):
        """An environment for `quiver` that reaches the bucket through the proxy."""
        env = dict(os.environ)
        for name in list(env):
            if name.startswith("AWS_"):
                del env[name]
        env.update(AWS_ACCESS_KEY_ID=self.minio.access_key,
                   AWS_SECRET_ACCESS_KEY=self.minio.secret_key,
                   AWS_REGION=self.minio.region, AWS_ENDPOINT_URL=self.proxy.url,
                   AWS_EC2_METADATA_DISABLED="true")
        env.update(overrides)
        return env

    def client(self, direct=False):
        """A boto3 client, through the proxy or (direct=True) straight to MinIO."""
        return self.minio.client(None if direct else self.proxy.url,
                                 retries={"max_attempts": 2})


def small_files(folder):
    """Small Parquet files for the remote tests, written into `folder`; returns
    {relative path: sum of its `id` column}. small/ids-N.parquet hold ids N*1000..N*1000+999."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sums = {}
    for n in range(2):
        ids = list(range(n * 1000, n * 1000 + 1000))
        table = pa.table({"id": pa.array(ids, pa.int64()),
                          "name": [f"row {i}" for i in ids]})
        rel = f"small/ids-{n}.parquet"
        os.makedirs(os.path.join(folder, "small"), exist_ok=True)
        pq.write_table(table, os.path.join(folder, rel), row_group_size=250)
        sums[rel] = sum(ids)
    return sums


@pytest.fixture(scope="session")
def s3(minio, tpch_data, tmp_path_factory):
    """The bucket, through a counting proxy: tpch/single/, tpch/many/ (uploaded through the
    proxy with boto3) and small/. Counts are reset before it is handed out."""
    from servers.s3_proxy import S3Proxy

    proxy = S3Proxy(minio.endpoint).start()
    try:
        s3 = S3(minio, proxy)
        client = s3.client()
        ensure_bucket(client, BUCKET)
        for layout in REMOTE_LAYOUTS:
            upload_tree(client, BUCKET, os.path.join(tpch_data, layout), f"tpch/{layout}/")
        local = str(tmp_path_factory.mktemp("s3-small"))
        s3.small = small_files(local)
        upload_tree(client, BUCKET, local, "")
        proxy.control.reset()
        yield s3
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def http_server(tpch_data, tmp_path_factory):
    """A RangeHTTPServer over a folder holding tpch/{single,many} (links to the TPC-H data)
    and small/; `http_server.folder` is that folder, which tests may add files to."""
    from servers.range_http import RangeHTTPServer

    folder = str(tmp_path_factory.mktemp("http-root"))
    os.makedirs(os.path.join(folder, "tpch"))
    for layout in REMOTE_LAYOUTS:
        os.symlink(os.path.join(tpch_data, layout), os.path.join(folder, "tpch", layout))
    small = small_files(folder)
    server = RangeHTTPServer(folder).start()
    server.folder = folder
    server.small = small
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def iceberg_tables(tmp_path_factory):
    """The Iceberg tables of iceberg_tables.py, written once by pyiceberg: (their root
    folder, each table's location, metadata file and snapshots by name)."""
    try:
        import iceberg_tables as tables
    except ImportError as e:
        pytest.fail(f"pyiceberg 0.12.0 is needed to write the Iceberg tables ({e}): "
                    f"run scripts/setup.sh", pytrace=False)
    root = tmp_path_factory.mktemp("iceberg")
    return str(root), tables.make_tables(root)


def upload_folder(client, bucket, folder, prefix):
    """Every file under `folder` (an Iceberg table's, any kind) at `prefix`/<relative path>."""
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as f:
                key = f"{prefix}/{os.path.relpath(path, folder)}"
                client.put_object(Bucket=bucket, Key=key, Body=f.read())
