"""Shared pytest fixtures.

`quiver` runs the binary under test (see harness.py). `tpch_data` generates TPC-H once per
session and `oracle` gives DuckDB's answers on it. For remote reads: `minio` (a real MinIO on
loopback, via scripts/minio.sh), `s3` (a bucket holding the TPC-H single and many layouts and
small files, reached through a counting proxy) and `http_server` (a range-capable static
server over the same data). Servers started here stop at the end of the session.
"""
import hashlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import duckdb
import pytest

from harness import REPO, Quiver, quiver_bin
from tpch.tables import prelude, query_sql

SF = os.environ.get("QUIVER_TPCH_SF", "0.1")
MINIO_SCRIPT = os.path.join(REPO, "scripts", "minio.sh")
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


@dataclass
class MinIO:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"


def _minio_script(*args, timeout):
    try:
        return subprocess.run([MINIO_SCRIPT, *args], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"scripts/minio.sh {' '.join(args)} took more than {timeout} s",
                    pytrace=False)
        raise e


@pytest.fixture(scope="session")
def minio():
    """MinIO on 127.0.0.1:$QUIVER_MINIO_PORT (default 9000), installed if missing. Fails (never
    skips) when it cannot be installed or started. Stopped at the end only if started here."""
    install = _minio_script("install", timeout=1800)
    if install.returncode != 0:
        pytest.fail("MinIO is needed for the S3 tests and could not be installed "
                    f"(scripts/minio.sh install):\n{install.stderr}{install.stdout}",
                    pytrace=False)
    start = _minio_script("start", MINIO_PORT, timeout=120)
    if start.returncode != 0:
        pytest.fail(f"MinIO did not start (scripts/minio.sh start {MINIO_PORT}):\n"
                    f"{start.stderr}{start.stdout}", pytrace=False)
    endpoint = start.stdout.strip().splitlines()[-1]
    variables = {}
    for word in shlex.split(_minio_script("env", MINIO_PORT, timeout=30).stdout):
        name, _, value = word.partition("=")
        variables[name] = value
    started_here = "already running" not in start.stderr
    yield MinIO(endpoint, variables["AWS_ACCESS_KEY_ID"], variables["AWS_SECRET_ACCESS_KEY"],
                variables.get("AWS_REGION", "us-east-1"))
    if started_here:
        _minio_script("stop", MINIO_PORT, timeout=60)


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
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.minio.endpoint if direct else self.proxy.url,
            aws_access_key_id=self.minio.access_key,
            aws_secret_access_key=self.minio.secret_key, region_name=self.minio.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))


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


def _md5(path):
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def upload_tree(client, bucket, local_root, prefix):
    """Puts every file under local_root at prefix/<relative path>, skipping objects that
    already hold the same bytes (single-part ETag = MD5)."""
    for folder, _, names in os.walk(local_root):
        for name in sorted(names):
            if not name.endswith(".parquet"):
                continue
            path = os.path.join(folder, name)
            key = prefix + os.path.relpath(path, local_root).replace(os.sep, "/")
            try:
                etag = client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
            except client.exceptions.ClientError:
                etag = None
            if etag != _md5(path):
                with open(path, "rb") as f:
                    client.put_object(Bucket=bucket, Key=key, Body=f.read())


@pytest.fixture(scope="session")
def s3(minio, tpch_data, tmp_path_factory):
    """The bucket, through a counting proxy: tpch/single/, tpch/many/ (uploaded through the
    proxy with boto3) and small/. Counts are reset before it is handed out."""
    from servers.s3_proxy import S3Proxy

    proxy = S3Proxy(minio.endpoint).start()
    try:
        s3 = S3(minio, proxy)
        client = s3.client()
        try:
            client.head_bucket(Bucket=BUCKET)
        except client.exceptions.ClientError:
            client.create_bucket(Bucket=BUCKET)
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
