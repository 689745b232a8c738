"""What the test servers share: request counting, fault injection, hooks and the control
endpoints, a threaded HTTP/1.1 server that binds to loopback only, and free loopback ports.

Control endpoints (GET or POST; the prefix cannot collide with an S3 bucket name, which may not
contain '_', nor with a file name a test serves):

    /__quiver__/stats                      JSON: counts and bytes per request kind, the log
    /__quiver__/reset                      zero the counts, clear the log and pending faults
    /__quiver__/fail?status=503&count=2    the next 2 requests of the default kind (data GETs)
                    [&kind=HeadObject]     fail with that status; status=reset closes the
                                           connection without an answer; status=stall
                    [&seconds=15]          sends the headers and a first chunk, then nothing
                                           for that long, then closes the connection
                    [&after=N]             lets N such requests through first
                    [&share=0.05]          hits each such request with this chance (seeded),
                                           while `count` lasts
    /__quiver__/config?delay=0.05          wait this many seconds before answering each request

In-process users (pytest fixtures) call the same things as methods of `Control`.
"""
import json
import random
import socket
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTROL_PREFIX = "/__quiver__/"
MAX_LOG = 20_000


class Control:
    """Counts, log, faults, delay and hooks of one server; every method is thread-safe."""

    def __init__(self, default_fail_kind, delay=0.0):
        self.default_fail_kind = default_fail_kind
        self.delay = delay
        self._lock = threading.Lock()
        self._hooks = []
        self.reset()

    # counting

    def reset(self):
        with self._lock:
            self._counts = {}
            self._bytes = {}
            self._methods = {}
            self._log = []
            self._faults = []  # [kind, status, remaining, to let through, share]
            self._faults_taken = 0
            self._random = random.Random(42)
            self.stall_seconds = 15.0

    def record(self, method, kind, path, range_header, status, nbytes):
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._bytes[kind] = self._bytes.get(kind, 0) + nbytes
            self._methods[method] = self._methods.get(method, 0) + 1
            if len(self._log) < MAX_LOG:
                self._log.append({"method": method, "kind": kind, "path": path,
                                  "range": range_header, "status": status, "bytes": nbytes})

    def stats(self):
        with self._lock:
            return {"counts": dict(self._counts), "bytes": dict(self._bytes),
                    "methods": dict(self._methods), "requests": list(self._log),
                    "faults_taken": self._faults_taken}

    def count(self, kind):
        with self._lock:
            return self._counts.get(kind, 0)

    # faults

    def fail(self, status=503, count=1, kind=None, after=0, share=1.0, seconds=None):
        """The next `count` requests of `kind` (after letting `after` through; each with
        chance `share`) answer `status`: an int, "reset", or "stall" for `seconds`."""
        status = status if status in ("reset", "stall") else int(status)
        with self._lock:
            if seconds is not None:
                self.stall_seconds = float(seconds)
            self._faults.append([kind or self.default_fail_kind, status, int(count), int(after),
                                 float(share)])

    def take_fault(self, kind):
        """The status to fail this request with, or None; uses up one pending fault."""
        with self._lock:
            for fault in self._faults:
                if fault[0] == kind and fault[2] > 0:
                    if fault[3] > 0:
                        fault[3] -= 1
                        return None
                    if fault[4] < 1.0 and self._random.random() >= fault[4]:
                        return None
                    fault[2] -= 1
                    self._faults_taken += 1
                    status = fault[1]
                    self._faults = [f for f in self._faults if f[2] > 0]
                    return status
        return None

    # hooks

    def add_hook(self, hook):
        """hook(info) runs for every counted request once its answer is decided and before it
        is sent (so a hook that rewrites a file is seen by every later request); info holds
        method, kind, path, status. A hook that returns True is removed."""
        with self._lock:
            self._hooks.append(hook)

    def has_hooks(self):
        with self._lock:
            return bool(self._hooks)

    def clear_hooks(self):
        with self._lock:
            self._hooks = []

    def run_hooks(self, info):
        with self._lock:
            hooks = list(self._hooks)
        for hook in hooks:
            if hook(info):
                with self._lock:
                    if hook in self._hooks:
                        self._hooks.remove(hook)

    def wait(self):
        if self.delay > 0:
            time.sleep(self.delay)

    # the HTTP side

    def answer(self, handler, path, query):
        """Serve a control request; returns (status, JSON-able body)."""
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        name = path[len(CONTROL_PREFIX):].strip("/")
        if name == "stats":
            return 200, self.stats()
        if name == "reset":
            self.reset()
            return 200, {"ok": True}
        if name == "fail":
            try:
                status = params.get("status", "503")
                self.fail(status if status in ("reset", "stall") else int(status),
                          int(params.get("count", "1")), params.get("kind"),
                          int(params.get("after", "0")), float(params.get("share", "1")),
                          params.get("seconds"))
            except ValueError as e:
                return 400, {"error": str(e)}
            return 200, {"ok": True}
        if name == "config":
            if "delay" in params:
                try:
                    self.delay = float(params["delay"])
                except ValueError as e:
                    return 400, {"error": str(e)}
            return 200, {"delay": self.delay}
        return 404, {"error": f"unknown control {name!r}: stats, reset, fail, config"}


def port_free(port):
    """True if 127.0.0.1:port can be bound now (nothing listens there)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port():
    """A port on 127.0.0.1 that the OS says is free now, for a server that another process
    will bind (an in-process server binds port 0 itself)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, port, handler):
        super().__init__(("127.0.0.1", port), handler)


class BaseHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; control paths answered here; quiet unless `verbose`."""

    protocol_version = "HTTP/1.1"
    server_version = "quiver-test"
    verbose = False

    @property
    def control(self):
        return self.server.control

    def log_message(self, format, *args):
        if self.verbose:
            super().log_message(format, *args)

    def split_path(self):
        parsed = urllib.parse.urlsplit(self.path)
        return parsed.path, parsed.query

    def handle_control(self):
        """True if this was a control request (answered)."""
        path, query = self.split_path()
        if not path.startswith(CONTROL_PREFIX):
            return False
        self.discard_body()
        status, body = self.control.answer(self, path, query)
        self.send_json(status, body)
        return True

    def discard_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_small(self, status, body, content_type="text/plain; charset=utf-8", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def reset_connection(self):
        """Close the connection at once, with no answer (an RST where the OS allows it)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass


class ServerThread:
    """Runs a LoopbackServer in a daemon thread; `url` is http://127.0.0.1:PORT."""

    def __init__(self, server):
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True)

    @property
    def port(self):
        return self.server.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
