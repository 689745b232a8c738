#!/usr/bin/env python3
"""The coordinator's own cost of fanning out, an input of the start-up model in docs/lambda.md.

A stub of the Lambda Invoke API on loopback answers every invocation at once with an empty
worker output, so what is timed is Quiver's side alone: dealing buckets, building and signing
N requests (AWS SDK, SigV4), sending them, and reading N answers. The stub is a threaded Python
server, so the numbers are an upper bound of the coordinator's cost per invocation.

    benches/fanout_overhead.py [--workers 100,250,500,1000] [--quiver PATH]

Needs a release build of the `quiver` command (default: $CARGO_TARGET_DIR/release/quiver). It
prints, per N, the time of the fan-out phase (`time execute` of --profile) and that time / N.
The query's answer is meaningless here (the workers return nothing); only the timing is used.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pyarrow.parquet as pq

EMPTY = json.dumps({"output": {"inline": ""}, "metrics": {
    "rows": 0, "buckets": 1, "requests": 0, "bytes_read": 0, "cache_hit_bytes": 0,
    "footer_requests": 0, "phases": []}}).encode()


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0
    lock = threading.Lock()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with Stub.lock:
            Stub.count += 1
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(EMPTY)))
        self.end_headers()
        self.wfile.write(EMPTY)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="100,250,500,1000")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/quiver-target"))
    parser.add_argument("--quiver", default=os.path.join(target, "release", "quiver"))
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as folder:
        # One tiny row group per bucket: as many buckets as the largest N.
        path = os.path.join(folder, "many-row-groups.parquet")
        pq.write_table(pa.table({"x": list(range(max(counts)))}), path, row_group_size=1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID="stub", AWS_SECRET_ACCESS_KEY="stub", AWS_REGION="us-east-1",
                   AWS_EC2_METADATA_DISABLED="true")
        print("| workers | fan-out (s) | per invocation (ms) |\n|---|---|---|")
        for n in counts:
            Stub.count = 0
            proc = subprocess.run(
                [args.quiver, "query", "--executor", "lambda", "--function", "worker",
                 "--lambda-endpoint", endpoint, "--workers", str(n), "--profile",
                 "--set", "quiver.min_bucket_bytes=0", "--set", "quiver.max_bucket_bytes=1",
                 "--set", f"lambda.max_workers={n}", "--set", f"lambda.tree_threshold={n}",
                 f"SELECT sum(x) FROM '{path}'"],
                capture_output=True, text=True, env=env, timeout=600)
            if proc.returncode != 0:
                sys.exit(f"quiver failed:\n{proc.stderr}")
            seconds = next(float(line.split(":")[1].split()[0]) / 1e3
                           for line in proc.stderr.splitlines()
                           if line.startswith("time execute"))
            assert Stub.count == n, f"{Stub.count} invocations for {n} workers"
            print(f"| {n} | {seconds:.3f} | {seconds / n * 1e3:.2f} |")
    server.shutdown()


if __name__ == "__main__":
    main()
