#!/usr/bin/env python3
"""Run SQL on a Quiver deployment through its function URL, signed with SigV4.

    python3 infra/examples/query.py URL "SELECT count(*) FROM 's3://bucket/t/*.parquet'"
    python3 infra/examples/query.py URL --health

URL is the function_url output. Credentials and region come from the usual AWS chain
(environment, AWS_PROFILE, SSO, instance role); the region may also be given with
--region. Needs boto3 (pip install boto3). With function_url_auth_type = "NONE" the
signature is ignored.
"""
import argparse
import json
import re
import sys
import urllib.error
import urllib.request

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest


def region_of(url):
    """Function URLs look like https://ID.lambda-url.REGION.on.aws/."""
    match = re.search(r"\.lambda-url\.([a-z0-9-]+)\.on\.aws", url)
    return match.group(1) if match else None


def signed_request(url, method, body, region, session):
    headers = {"content-type": "application/json"} if body is not None else {}
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    credentials = session.get_credentials()
    if credentials is None:
        sys.exit("no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID, ...)")
    # Function URLs are signed for the service "lambda".
    SigV4Auth(credentials.get_frozen_credentials(), "lambda", region).add_auth(request)
    prepared = request.prepare()
    return urllib.request.Request(prepared.url, data=prepared.body, method=method,
                                  headers=dict(prepared.headers))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the function_url output")
    parser.add_argument("sql", nargs="?", help="the query")
    parser.add_argument("--format", default="json", choices=["json", "csv", "arrow"])
    parser.add_argument("--health", action="store_true", help="GET /health instead")
    parser.add_argument("--region", help="default: from the URL, else the AWS config")
    args = parser.parse_args()
    if not args.health and not args.sql:
        parser.error("give the SQL to run, or --health")

    session = boto3.Session()
    region = args.region or region_of(args.url) or session.region_name
    if not region:
        parser.error("no region: give --region")
    base = args.url.rstrip("/")
    if args.health:
        request = signed_request(base + "/health", "GET", None, region, session)
    else:
        body = json.dumps({"sql": args.sql, "format": args.format}).encode()
        request = signed_request(base + "/query", "POST", body, region, session)
    try:
        with NO_REDIRECTS.open(request) as response:
            sys.stdout.buffer.write(response.read())
    except urllib.error.HTTPError as error:
        if error.code != 303:
            sys.stderr.write(f"HTTP {error.code}: {error.read().decode(errors='replace')}\n")
            sys.exit(1)
        # An answer over 6 MB waits in S3 behind a presigned URL: fetched without our
        # signature, which S3 would refuse beside its own.
        with urllib.request.urlopen(error.headers["location"]) as response:
            sys.stdout.buffer.write(response.read())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


NO_REDIRECTS = urllib.request.build_opener(_NoRedirect)


if __name__ == "__main__":
    main()
