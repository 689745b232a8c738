"""cargo-lambda's emulator (`cargo lambda watch`) serving lambda/'s functions on loopback.

One process wrapper for tests/test_lambda.py and benches/scenarios/lambda.py: the command, the
port, its log, requests to its Invoke API and function URLs, and stopping it with every
function instance it started. What each adds (waiting until the functions are built, what to
send) stays with them.
"""
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request

from .common import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAMBDA_DIR = os.path.join(REPO, "lambda")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The emulator is on loopback: never through an HTTP proxy from the environment.
LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LambdaEmulator:
    """`cargo lambda watch` on 127.0.0.1:<a free port>, serving `worker` and `coordinator`.

    env: the emulator's environment, which its functions inherit; QUIVER_LAMBDA_ENDPOINT is set
    to the emulator itself, so that the coordinator invokes its workers there. release: build
    the functions in release (the benchmarks) rather than debug (the tests). memory_mb: the
    functions' memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, which the emulator sets to 4096
    unless told, overriding the environment); nothing enforces it here."""

    def __init__(self, env, log_path, concurrency=8, release=False, memory_mb=None):
        self.port = free_port()
        self.env = dict(env, QUIVER_LAMBDA_ENDPOINT=self.url)
        self.log_path, self.concurrency, self.release = log_path, concurrency, release
        self.memory_mb = memory_mb
        self.args = self.proc = self.log_file = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, cargo="cargo"):
        """Starts it in its own process group, output to log_path; the functions are built by
        the first request to each."""
        self.args = [cargo, "lambda", "watch", *(["--release"] if self.release else []),
                     "--ignore-changes", "--invoke-address", "127.0.0.1",
                     "--invoke-port", str(self.port), "--concurrency", str(self.concurrency)]
        if self.memory_mb is not None:
            self.args += ["--env-var", f"AWS_LAMBDA_FUNCTION_MEMORY_SIZE={self.memory_mb}"]
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, cwd=LAMBDA_DIR, env=self.env, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        return self

    def request(self, method, path, body=None, timeout=None):
        """(status, headers, body bytes); an HTTP error status is an answer too."""
        request = urllib.request.Request(self.url + path, data=body, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with LOOPBACK.open(request, timeout=timeout) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def log_text(self, offset=0):
        """The log from `offset` on, colours removed ("" before it exists)."""
        try:
            with open(self.log_path, errors="replace") as f:
                f.seek(offset)
                return ANSI.sub("", f.read())
        except OSError:
            return ""

    def stop(self):
        """SIGTERM to the emulator's process group, SIGKILL after 30 s; then any of its
        descendants (function instances) still alive, by pid."""
        if self.proc is None:
            return
        family = _descendants(self.proc.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(30)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait()
        for pid, started in family:
            if _start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc = None
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None


def _stat(pid):
    """(ppid, start time) of a process from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[19]
    except (OSError, IndexError, ValueError):
        return None


def _start_time(pid):
    stat = _stat(pid)
    return stat[1] if stat else None


def _descendants(root):
    """[(pid, start time)] of every process under `root`."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat:
                children.setdefault(stat[0], []).append((int(name), stat[1]))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child[0])
    return found
