"""A Lambda function URL in front of cargo-lambda's emulator, as AWS serves one with
`AWS_IAM` auth and a CORS configuration (infra/url.tf): the emulator itself checks no
signature and answers no preflight, and a page needs both.

- `OPTIONS`: a preflight from an allowed origin gets the allowed methods and headers;
  from any other origin, no CORS header (the browser refuses the call).
- Any other request must carry a SigV4 signature for the `lambda` service by one of `keys`
  (access key id to secret), over a body whose SHA-256 it names; otherwise `403` with the
  message AWS gives. A signed request goes on to the coordinator's URL on the emulator, and
  its answer comes back with the CORS headers AWS adds (`x-quiver-metrics` exposed).
"""
import hashlib
import hmac
import threading
import urllib.error
import urllib.parse
import urllib.request

from .common import BaseHandler, LoopbackServer, free_port

ALLOW_HEADERS = "authorization, content-type, x-amz-content-sha256, x-amz-date, x-amz-security-token"
EXPOSE_HEADERS = "x-quiver-metrics"


class _Kept(urllib.request.HTTPRedirectHandler):
    """A `303` goes back to the caller as it is."""

    def redirect_request(self, *args, **kwargs):
        return None


LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}), _Kept())
MISMATCH = ("The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.")


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signature_problem(method, path, query, headers, body, keys):
    """Why the request's SigV4 signature is not good (None when it is)."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "Forbidden"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key_id, date, region, service, _ = fields["Credential"].split("/")
    if key_id not in keys:
        return "The security token included in the request is invalid."
    if service != "lambda":
        return f"Credential should be scoped to correct service: 'lambda', not '{service}'."
    digest = hashlib.sha256(body).hexdigest()
    if headers.get("x-amz-content-sha256", digest) != digest:
        return "The provided 'x-amz-content-sha256' header does not match what was computed."
    signed = fields["SignedHeaders"].split(";")
    canonical = "\n".join([
        method,
        urllib.parse.quote(path),
        "&".join(sorted(query.split("&"))) if query else "",
        "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed),
        fields["SignedHeaders"],
        digest,
    ])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + keys[key_id]).encode()
    for part in (date, region, service, "aws4_request"):
        key = _hmac(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, fields["Signature"]) else MISMATCH


class FunctionUrl:
    """The front on 127.0.0.1:<a free port>: `origins` may call it (`*`: any), `keys` may
    sign."""

    def __init__(self, emulator_url, keys, origins, function="coordinator"):
        self.target = f"{emulator_url}/lambda-url/{function}"
        self.keys, self.origins = dict(keys), set(origins)
        self.port = free_port()
        self.server = self.thread = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def start(self):
        front = self

        class Handler(BaseHandler):
            def allowed(self):
                origin = self.headers.get("Origin")
                return origin is not None and (origin in front.origins or "*" in front.origins)

            def cors(self):
                origin = self.headers.get("Origin")
                if self.allowed():
                    self.send_header("Access-Control-Allow-Origin", origin)
                    self.send_header("Access-Control-Expose-Headers", EXPOSE_HEADERS)
                    self.send_header("Vary", "Origin")

            def do_OPTIONS(self):
                self.discard_body()
                self.send_response(200)
                if self.allowed():
                    self.cors()
                    self.send_header("Access-Control-Allow-Methods", "GET, POST")
                    self.send_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
                    self.send_header("Access-Control-Max-Age", "3600")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self.forward()

            def do_POST(self):
                self.forward()

            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path, query = self.split_path()
                headers = {name.lower(): value for name, value in self.headers.items()}
                problem = signature_problem(self.command, path, query, headers, body, front.keys)
                if problem:
                    return self.answer(403, {"content-type": "application/json"},
                                       ('{"Message":"%s"}' % problem).encode())
                request = urllib.request.Request(front.target + self.path, data=body or None,
                                                 method=self.command,
                                                 headers={"content-type": "application/json"})
                try:
                    with LOOPBACK.open(request, timeout=900) as response:
                        status, answer, data = response.status, response.headers, response.read()
                except urllib.error.HTTPError as e:
                    status, answer, data = e.code, e.headers, e.read()
                kept = {name: answer[name] for name in ("content-type", "location",
                                                        "x-quiver-metrics") if answer.get(name)}
                self.answer(status, kept, data)

            def answer(self, status, headers, data):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.cors()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = LoopbackServer(self.port, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
