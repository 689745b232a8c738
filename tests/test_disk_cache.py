"""The disk cache: remote bytes one `quiver` process fetched are read by the next from disk.

Every other test runs with the cache off (conftest.py sets QUIVER_DISK_CACHE_BYTES=0); these
turn it on in a folder of their own and count the data GETs the server sees.
"""
import os
import re
import subprocess

import pytest

from harness import TIMEOUT, parse_csv
from test_remote import (THREADS, profile, remote, s3_remote, two_column_sql,  # noqa: F401
                         versions)

MIB = 1 << 20


def cached(remote, folder, bound=256 * MIB):
    """`remote`'s environment with a disk cache of `bound` bytes in `folder` (the default
    cache folder: conftest.py's QUIVER_CACHE_DIR is not set here)."""
    env = {**remote.quiver.env, "QUIVER_DISK_CACHE_BYTES": str(bound),
           "XDG_CACHE_HOME": str(folder)}
    env.pop("QUIVER_CACHE_DIR", None)
    return env


def run(remote, env, sql):
    proc = remote.quiver.run("query", "--format", "csv", "--threads", THREADS, "--profile", sql,
                             env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def disk_hits(stderr):
    m = re.search(r"disk cache hits: (\d+) \((\d+) bytes\)", stderr)
    assert m, stderr
    return int(m[1]), int(m[2])


def pieces(folder):
    """The cache's piece files under `folder` (the XDG cache home): path -> size. The
    measured rates (`rates.json`, kept beside the pieces) are not a piece."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".part") and name != "rates.json":
                path = os.path.join(root, name)
                found[path] = os.path.getsize(path)
    return found


def test_a_second_process_makes_no_data_get(remote, tmp_path):
    env, sql = cached(remote, tmp_path), two_column_sql(remote)
    first = run(remote, env, sql)
    assert len(remote.gets()) > 0 and disk_hits(first.stderr) == (0, 0)
    remote.control.reset()
    second = run(remote, env, sql)
    assert second.stdout == first.stdout
    assert remote.gets() == [], "the second process fetched what the first kept"
    p = profile(second.stderr)
    assert (p.requests, p.bytes_read) == (0, 0), second.stderr
    hits, hit_bytes = disk_hits(second.stderr)
    assert hits > 0 and hit_bytes >= p.bytes_planned > 0, second.stderr


def test_a_rewritten_object_is_read_again_not_served_from_disk(request, s3_remote, tmp_path):
    remote, name = s3_remote, "changing/disk-cache.parquet"
    (tmp_path / "files").mkdir()
    rewrite = versions(request, remote, name, tmp_path / "files")
    env = cached(remote, tmp_path / "cache")
    sql = f"SELECT sum(id) AS s FROM '{remote.url(name)}'"
    assert parse_csv(run(remote, env, sql).stdout)[1] == [[str(sum(range(100_000)))]]
    rewrite()
    remote.control.reset()
    assert parse_csv(run(remote, env, sql).stdout)[1] == [[str(sum(range(200_000)))]]
    assert len(remote.gets()) > 0


def test_a_truncated_cache_file_is_a_miss_and_the_answer_stays_right(s3_remote, tmp_path):
    remote, sql = s3_remote, two_column_sql(s3_remote)
    env = cached(remote, tmp_path)
    first = run(remote, env, sql)
    kept = pieces(tmp_path)
    assert kept
    for path, size in kept.items():
        os.truncate(path, size // 2)
    remote.control.reset()
    second = run(remote, env, sql)
    assert second.stdout == first.stdout
    assert disk_hits(second.stderr) == (0, 0)
    assert len(remote.gets()) > 0
    # Read again, then kept again whole.
    remote.control.reset()
    assert run(remote, env, sql).stdout == first.stdout
    assert remote.gets() == []


def test_two_processes_filling_it_at_once_keep_one_copy(s3_remote, tmp_path):
    remote, sql = s3_remote, two_column_sql(s3_remote)
    args = [remote.quiver.path, "query", "--format", "csv", "--threads", THREADS, sql]
    alone = run(remote, cached(remote, tmp_path / "alone"), sql)
    env = cached(remote, tmp_path / "shared")
    both = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    for proc in both:
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
        assert out == alone.stdout
    assert sum(pieces(tmp_path / "shared").values()) == sum(pieces(tmp_path / "alone").values())
    remote.control.reset()
    assert run(remote, env, sql).stdout == alone.stdout
    assert remote.gets() == []


def test_a_cache_over_its_bound_evicts(s3_remote, tmp_path):
    remote = s3_remote
    sql = (f"SELECT max(l_comment) AS c, sum(l_quantity) AS q "
           f"FROM '{remote.url('tpch/single/lineitem.parquet')}'")
    bound = 2 * MIB
    read = profile(run(remote, cached(remote, tmp_path, bound), sql).stderr).bytes_read
    assert read > 2 * bound, "the query must read more than the bound"
    assert 0 < sum(pieces(tmp_path).values()) <= bound


def test_it_is_off_with_zero(s3_remote, tmp_path):
    remote, sql = s3_remote, two_column_sql(s3_remote)
    run(remote, cached(remote, tmp_path, 0), sql)
    assert pieces(tmp_path) == {}


def test_quiver_cache_shows_and_clears_it(s3_remote, tmp_path):
    remote, sql = s3_remote, two_column_sql(s3_remote)
    env = cached(remote, tmp_path)
    run(remote, env, sql)
    held = sum(pieces(tmp_path).values())
    show = remote.quiver.run("cache", "show", env=env)
    assert show.returncode == 0 and f"({held} bytes) held" in show.stdout, show.stdout
    clear = remote.quiver.run("cache", "clear", env=env)
    assert clear.returncode == 0 and f"({held} bytes) freed" in clear.stdout, clear.stdout
    assert pieces(tmp_path) == {}
    remote.control.reset()
    run(remote, env, sql)
    assert len(remote.gets()) > 0, "a cleared cache served a GET"
