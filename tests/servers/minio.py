"""MinIO on loopback through scripts/minio.sh, and putting files in a bucket.

One wrapper for the pytest fixtures (tests/conftest.py), the browser tests' fixtures
(tests/browser/fixtures.py) and the benchmarks (benches/objectstore.py), so that all three
install, start, read the keys of and stop the server alike. Each turns MinIOError into its own
way of failing (pytest.fail, a RuntimeError, the benchmarks' ServerError).
"""
import hashlib
import os
import shlex
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "minio.sh")


class MinIOError(Exception):
    """scripts/minio.sh failed or took too long: `what` says which call, `output` what it
    printed (stderr then stdout; empty for a timeout)."""

    def __init__(self, what, output=""):
        super().__init__(f"{what}:\n{output}" if output else what)
        self.what, self.output = what, output


class MinIO:
    """scripts/minio.sh's server on 127.0.0.1:port. start() reuses a server that minio.sh
    started there before; stop() stops it only if start() started it."""

    def __init__(self, port):
        self.port = int(port)
        self.endpoint = None
        self.env = {}  # the AWS_* variables of `scripts/minio.sh env`
        self.started_here = False

    def script(self, *args, timeout):
        """scripts/minio.sh ARGS (the port is not added); MinIOError when it times out."""
        try:
            return subprocess.run([SCRIPT, *args], capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise MinIOError(f"scripts/minio.sh {' '.join(args)} took more than {timeout} s") \
                from None

    def install(self):
        """Installs MinIO if missing (go install, about 8 minutes on 2 cores)."""
        install = self.script("install", timeout=1800)
        if install.returncode != 0:
            raise MinIOError("MinIO could not be installed (scripts/minio.sh install)",
                             install.stderr + install.stdout)

    def start(self):
        """Starts the server (install() first if it may be missing); returns self."""
        start = self.script("start", str(self.port), timeout=120)
        if start.returncode != 0:
            raise MinIOError(f"MinIO did not start (scripts/minio.sh start {self.port})",
                             start.stderr + start.stdout)
        self.endpoint = start.stdout.strip().splitlines()[-1]
        self.started_here = "already running" not in start.stderr
        for word in shlex.split(self.script("env", str(self.port), timeout=30).stdout):
            name, _, value = word.partition("=")
            if name.startswith("AWS_"):
                self.env[name] = value
        return self

    @property
    def access_key(self):
        return self.env["AWS_ACCESS_KEY_ID"]

    @property
    def secret_key(self):
        return self.env["AWS_SECRET_ACCESS_KEY"]

    @property
    def region(self):
        return self.env.get("AWS_REGION", "us-east-1")

    @property
    def folder(self):
        """Everything minio.sh keeps for this port: data/, the pid file, the log."""
        base = os.environ.get("QUIVER_MINIO_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "quiver-minio")
        return os.path.join(base, str(self.port))

    @property
    def data_dir(self):
        """Where MinIO keeps its objects: data_dir/bucket/key/..."""
        return os.path.join(self.folder, "data")

    def client(self, endpoint=None, **config):
        """A boto3 S3 client with this server's keys, path-style, to `endpoint` (default:
        MinIO itself; a proxy in front of it otherwise); `config`: more botocore Config."""
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint,
                            aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region,
                            config=Config(s3={"addressing_style": "path"}, **config))

    def stop(self):
        if self.started_here:
            self.script("stop", str(self.port), timeout=60)
            self.started_here = False


def ensure_bucket(client, bucket):
    """Creates the bucket unless it exists."""
    try:
        client.head_bucket(Bucket=bucket)
    except client.exceptions.ClientError:
        client.create_bucket(Bucket=bucket)


def _md5(path):
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def upload_tree(client, bucket, local_root, prefix):
    """Puts every .parquet file under local_root at prefix/<relative path>, skipping objects
    that already hold the same bytes (single-part ETag = MD5). For the tests' small data; the
    benchmarks' large files go up by benches/objectstore.upload (size and mtime, multipart)."""
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
