"""The local S3 server for scenario s3: MinIO, the data in a bucket, and the counting proxy.

MinIO (scripts/minio.sh, through tests/servers/minio.py) serves 127.0.0.1:PORT; the data is
uploaded straight to it with boto3 (an object is skipped when it already holds the same file:
size and mtime are kept in its metadata). Engines reach MinIO only through
tests/servers/s3_proxy.py, run as a child process: it adds `latency` before each request and
caps each connection at `bandwidth` bytes per second, so that a request costs about what it
costs against real S3, and it counts every request by its S3 API (GetObject, HeadObject,
ListObjectsV2, ...) with the bytes it sent. Counter (picklable: the in-process engines' workers
call it between runs) resets and reads those counts through the proxy's control endpoint.

Only loopback addresses are used: MinIO binds to 127.0.0.1, the proxy refuses any other
upstream.
"""
import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import servers.minio

from benches import data
from benches.engines import S3Endpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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

    def stall(self, share, seconds):
        """From now on each GET, with chance `share`, stalls for `seconds` (see s3_proxy)."""
        self._get(f"fail?status=stall&count=1000000&share={share}&seconds={seconds}")

    def stalls_met(self):
        """GETs given a fault since the reset."""
        return self._get("stats")["faults_taken"]

    def stalled_closed(self):
        """Stalled GETs the proxy has closed since the reset (logged with status 0)."""
        return sum(1 for r in self._get("stats")["requests"] if r["status"] == 0)


class MinIO(servers.minio.MinIO):
    """The shared wrapper of scripts/minio.sh (tests/servers/minio.py) on 127.0.0.1:port, with
    ServerError for its failures and what the scenarios need of the server."""

    def start(self):
        """Installs MinIO if missing (go install, about 8 minutes), then starts it."""
        try:
            self.install()
            return super().start()
        except servers.minio.MinIOError as e:
            raise ServerError(f"{e.what}: {e.output.strip()[-500:]}") from None

    def bucket_files(self, bucket):
        """MinIO's files holding the bucket's objects (evicted before a cold run)."""
        folder = os.path.join(self.data_dir, bucket)
        return [os.path.join(d, name) for d, _, names in os.walk(folder) for name in names]

    def endpoint_for(self, url, bucket):
        """An S3Endpoint with this server's credentials, reached at `url` (the proxy)."""
        return S3Endpoint(url, bucket, self.access_key, self.secret_key, self.region)

    def client(self):
        return super().client(max_pool_connections=16, retries={"max_attempts": 3})

    def stop(self):
        try:
            super().stop()
        except servers.minio.MinIOError as e:
            raise ServerError(str(e)) from None


def upload(client, bucket, files):
    """Puts each local file at its key ({key: path}); skips objects already holding that file
    (same size and mtime, kept as object metadata). Returns the number uploaded."""
    from boto3.s3.transfer import TransferConfig

    servers.minio.ensure_bucket(client, bucket)
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

    def __init__(self, upstream, latency, bandwidth, log, line=0.0):
        self.upstream, self.latency, self.bandwidth, self.log = upstream, latency, bandwidth, log
        self.line = line
        self.proc = None
        self.url = None

    def start(self):
        """Starts it; its standard error (tracebacks of dropped connections) goes to `log`."""
        args = [sys.executable, PROXY_SCRIPT, "--upstream", self.upstream, "--port", "0",
                "--delay", str(self.latency), "--bandwidth", str(self.bandwidth / 1e6),
                "--line", str(self.line / 1e6)]
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


@contextlib.contextmanager
def bucket_behind_proxy(options, objects, scenario):
    """MinIO (on the options' port) holding `objects` ({key: local path}) in BUCKET, and the
    counting proxy in front of it at the options' latency and bandwidth, for the scenarios
    over S3: yields (minio, proxy, endpoint), the endpoint reaching the bucket through the
    proxy; both are stopped after. Raises ServerError when either cannot be set up."""
    minio, proxy = MinIO(options.minio_port), None
    try:
        minio.start()
        uploaded = upload(minio.client(), BUCKET, objects)
        print(f"  {scenario}: {len(objects)} objects in s3://{BUCKET} on {minio.endpoint} "
              f"({uploaded} uploaded now)", flush=True)
        proxy = Proxy(minio.endpoint, options.s3_latency / 1e3, options.s3_bandwidth * 1e6,
                      os.path.join(data.ROOT, "s3-proxy.log")).start()
        yield minio, proxy, minio.endpoint_for(proxy.url, BUCKET)
    finally:
        if proxy is not None:
            proxy.stop()
        minio.stop()
