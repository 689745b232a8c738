"""Apache Iceberg tables read with iceberg_scan, iceberg_snapshots and iceberg_metadata, end
to end: quiver's answers are those of DuckDB 1.4.4's iceberg extension (iceberg_duckdb.py, a
venv of its own) and of pyiceberg, on small tables pyiceberg writes once per session
(iceberg_tables.py: day() and bucket() partitions, an overwrite and a delete, a renamed,
promoted and added column, hand-made position and equality delete files).

It shows that quiver reads the current snapshot of every table as both do (position and
equality deletes applied, old files read by field id), travels in time by snapshot id and by
timestamp (with the schema of that snapshot), prunes manifests by their partitions and data
files by the manifests' column bounds before reading any footer, counts from the metadata
alone, lists snapshots and manifest entries as DuckDB does, refuses what it cannot read (not
a table, no such snapshot, an unknown option, a damaged manifest) with a clear error rather
than a wrong answer, reads a table moved to S3 (MinIO) with allow_moved_paths, and, in a
warehouse pyiceberg writes on MinIO, reads one data file of 1,000 for a filter that keeps one
(GETs counted by the proxy).

Quiver is given the table folder (it finds the newest metadata file), DuckDB the metadata
file itself (it finds none without unsafe_enable_version_guessing). Values are compared as
text in one form (iceberg_duckdb.canonical: NULL '', floats by repr, timestamps with a space).
"""
import datetime
import os
import re
import shutil
import urllib.parse
import uuid
from dataclasses import dataclass

import pytest

import iceberg_duckdb
from conftest import BUCKET, upload_folder
from harness import parse_csv
from iceberg_duckdb import canonical_rows, cell_text

CURRENT_TABLES = ["events", "bucketed", "evolved", "posdeletes", "eqdeletes"]
ONE_DAY = "ts >= TIMESTAMP '2024-01-05' AND ts < TIMESTAMP '2024-01-06'"


@dataclass
class Tables:
    root: str
    info: dict  # iceberg_tables.make_tables's answer

    def folder(self, name):
        """The table's folder as a local path (what quiver is given)."""
        return self.info[name]["location"].removeprefix("file://")

    def scans(self, name, *options):
        """(quiver's, DuckDB's) iceberg_scan call for table `name` with named `options`
        written quiver's way (`snapshot_from_id => 1`)."""
        extra = "".join(f", {o}" for o in options)
        return (f"iceberg_scan('{self.folder(name)}'{extra})",
                f"iceberg_scan('{self.info[name]['metadata_location']}'"
                f"{extra.replace(' => ', ' = ')})")

    def snapshots(self, name):
        return self.info[name]["snapshots"]


@pytest.fixture(scope="session")
def tables(iceberg_tables):
    return Tables(*iceberg_tables)


def duckdb_results(statements):
    """DuckDB's results of `statements`; fails on any error."""
    try:
        results = iceberg_duckdb.run(statements)
    except iceberg_duckdb.VenvError as e:
        pytest.fail(str(e), pytrace=False)
    for sql, result in zip(statements, results):
        assert "error" not in result, f"DuckDB failed on {sql}:\n{result['error']}"
    return results


def ours(quiver, sql, *args, **kwargs):
    """quiver's (header, rows in canonical text) for `sql`."""
    header, rows = quiver.csv(sql, *args, **kwargs)
    return header, canonical_rows(rows)


def theirs(result):
    return canonical_rows(result["rows"])


def pyiceberg_rows(tables, name, snapshot_id=None):
    """pyiceberg's rows of table `name` (current snapshot unless given), ordered by id."""
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(tables.info[name]["metadata_location"])
    data = table.scan(snapshot_id=snapshot_id).to_arrow().sort_by("id")
    return data.column_names, canonical_rows(
        [[cell_text(v) for v in row.values()] for row in data.to_pylist()])


def described(rows):
    """(column_name, column_type) of DESCRIBE's rows."""
    return [tuple(r[:2]) for r in rows]


# a. the current snapshot of every table


