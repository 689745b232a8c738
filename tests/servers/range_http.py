#!/usr/bin/env python3
"""A static file server for remote-read tests: what a plain web server (nginx with autoindex)
offers, plus request counts and fault injection. Standard library only; loopback only.

- Folders answer an HTML index page: one `<a href="name">` per file and `<a href="name/">`
  per sub-folder, plus a parent link as servers write it: index_style "nginx" (the default)
  writes `<a href="../">`, "apache" an absolute `<a href="/parent/">` and sort links
  (`?C=N;O=D`), "plain" (Python's http.server) none. A folder without its trailing slash
  redirects (301) to it.
- Files answer HEAD and GET with Content-Length, a strong ETag (from inode, size and mtime,
  as nginx does), Last-Modified and Accept-Ranges. GET honours one range (`bytes=a-b`,
  `bytes=a-`, `bytes=-n`) with 206 and Content-Range, 416 when unsatisfiable; several ranges
  get the whole file (200), as the RFC allows. If-Match (412), If-None-Match (304) and
  If-Range are honoured.
- Request kinds, as counted: GetFile (GET of a file, ranged or not), HeadFile, GetIndex
  (GET of a folder), Other. Faults default to GetFile. Controls: see common.py.
- Opt-in, for pages in a browser (`cors=True`, `--cors`): every answer allows any origin and
  exposes the headers a range reader needs (Content-Range, Content-Length, ETag, Accept-Ranges,
  Last-Modified), says `Cross-Origin-Resource-Policy: cross-origin` (so a cross-origin isolated
  page may load it), and OPTIONS answers preflights (204, methods GET/HEAD, the headers asked
  for). Without it OPTIONS is not implemented (501), as before. `cache_control` (e.g.
  "no-store") adds that header to file answers, so a browser's HTTP cache cannot serve a
  benchmark's second run.

    python3 tests/servers/range_http.py DIR [--port N] [--delay S] [--cors]
                                            [--cache-control VALUE] [--verbose]

In tests: `server = RangeHTTPServer(DIR).start()`, then `server.url`, `server.control`,
`server.stop()`.
"""
import argparse
import email.utils
import html
import os
import sys
import time
import urllib.parse

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import BaseHandler, Control, LoopbackServer, ServerThread
else:
    from .common import BaseHandler, Control, LoopbackServer, ServerThread

CHUNK = 1 << 16
# What a browser page may read from a cross-origin answer beyond the CORS-safelisted headers:
# a range reader needs the total size (Content-Range) and the validators.
CORS_EXPOSE = "Content-Range, Content-Length, ETag, Accept-Ranges, Last-Modified"
# Asked for in preflights by range readers; echoed when the browser names others.
CORS_ALLOW_HEADERS = "Range, If-Match, If-None-Match, If-Range, If-Modified-Since, Cache-Control"
# Preflight answers cached for 10 minutes: a query's hundreds of ranged GETs need one.
CORS_MAX_AGE = "600"


def etag_of(st):
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


def parse_range(header, size):
    """(start, end_exclusive) for one satisfiable range; None to serve the whole file
    (no header, several ranges, or a form we do not know); "unsatisfiable" for 416."""
    if not header:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if first == "":  # suffix: the last n bytes
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return max(0, size - n), size
        start = int(first)
        end = size - 1 if last == "" else min(int(last), size - 1)
    except ValueError:
        return None
    if start >= size or end < start:
        return "unsatisfiable"
    return start, end + 1


def etag_matches(header, etag):
    """Whether an If-Match / If-None-Match list names `etag` (or is `*`)."""
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or etag in tags or ("W/" + etag) in tags


