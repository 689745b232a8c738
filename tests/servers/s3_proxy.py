#!/usr/bin/env python3
"""A counting reverse proxy in front of an S3-compatible server (MinIO), for remote-read tests.

Requests are forwarded unchanged: same method, raw path and query, and headers, including the
Host header as the client sent it, so SigV4 signatures (which cover Host) still verify
upstream. Only hop-by-hop headers (Connection, Transfer-Encoding, Expect...) are handled here.
Response bodies are streamed; client and upstream connections are kept alive.

Every request is counted by its S3 API, path-style (`/bucket/key`): GetObject (GET on a key,
with or without Range), HeadObject, ListObjectsV2 (GET on a bucket with list-type=2),
PutObject, plus ListObjects, HeadBucket, CreateBucket, DeleteObject, Multipart, Other.
Faults default to GetObject and answer S3 error XML (503 is SlowDown). `delay` (seconds)
is added before each forwarded request; `bandwidth` (bytes per second, 0 = no cap) paces each
answer's body, so each client connection gets at most that (S3 serves one connection at a few
tens of MB/s). The benchmarks (benches/scenarios/s3.py) set both, so that a request costs about
what it costs against real S3. `line` (bytes per second, 0 = no cap) is shared by all
connections at once: a laptop's link, which more connections do not widen.
Controls: see common.py (`/__quiver__/stats`, `/reset`, `/fail`, `/config`);
`/__quiver__/config?bandwidth=50e6` sets the cap here too.

    python3 tests/servers/s3_proxy.py --upstream http://127.0.0.1:9000 [--port N] [--delay S]
                                      [--bandwidth MB_PER_S] [--line MB_PER_S]

--port 0 picks a free port; the first line printed names the proxy's URL.

In tests: `proxy = S3Proxy("http://127.0.0.1:9000").start()`, `proxy.url`, `proxy.control`.
"""
import argparse
import http.client
import os
import sys
import threading
import time
import urllib.parse
import uuid

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import CONTROL_PREFIX, BaseHandler, Control, LoopbackServer, ServerThread
else:
    from .common import CONTROL_PREFIX, BaseHandler, Control, LoopbackServer, ServerThread

CHUNK = 1 << 16
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
              "trailer", "upgrade", "expect"}
S3_ERRORS = {400: "BadRequest", 403: "AccessDenied", 404: "NoSuchKey", 412: "PreconditionFailed",
             429: "SlowDown", 500: "InternalError", 502: "BadGateway", 503: "SlowDown",
             504: "GatewayTimeout"}
S3_MESSAGES = {"SlowDown": "Please reduce your request rate.",
               "InternalError": "We encountered an internal error, please try again."}