@pytest.mark.parametrize("name", CURRENT_TABLES)
def test_current_snapshot_reads_as_duckdb_and_pyiceberg(quiver, tables, name):
    q, d = tables.scans(name)
    star, star_d = [f"SELECT * FROM {s} ORDER BY id" for s in (q, d)]
    describe, describe_d = [f"DESCRIBE SELECT * FROM {s}" for s in (q, d)]
    count, count_d = [f"SELECT count(*), sum(id) FROM {s}" for s in (q, d)]
    duck_star, duck_describe, duck_count = duckdb_results([star_d, describe_d, count_d])

    header, rows = ours(quiver, star)
    assert header == duck_star["columns"]
    assert rows == theirs(duck_star), f"{star}: quiver and DuckDB differ"
    assert described(ours(quiver, describe)[1]) == described(theirs(duck_describe))
    # count(*) is not answered from the manifests' record counts (deletes would be missed).
    assert ours(quiver, count)[1] == theirs(duck_count)
    if name == "eqdeletes":
        # pyiceberg 0.12 refuses equality deletes; DuckDB's answer is the reference (1000
        # rows less the 334 ids divisible by 3).
        assert ours(quiver, count)[1] == [["666", "332667"]]
        return
    py_header, py_rows = pyiceberg_rows(tables, name)
    assert (header, rows) == (py_header, py_rows), f"{star}: quiver and pyiceberg differ"
    info = tables.info[name]
    assert ours(quiver, count)[1] == [[str(info["rows"]), str(info["sum_id"])]]


# b. time travel


@pytest.mark.parametrize("name", ["events", "evolved"])
def test_every_snapshot_by_id_reads_as_duckdb_and_pyiceberg(quiver, tables, name):
    snapshots = tables.snapshots(name)
    queries = [[f"SELECT count(*), sum(id) FROM {s}"
                for s in tables.scans(name, f"snapshot_from_id => {snap['snapshot_id']}")]
               for snap in snapshots]
    duck = duckdb_results([d for _, d in queries])
    for (sql, _), result, snap in zip(queries, duck, snapshots):
        expected = [[str(snap["rows"]), str(snap["sum_id"])]]  # pyiceberg's
        assert ours(quiver, sql)[1] == theirs(result) == expected, sql


def test_a_time_between_two_snapshots_reads_the_earlier(quiver, tables):
    first, second = tables.snapshots("events")[:2]
    middle_ms = (first["timestamp_ms"] + second["timestamp_ms"]) // 2
    assert first["timestamp_ms"] < middle_ms < second["timestamp_ms"]
    utc = datetime.datetime.fromtimestamp(middle_ms / 1000, datetime.timezone.utc)
    literal = utc.replace(tzinfo=None).isoformat(sep=" ", timespec="milliseconds")
    sql, sql_d = [f"SELECT count(*), sum(id) FROM {s}" for s in
                  tables.scans("events", f"snapshot_from_timestamp => TIMESTAMP '{literal}'")]
    (duck,) = duckdb_results([sql_d])
    expected = [[str(first["rows"]), str(first["sum_id"])]]
    assert ours(quiver, sql)[1] == theirs(duck) == expected, sql


def test_the_first_snapshot_of_the_evolved_table_has_its_old_schema(quiver, tables):
    first = tables.snapshots("evolved")[0]
    q, d = tables.scans("evolved", f"snapshot_from_id => {first['snapshot_id']}")
    duck_describe, duck_star = duckdb_results(
        [f"DESCRIBE SELECT * FROM {d}", f"SELECT * FROM {d} ORDER BY id"])
    columns = described(ours(quiver, f"DESCRIBE SELECT * FROM {q}")[1])
    assert columns == described(theirs(duck_describe))
    assert columns == [("id", "BIGINT"), ("name", "VARCHAR"), ("qty", "INTEGER"),
                       ("value", "DOUBLE")]
    header, rows = ours(quiver, f"SELECT * FROM {q} ORDER BY id")
    assert (header, rows) == (duck_star["columns"], theirs(duck_star))
    assert (header, rows) == pyiceberg_rows(tables, "evolved", first["snapshot_id"])


# c. a renamed column, read by field id in the files written before the rename


def test_renamed_column_reads_the_names_written_before_the_rename(quiver, tables):
    q, d = [f"SELECT id, full_name, qty, note FROM {s} WHERE id < 5 OR id > 297 ORDER BY id"
            for s in tables.scans("evolved")]
    (duck,) = duckdb_results([d])
    header, rows = ours(quiver, q)
    assert (header, rows) == (duck["columns"], theirs(duck))
    assert [r[1] for r in rows] == ["n0", "n1", "n2", "n3", "n4", "n298", "n299"]


# d. pruning by the manifest list's partition summaries, then the manifests' column bounds


def files_line(stderr):
    """(read, pruned, pruned by the index) of --profile's `files:` line."""
    m = re.search(r"^files: (\d+) read, (\d+) pruned \((\d+) of them by the index", stderr,
                  re.M)
    assert m, f"no files line in --profile's output:\n{stderr}"
    return tuple(int(g) for g in m.groups())


def manifests_line(stderr):
    """(read, pruned) of --profile's `manifests:` line."""
    m = re.search(r"^manifests: (\d+) read, (\d+) pruned by their partitions", stderr, re.M)
    assert m, f"no manifests line in --profile's output:\n{stderr}"
    return tuple(int(g) for g in m.groups())


