"""The local S3 server for scenario s3: MinIO, the data in a bucket, and the counting proxy.

MinIO (scripts/minio.sh) serves 127.0.0.1:PORT; the data is uploaded straight to it with boto3
(an object is skipped when it already holds the same file: size and mtime are kept in its
metadata). Engines reach MinIO only through tests/servers/s3_proxy.py, run as a child process:
it adds `latency` before each request and caps each connection at `bandwidth` bytes per
second, so that a request costs about what it costs against real S3, and it counts every
request by its S3 API (GetObject, HeadObject, ListObjectsV2, ...) with the bytes it sent.
Counter (picklable: the in-process engines' workers call it between runs) resets and reads
those counts through the proxy's control endpoint.

Only loopback addresses are used: MinIO binds to 127.0.0.1, the proxy refuses any other
upstream.
"""
import json
import os
import shlex
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from benches.engines import S3Endpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINIO_SCRIPT = os.path.join(REPO, "scripts", "minio.sh")
PROXY_SCRIPT = os.path.join(REPO, "tests", "servers", "s3_proxy.py")
BUCKET = "quiver-bench"


class ServerError(Exception):
    """MinIO or the proxy could not be set up; the message says why."""


class Counter:
    """Resets and reads the proxy's request counts (control URL: http://host:port/__quiver__)."""

    def __init__(self, control_url):
        self.control_url = control_url

    def _get(self, name):
        with urllib.request.urlopen(f"{self.control_url}/{name}", timeout=30) as response:
            return json.load(response)

    def reset(self):
        self._get("reset")

    def read(self):
        """{"counts": {kind: requests}, "bytes": {kind: body bytes sent}} since the reset."""
        stats = self._get("stats")
        return {"counts": stats["counts"], "bytes": stats["bytes"]}


class MinIO:
    """scripts/minio.sh's server on 127.0.0.1:port; stop() stops it only if start() started it."""

    def __init__(self, port):
        self.port = str(port)
        self.started_here = False
        self.endpoint = None
        self.env = {}

    def _script(self, *args, timeout=120):
        try:
            return subprocess.run([MINIO_SCRIPT, *args], capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServerError(f"scripts/minio.sh {' '.join(args)} took over {timeout} s") from None

    def start(self):
        """Installs MinIO if missing (go install, about 8 minutes), then starts it."""
        install = self._script("install", timeout=1800)
        if install.returncode != 0:
            raise ServerError(f"MinIO is missing and could not be installed (scripts/minio.sh "
                              f"install): {(install.stderr + install.stdout).strip()[-500:]}")
        start = self._script("start", self.port)
        if start.returncode != 0:
            raise ServerError(f"MinIO did not start (scripts/minio.sh start {self.port}): "
                              f"{(start.stderr + start.stdout).strip()[-500:]}")
        self.endpoint = start.stdout.strip().splitlines()[-1]
        self.started_here = "already running" not in start.stderr
        for word in shlex.split(self._script("env", self.port).stdout):
            name, _, value = word.partition("=")
            if name.startswith("AWS_"):
                self.env[name] = value
        return self

    @property
    def data_dir(self):
        """Where MinIO keeps its objects (as scripts/minio.sh sets it)."""
        base = os.environ.get("QUIVER_MINIO_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "quiver-minio")
        return os.path.join(base, self.port, "data")

    def bucket_files(self, bucket):
        """MinIO's files holding the bucket's objects (evicted before a cold run)."""
        folder = os.path.join(self.data_dir, bucket)
        return [os.path.join(d, name) for d, _, names in os.walk(folder) for name in names]

    def endpoint_for(self, url, bucket):
        """An S3Endpoint with this server's credentials, reached at `url` (the proxy)."""
        return S3Endpoint(url, bucket, self.env["AWS_ACCESS_KEY_ID"],
                          self.env["AWS_SECRET_ACCESS_KEY"], self.env.get("AWS_REGION", "us-east-1"))

    def client(self):
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint,
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
                            region_name=self.env.get("AWS_REGION", "us-east-1"),
                            config=Config(s3={"addressing_style": "path"},
                                          max_pool_connections=16,
                                          retries={"max_attempts": 3}))

    def stop(self):
        if self.started_here:
            self._script("stop", self.port, timeout=60)
            self.started_here = False


def upload(client, bucket, files):
    """Puts each local file at its key ({key: path}); skips objects already holding that file
    (same size and mtime, kept as object metadata). Returns the number uploaded."""
    from boto3.s3.transfer import TransferConfig

    try:
        client.head_bucket(Bucket=bucket)
    except client.exceptions.ClientError:
        client.create_bucket(Bucket=bucket)
    config = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)

    def put(item):
        key, path = item
        stamp = os.stat(path)
        source = f"{stamp.st_size}-{stamp.st_mtime_ns}"
        try:
            head = client.head_object(Bucket=bucket, Key=key)
            if head.get("Metadata", {}).get("source") == source:
                return 0
        except client.exceptions.ClientError:
            pass
        client.upload_file(path, bucket, key, ExtraArgs={"Metadata": {"source": source}},
                           Config=config)
        return 1

    with ThreadPoolExecutor(8) as pool:
        return sum(pool.map(put, sorted(files.items())))


class Proxy:
    """tests/servers/s3_proxy.py in a child process, in front of `upstream`."""

    def __init__(self, upstream, latency, bandwidth, log):
        self.upstream, self.latency, self.bandwidth, self.log = upstream, latency, bandwidth, log
        self.proc = None
        self.url = None

    def start(self):
        """Starts it; its standard error (tracebacks of dropped connections) goes to `log`."""
        args = [sys.executable, PROXY_SCRIPT, "--upstream", self.upstream, "--port", "0",
                "--delay", str(self.latency), "--bandwidth", str(self.bandwidth / 1e6)]
        os.makedirs(os.path.dirname(self.log), exist_ok=True)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("s3_proxy: http://"):
            self.stop()
            with open(self.log) as f:
                raise ServerError(f"the S3 proxy did not start: {line.strip()} "
                                  f"{f.read().strip()[-300:]}")
        self.url = line.split()[1]
        return self

    @property
    def counter(self):
        return Counter(f"{self.url}/__quiver__")

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