class Handler(BaseHandler):
    index_style = "nginx"
    cors = False
    cache_control = None

    def end_headers(self):
        if self.cors:
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Expose-Headers", CORS_EXPOSE)
            self.send_header("Cross-Origin-Resource-Policy", "cross-origin")
        super().end_headers()

    def do_OPTIONS(self):
        if not self.cors:
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        self.discard_body()
        asked = self.headers.get("Access-Control-Request-Headers")
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", asked or CORS_ALLOW_HEADERS)
        self.send_header("Access-Control-Max-Age", CORS_MAX_AGE)
        self.send_header("Content-Length", "0")
        self.end_headers()
        path, _ = self.split_path()
        self.control.record(self.command, "Other", path, None, 204, 0)

    def do_GET(self):
        if not self.handle_control():
            self.serve()

    def do_HEAD(self):
        if not self.handle_control():
            self.serve()

    def do_POST(self):
        if not self.handle_control():
            self.discard_body()
            self.answer("Other", 405, "method not allowed\n")

    do_PUT = do_DELETE = do_POST

    def answer(self, kind, status, body, headers=(), info=None):
        """A small answer, counted and passed to the hooks."""
        path, _ = self.split_path()
        self.control.run_hooks({"method": self.command, "kind": kind, "path": path,
                                "status": status, **(info or {})})
        data = body.encode() if isinstance(body, str) else body
        self.send_small(status, data, "text/html; charset=utf-8" if kind == "GetIndex"
                        else "text/plain; charset=utf-8", headers)
        ok = 200 <= status < 300 and self.command != "HEAD"
        self.control.record(self.command, kind, path, self.headers.get("Range"), status,
                            len(data) if ok else 0)

    def resolve(self, url_path):
        """The file system path for a URL path; `..` cannot climb above the root (symbolic
        links inside the root are followed: tests link shared data into a served folder)."""
        parts = urllib.parse.unquote(url_path).split("/")
        if any(p == ".." for p in parts):
            return None
        return os.path.join(self.server.root, *[p for p in parts if p and p != "."])

    def serve(self):
        self.control.wait()
        url_path, _ = self.split_path()
        full = self.resolve(url_path)
        is_dir = full is not None and os.path.isdir(full)
        kind = "GetIndex" if is_dir and self.command == "GET" else (
            "HeadFile" if self.command == "HEAD" else "GetFile")
        fault = self.control.take_fault(kind)
        if fault == "reset":
            self.control.record(self.command, kind, url_path, self.headers.get("Range"), 0, 0)
            self.reset_connection()
            return
        stall = fault == "stall"
        if fault is not None and not stall:
            self.answer(kind, fault, f"injected failure: HTTP {fault}\n",
                        headers=[("Retry-After", "0")] if fault in (429, 503) else ())
            return
        if full is None or not os.path.exists(full):
            self.answer(kind, 404, f"not found: {url_path}\n")
            return
        if is_dir:
            if not url_path.endswith("/"):
                self.answer(kind, 301, "", headers=[("Location", url_path + "/")])
                return
            self.answer(kind, 200, self.index_page(url_path, full))
            return
        self.serve_file(kind, url_path, full, stall)

    def index_page(self, url_path, folder):
        title = html.escape(url_path)
        lines = [f"<!DOCTYPE html>\n<html><head><title>Index of {title}</title></head><body>",
                 f"<h1>Index of {title}</h1><hr><pre>"]
        if self.index_style == "nginx":
            lines.append('<a href="../">../</a>')
        elif self.index_style == "apache":
            parent = url_path.rstrip("/").rsplit("/", 1)[0] + "/"
            lines += ['<a href="?C=N;O=D">Name</a> <a href="?C=M;O=A">Last modified</a>',
                      f'<a href="{urllib.parse.quote(parent)}">Parent Directory</a>']
        for name in sorted(os.listdir(folder)):
            if os.path.isdir(os.path.join(folder, name)):
                name += "/"
            href = urllib.parse.quote(name)
            lines.append(f'<a href="{href}">{html.escape(name)}</a>')
        lines.append("</pre><hr></body></html>\n")
        return "\n".join(lines)

    def serve_file(self, kind, url_path, full, stall=False):
        """`stall`: after half of the first chunk, nothing for the control's stall_seconds,
        then the connection is closed (a stalled one, as the S3 proxy's)."""
        try:
            f = open(full, "rb")
        except OSError as e:
            self.answer(kind, 403, f"cannot open {url_path}: {e.strerror}\n")
            return
        with f:  # reads go through this descriptor: a hook may replace the file meanwhile
            st = os.fstat(f.fileno())
            size, etag = st.st_size, etag_of(st)
            validators = [("ETag", etag),
                          ("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True)),
                          ("Accept-Ranges", "bytes")]
            if self.cache_control:
                validators.append(("Cache-Control", self.cache_control))
            if_match = self.headers.get("If-Match")
            if if_match is not None and not etag_matches(if_match, etag):
                self.answer(kind, 412, "precondition failed: the file changed\n",
                            headers=validators)
                return
            if_none = self.headers.get("If-None-Match")
            if if_none is not None and etag_matches(if_none, etag):
                self.answer(kind, 304, "", headers=validators)
                return
            wanted = parse_range(self.headers.get("Range"), size)
            if_range = self.headers.get("If-Range")
            if if_range is not None and if_range.strip() != etag:
                wanted = None
            if wanted == "unsatisfiable":
                self.answer(kind, 416, "range not satisfiable\n",
                            headers=[("Content-Range", f"bytes */{size}")] + validators)
                return
            start, end = wanted if wanted else (0, size)
            status = 206 if wanted else 200
            self.control.run_hooks({"method": self.command, "kind": kind, "path": url_path,
                                    "status": status, "start": start, "end": end})
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start))
            if wanted:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            for name, value in validators:
                self.send_header(name, value)
            self.end_headers()
            sent = 0
            if self.command == "GET":
                f.seek(start)
                while sent < end - start:
                    chunk = f.read(min(CHUNK, end - start - sent))
                    if not chunk:
                        break
                    if stall:
                        self.wfile.write(chunk[:max(1, len(chunk) // 2)])
                        self.wfile.flush()
                        time.sleep(self.control.stall_seconds)
                        self.control.record(self.command, kind, url_path,
                                            self.headers.get("Range"), 0, 0)
                        self.reset_connection()
                        return
                    self.wfile.write(chunk)
                    sent += len(chunk)
            self.control.record(self.command, kind, url_path, self.headers.get("Range"), status,
                                sent)


class RangeHTTPServer(ServerThread):
    """Serves `root` on 127.0.0.1:`port` (0 picks a free port) in a daemon thread."""

    def __init__(self, root, port=0, delay=0.0, verbose=False, index_style="nginx", cors=False,
                 cache_control=None):
        assert index_style in ("nginx", "apache", "plain"), index_style
        handler = type("RangeHandler", (Handler,),
                       {"verbose": verbose, "index_style": index_style, "cors": cors,
                        "cache_control": cache_control})
        server = LoopbackServer(port, handler)
        server.root = os.path.realpath(root)
        server.control = Control("GetFile", delay)
        super().__init__(server)
        self.root = server.root
        self.control = server.control


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--index-style", choices=["nginx", "apache", "plain"], default="nginx")
    parser.add_argument("--cors", action="store_true",
                        help="answer browser pages of any origin (CORS, CORP, preflights)")
    parser.add_argument("--cache-control", default=None,
                        help="Cache-Control header of file answers (e.g. no-store)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    server = RangeHTTPServer(args.root, args.port, args.delay, args.verbose, args.index_style,
                             cors=args.cors, cache_control=args.cache_control)
    print(f"range_http: serving {server.root} on {server.url} "
          f"(stats at {server.url}/__quiver__/stats)", flush=True)
    try:
        server.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