def test_a_one_day_filter_reads_only_that_days_files(quiver, tables):
    q, d = [f"SELECT count(*), sum(id), min(ts), max(ts) FROM {s} WHERE {ONE_DAY}"
            for s in tables.scans("events")]
    metadata = tables.info["events"]["metadata_location"]
    duck, day_files, all_files = duckdb_results([
        d,
        f"SELECT count(*) FROM iceberg_metadata('{metadata}') "
        f"WHERE status <> 'DELETED' AND file_path LIKE '%/ts_day=2024-01-05/%'",
        f"SELECT count(*) FROM iceberg_metadata('{metadata}') WHERE status <> 'DELETED'"])
    proc = quiver.run("query", "--profile", "--format", "csv", q)
    assert proc.returncode == 0, proc.stderr
    assert canonical_rows(parse_csv(proc.stdout)[1]) == theirs(duck)
    read, pruned, by_index = files_line(proc.stderr)
    (day,), (total,) = day_files["rows"][0], all_files["rows"][0]
    # Manifests whose day() summaries miss the day are never read; of the files listed in
    # the others, the bounds rule out all but the day's before any footer is read.
    manifests_read, manifests_pruned = manifests_line(proc.stderr)
    assert manifests_pruned > 0 and manifests_read > 0, proc.stderr
    assert read == int(day) and read + pruned < int(total), proc.stderr
    assert by_index == pruned > 0, proc.stderr


def test_a_count_without_deletes_is_answered_from_the_metadata_alone(quiver, tables):
    q, d = [f"SELECT count(*) FROM {s}" for s in tables.scans("events")]
    (duck,) = duckdb_results([d])
    proc = quiver.run("query", "--profile", "--format", "csv", q)
    assert proc.returncode == 0, proc.stderr
    assert canonical_rows(parse_csv(proc.stdout)[1]) == theirs(duck)
    # The metadata file and the manifest list: no manifest, no footer.
    assert files_line(proc.stderr) == (0, 0, 0), proc.stderr
    assert "manifests:" not in proc.stderr, proc.stderr
    assert re.search(r"^requests: 2 \(0 for footers", proc.stderr, re.M), proc.stderr


# e. iceberg_snapshots and iceberg_metadata


def test_iceberg_snapshots_as_duckdb(quiver, tables):
    folder, metadata = tables.folder("events"), tables.info["events"]["metadata_location"]
    duck_describe, duck = duckdb_results([
        f"DESCRIBE SELECT * FROM iceberg_snapshots('{metadata}')",
        f"SELECT * FROM iceberg_snapshots('{metadata}')"])
    _, columns = ours(quiver, f"DESCRIBE SELECT * FROM iceberg_snapshots('{folder}')")
    assert described(columns) == described(theirs(duck_describe))
    header, rows = ours(quiver, f"SELECT * FROM iceberg_snapshots('{folder}')")
    assert header == duck["columns"]
    assert sorted(rows) == sorted(theirs(duck))
    assert sorted(int(r[1]) for r in rows) == sorted(
        s["snapshot_id"] for s in tables.snapshots("events"))


@pytest.mark.parametrize("name", ["events", "posdeletes", "eqdeletes"])
def test_iceberg_metadata_as_duckdb(quiver, tables, name):
    folder, metadata = tables.folder(name), tables.info[name]["metadata_location"]
    duck_describe, duck = duckdb_results([
        f"DESCRIBE SELECT * FROM iceberg_metadata('{metadata}')",
        # DuckDB also lists the entries DELETED by the current snapshot; quiver live ones.
        f"SELECT * FROM iceberg_metadata('{metadata}') WHERE status <> 'DELETED'"])
    _, columns = ours(quiver, f"DESCRIBE SELECT * FROM iceberg_metadata('{folder}')")
    assert described(columns) == described(theirs(duck_describe))
    header, rows = ours(quiver, f"SELECT * FROM iceberg_metadata('{folder}')")
    assert header == duck["columns"]
    assert sorted(rows) == sorted(theirs(duck))
    kinds = {"events": {"EXISTING"}, "posdeletes": {"EXISTING", "POSITION_DELETES"},
             "eqdeletes": {"EXISTING", "EQUALITY_DELETES"}}[name]
    assert {r[header.index("content")] for r in rows} == kinds


# f. errors


def damaged_table(tables, tmp_path):
    """A copy of the events table with every manifest cut short (which of them the current
    snapshot lists varies with pyiceberg's names); its folder."""
    copy = tmp_path / "events"
    shutil.copytree(tables.folder("events"), copy)
    for manifest in (copy / "metadata").glob("*-m*.avro"):
        manifest.write_bytes(manifest.read_bytes()[:200])
    return str(copy)