def s3_kind(method, path, query):
    """The S3 API a path-style request calls."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return "ListBuckets" if method == "GET" else "Other"
    if "uploads" in params or "uploadId" in params:
        return "Multipart"
    if not key:
        if method == "POST" and "delete" in params:
            return "DeleteObjects"
        if method == "GET":
            if params.get("list-type") == ["2"]:
                return "ListObjectsV2"
            if set(params) <= {"prefix", "delimiter", "marker", "max-keys", "encoding-type"}:
                return "ListObjects"
            return "Other"
        return {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(
            method, "Other")
    if params and method in ("GET", "PUT", "HEAD"):
        # ?tagging, ?acl, ?versionId... are not plain object reads/writes
        if set(params) - {"versionId", "partNumber", "x-id"}:
            return "Other"
    return {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject",
            "DELETE": "DeleteObject"}.get(method, "Other")


class ProxyControl(Control):
    """Control with a per-connection bandwidth cap (bytes per second; 0 = none)."""

    def __init__(self, default_fail_kind, delay=0.0, bandwidth=0.0, line=0.0):
        super().__init__(default_fail_kind, delay)
        self.bandwidth = float(bandwidth)
        self.line = Line(float(line))

    def answer(self, handler, path, query):
        name = path[len(CONTROL_PREFIX):].strip("/")
        if name != "config":
            return super().answer(handler, path, query)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        if "bandwidth" in params:
            try:
                value = float(params["bandwidth"])
            except ValueError as e:
                return 400, {"error": str(e)}
            if value < 0:
                return 400, {"error": "bandwidth must be 0 (no cap) or more bytes per second"}
            self.bandwidth = value
        status, body = super().answer(handler, path, query)
        if status == 200:
            body["bandwidth"] = self.bandwidth
        return status, body


class Pacer:
    """Holds a body's writes to `rate` bytes per second (rate 0: no pacing), and to the
    `line` shared by every connection."""

    def __init__(self, rate, line=None):
        self.rate, self.line = rate, line
        self.start = time.monotonic()
        self.sent = 0

    def wrote(self, nbytes):
        if self.line is not None:
            self.line.wrote(nbytes)
        if self.rate <= 0:
            return
        self.sent += nbytes
        ahead = self.start + self.sent / self.rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


class Line:
    """A link all connections share at `rate` bytes per second (0: no cap): each chunk
    takes its turn, so two connections get half each."""

    def __init__(self, rate):
        self.rate = rate
        self.free_at = 0.0
        self.lock = threading.Lock()

    def wrote(self, nbytes):
        if self.rate <= 0:
            return
        with self.lock:
            now = time.monotonic()
            self.free_at = max(self.free_at, now) + nbytes / self.rate
            ahead = self.free_at - now
        time.sleep(ahead)


def error_xml(code, message, resource):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><Resource>{resource}</Resource>"
            f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>")


class Handler(BaseHandler):
    upstream = None  # the upstream connection of this client connection

    def do_GET(self):
        self.forward()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def finish(self):
        super().finish()
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def forward(self):
        if self.handle_control():
            return
        path, query = self.split_path()
        kind = s3_kind(self.command, path, query)
        body = self.read_body()
        range_header = self.headers.get("Range")
        fault = self.control.take_fault(kind)
        if fault == "reset":
            self.control.record(self.command, kind, path, range_header, 0, 0)
            self.reset_connection()
            return
        stall = fault == "stall"
        if fault is not None and not stall:
            code = S3_ERRORS.get(fault, "InternalError")
            xml = error_xml(code, S3_MESSAGES.get(code, f"injected failure {fault}"), path)
            self.control.run_hooks({"method": self.command, "kind": kind, "path": path,
                                    "status": fault})
            self.send_small(fault, xml, "application/xml")
            self.control.record(self.command, kind, path, range_header, fault, 0)
            return
        self.control.wait()
        try:
            response = self.send_upstream(body)
        except (OSError, http.client.HTTPException) as e:
            if self.upstream is not None:
                self.upstream.close()
                self.upstream = None
            xml = error_xml("BadGateway", f"upstream {self.server.upstream}: {e}", path)
            self.send_small(502, xml, "application/xml")
            self.control.record(self.command, kind, path, range_header, 502, 0)
            return
        with response:
            self.relay(response, kind, path, range_header, stall)

    def send_upstream(self, body):
        """Sends this request upstream (reconnecting once if a kept-alive connection went
        stale) and returns the response."""
        for attempt in (0, 1):
            if self.upstream is None:
                host, port = self.server.upstream_address
                self.upstream = http.client.HTTPConnection(host, port, timeout=120)
            try:
                conn = self.upstream
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        conn.putheader(name, value)
                if body or self.command in ("PUT", "POST") or "Content-Length" in self.headers:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                return conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.BadStatusLine):
                self.upstream.close()
                self.upstream = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def relay(self, response, kind, path, range_header, stall=False):
        """Streams the upstream answer to the client; `stall`: after half of the first chunk,
        nothing for the control's stall_seconds, then the connection is closed (a stalled
        one)."""
        headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        no_body = self.command == "HEAD" or response.status in (204, 304) or \
            100 <= response.status < 200
        length = response.getheader("Content-Length")
        buffered = None
        if self.control.has_hooks():
            # A hook may rewrite the object: take the answer first, so it is the old version.
            buffered = b"" if no_body else response.read()
            self.control.run_hooks({"method": self.command, "kind": kind, "path": path,
                                    "status": response.status})
        self.send_response_only(response.status, response.reason)
        for name, value in headers:
            self.send_header(name, value)
        chunked = not no_body and length is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        control = self.control
        pacer = Pacer(getattr(control, "bandwidth", 0.0), getattr(control, "line", None))
        try:
            if not no_body:
                source = (buffered[i:i + CHUNK] for i in range(0, len(buffered), CHUNK)) \
                    if buffered is not None else iter(lambda: response.read(CHUNK), b"")
                for chunk in source:
                    if not chunk:
                        continue
                    if stall:  # half of the first chunk, never the whole body
                        chunk = chunk[:max(1, len(chunk) // 2)]
                    if chunked:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    else:
                        self.wfile.write(chunk)
                    sent += len(chunk)
                    pacer.wrote(len(chunk))
                    if stall:
                        self.wfile.flush()
                        time.sleep(self.control.stall_seconds)
                        self.control.record(self.command, kind, path, range_header, 0, 0)
                        self.upstream.close()
                        self.upstream = None
                        self.reset_connection()
                        return
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
        except BaseException:
            # the upstream answer was not read to its end: that connection is unusable
            self.upstream.close()
            self.upstream = None
            raise
        if response.will_close:
            self.upstream.close()
            self.upstream = None
        ok = 200 <= response.status < 300
        self.control.record(self.command, kind, path, range_header, response.status,
                            sent if ok else 0)


class S3Proxy(ServerThread):
    """Forwards 127.0.0.1:`port` (0 picks a free port) to `upstream` in a daemon thread;
    `delay` seconds before each request, answers paced to `bandwidth` bytes per second per
    connection and to `line` bytes per second over all (0: no cap)."""

    def __init__(self, upstream, port=0, delay=0.0, verbose=False, bandwidth=0.0, line=0.0):
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"upstream must be http:// on loopback, not {upstream}")
        handler = type("S3ProxyHandler", (Handler,), {"verbose": verbose})
        server = LoopbackServer(port, handler)
        server.upstream = upstream
        server.upstream_address = (parsed.hostname, parsed.port or 80)
        server.control = ProxyControl("GetObject", delay, bandwidth, line)
        super().__init__(server)
        self.upstream = upstream
        self.control = server.control


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:9000")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each request")
    parser.add_argument("--bandwidth", type=float, default=0.0, metavar="MB_PER_S",
                        help="cap each connection's answers at this many MB (10^6 bytes) per "
                             "second (default 0: no cap)")
    parser.add_argument("--line", type=float, default=0.0, metavar="MB_PER_S",
                        help="cap all answers together at this many MB per second, as a "
                             "laptop's link does (default 0: no cap)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.bandwidth < 0 or args.line < 0:
        parser.error("--bandwidth and --line must be 0 (no cap) or more")
    proxy = S3Proxy(args.upstream, args.port, args.delay, args.verbose, args.bandwidth * 1e6,
                    args.line * 1e6)
    print(f"s3_proxy: {proxy.url} -> {args.upstream} (stats at {proxy.url}/__quiver__/stats)",
          flush=True)
    try:
        proxy.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