def error_cases(tables, tmp_path):
    events = tables.folder("events")
    damaged = damaged_table(tables, tmp_path)
    return {
        "not a table": (f"SELECT * FROM iceberg_scan('{os.path.dirname(events)}')",
                        r"not an Iceberg table"),
        "no such snapshot": (f"SELECT count(*) FROM iceberg_scan('{events}', "
                             f"snapshot_from_id => 12345)", r"no snapshot 12345"),
        "an unknown option": (f"SELECT * FROM iceberg_scan('{events}', snapshot => 1)",
                              r"unknown option 'snapshot'"),
        # Read with the paths the metadata holds, rewritten to the copy's.
        "a damaged manifest": (f"SELECT * FROM iceberg_scan('{damaged}', "
                               f"allow_moved_paths => true)",
                               re.escape(damaged) + r"/metadata/[^ ]*-m\d+\.avro: the Avro data "
                               r"ends too early"),
    }


@pytest.mark.parametrize("case", ["not a table", "no such snapshot", "an unknown option",
                                  "a damaged manifest"])
def test_what_cannot_be_read_is_a_clear_error(quiver, tables, case, tmp_path):
    sql, message = error_cases(tables, tmp_path)[case]
    proc = quiver.run("query", "--format", "csv", sql)  # (run fails on a panic)
    assert proc.returncode != 0 and proc.stdout == "", (
        f"{sql}: expected an error, got exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    assert proc.stderr.startswith("error: ") and re.search(message, proc.stderr), proc.stderr


# g. a table moved to S3


def test_a_table_moved_to_s3_reads_with_allow_moved_paths(quiver, tables, minio):
    from servers.minio import ensure_bucket

    client = minio.client()
    ensure_bucket(client, BUCKET)
    # A prefix of this run's own: a table folder holding the metadata files of two tables
    # would be read as the one whose file sorts last.
    folder, prefix = tables.folder("events"), f"iceberg/{uuid.uuid4().hex}/events"
    upload_folder(client, BUCKET, folder, prefix)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key,
               AWS_REGION=minio.region, AWS_ENDPOINT_URL=minio.endpoint,
               AWS_EC2_METADATA_DISABLED="true")
    # The manifests name the data files by their local file:// paths: with the local table
    # moved aside, a right answer can only come from the S3 copy.
    first = tables.snapshots("events")[0]
    cases = [((), tables.info["events"]),
             ((f"snapshot_from_id => {first['snapshot_id']}",), first)]
    local = [ours(quiver, f"SELECT count(*), sum(id) FROM {tables.scans('events', *o)[0]}")[1]
             for o, _ in cases]
    os.rename(folder, folder + ".aside")
    try:
        for (options, expected), local_rows in zip(cases, local):
            extra = "".join(f", {o}" for o in options)
            sql = (f"SELECT count(*), sum(id) FROM iceberg_scan('s3://{BUCKET}/{prefix}', "
                   f"allow_moved_paths => true{extra})")
            _, rows = ours(quiver, sql, env=env)
            assert rows == local_rows == [[str(expected["rows"]), str(expected["sum_id"])]], sql
    finally:
        os.rename(folder + ".aside", folder)
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                      Prefix=prefix + "/"):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=BUCKET, Key=item["Key"])


# h. 1% of 1,000 data files, in a warehouse pyiceberg writes on MinIO


def test_a_filter_keeping_one_of_a_thousand_files_reads_no_other_file(quiver, s3, tmp_path):
    """GETs counted by the proxy in front of MinIO: the metadata, the manifest list, the one
    manifest and the one data file the bounds keep; no footer of the other 999."""
    import iceberg_tables

    minio = s3.minio
    warehouse = s3.url(f"iceberg/{uuid.uuid4().hex}")
    location = iceberg_tables.make_wide_table(warehouse, tmp_path, {
        "s3.endpoint": minio.endpoint, "s3.access-key-id": minio.access_key,
        "s3.secret-access-key": minio.secret_key, "s3.region": minio.region})
    s3.control.reset()
    header, rows = quiver.csv(f"SELECT count(*) AS n, sum(v) AS s FROM iceberg_scan("
                              f"'{location}') WHERE k = 500", env=s3.env())
    assert (header, rows) == (["n", "s"], [["5", str(5 * 5000 + 0 + 1 + 2 + 3 + 4)]])
    gets = [urllib.parse.unquote(r["path"]) for r in s3.control.stats()["requests"]
            if r["kind"] == "GetObject"]
    data = {path for path in gets if path.endswith(".parquet")}
    assert len(data) == 1 and "/k=500/" in data.pop(), gets
    # metadata.json, the manifest list, the manifest, the file's footer and its bytes.
    assert len(gets) <= 5, gets
