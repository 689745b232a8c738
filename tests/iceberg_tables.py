"""Small Apache Iceberg tables for tests/test_iceberg.py, written with pyiceberg 0.12.0.

    make_tables(folder) -> {table name: info}

writes a SQLite-backed SqlCatalog (folder/catalog.db) and the tables under
folder/warehouse/db/<name>, and returns per table (JSON-able):
    location            file:// URI of the table folder
    metadata_location   file:// URI of its current metadata.json
    current_snapshot_id
    snapshots           in commit order: snapshot_id, parent_snapshot_id, sequence_number,
                        timestamp_ms, operation, schema_id, and rows / sum_id as pyiceberg
                        reads that snapshot (None for the eqdeletes table, which pyiceberg
                        cannot read)
    rows, sum_id        the current snapshot's

The tables (all format v2; data values are a function of the id, snapshot ids and file names
are random):
  events      id long (required), ts timestamp, kind string, amount double (some NULL),
              day date; partitioned by day(ts). Three appends of 1000 rows (ts = 2024-01-01
              + 7 min * id, so ~15 days in all), an overwrite of the day 2024-01-03 by 100
              new rows (ids 10000..10099), then delete("id < 50"). Both rewrite files
              (copy-on-write): 6 snapshots.
  bucketed    id long, name string; partitioned by bucket(4, id); two appends of 500 rows.
  evolved     id, name string, qty int, value double; two appends of 100 rows; then
              name -> full_name, qty int -> long, a new column note; one more append.
              The first two files keep the old names and types (matched by field id).
  posdeletes  one append of 1000 rows, then a position delete file removing every 10th
              row (ids 0, 10, ..., 990): 900 rows left.
  eqdeletes   one append of 1000 rows, then an equality delete file on id removing the
              ids divisible by 3 (666 rows left, as DuckDB reads it).

posdeletes and eqdeletes are hand-made: pyiceberg 0.12 writes deletes copy-on-write only
(even with write.delete.mode=merge-on-read it rewrites the data files), so the delete file is
written with pyarrow and committed in a DELETES manifest through a small subclass of
pyiceberg's fast-append snapshot producer (private API, hence the pinned version).

Run as a script to write the tables somewhere and print the info:
    python3 tests/iceberg_tables.py FOLDER
"""
import datetime as dt
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, \
    ManifestWriterV2
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, DoubleType, IntegerType, ListType, LongType, \
    NestedField, StringType, StructType, TimestampType

NAMESPACE = "db"
TABLES = ["events", "bucketed", "evolved", "posdeletes", "eqdeletes"]
BASE_TS = dt.datetime(2024, 1, 1)
KINDS = ["click", "view", "buy", "refund"]

# The reserved field ids of a position delete file's columns (Iceberg spec).
POS_DELETE_FILE_PATH_ID = 2147483546
POS_DELETE_POS_ID = 2147483545


def make_tables(folder):
    """Writes the tables under `folder` (which should be empty); returns their info."""
    folder = os.path.abspath(folder)
    os.makedirs(os.path.join(folder, "warehouse"), exist_ok=True)
    catalog = SqlCatalog("default", uri=f"sqlite:///{folder}/catalog.db",
                         warehouse=f"file://{folder}/warehouse")
    catalog.create_namespace(NAMESPACE)
    builders = {"events": make_events, "bucketed": make_bucketed, "evolved": make_evolved,
                "posdeletes": make_posdeletes, "eqdeletes": make_eqdeletes}
    return {name: builders[name](catalog) for name in TABLES}


def make_wide_table(warehouse, catalog_folder, s3_properties, files=1000):
    """A table of `files` data files, one per value of `k` (an identity partition), 5 rows
    each, written by pyiceberg straight into `warehouse` (an s3:// URI with its FileIO's
    `s3_properties`: endpoint, keys, region). Returns its location."""
    import pyarrow as pa
    catalog = SqlCatalog("wide", uri=f"sqlite:///{catalog_folder}/wide.db",
                         warehouse=warehouse, **s3_properties)
    catalog.create_namespace(NAMESPACE)
    schema = Schema(NestedField(1, "k", IntegerType(), required=True),
                    NestedField(2, "v", LongType(), required=True))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000,
                                        transform=IdentityTransform(), name="k"))
    table = catalog.create_table(f"{NAMESPACE}.wide", schema=schema, partition_spec=spec)
    keys = [k for k in range(files) for _ in range(5)]
    table.append(pa.table({"k": pa.array(keys, pa.int32()),
                           "v": pa.array([k * 10 + i % 5 for i, k in enumerate(keys)],
                                         pa.int64())},
                          schema=table.schema().as_arrow()))
    return table.location()


def table_info(table, readable=True):
    """What the tests need to know of `table`; rows and sums are pyiceberg's answers."""
    table.refresh()

    def read(snapshot_id):
        if not readable:
            return {"rows": None, "sum_id": None}
        data = table.scan(snapshot_id=snapshot_id).to_arrow()
        return {"rows": data.num_rows, "sum_id": pc.sum(data["id"]).as_py()}

    snapshots = [{"snapshot_id": s.snapshot_id, "parent_snapshot_id": s.parent_snapshot_id,
                  "sequence_number": s.sequence_number, "timestamp_ms": s.timestamp_ms,
                  "operation": s.summary.operation.value, "schema_id": s.schema_id,
                  **read(s.snapshot_id)}
                 for s in table.metadata.snapshots]
    return {"location": table.location(), "metadata_location": table.metadata_location,
            "current_snapshot_id": table.metadata.current_snapshot_id,
            "snapshots": snapshots, **read(table.metadata.current_snapshot_id)}


# events: day(ts) partitions, appends, an overwrite and a delete

EVENTS_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "kind", StringType()),
    NestedField(4, "amount", DoubleType()),
    NestedField(5, "day", DateType()),
)
EVENTS_ARROW = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us")),
    pa.field("kind", pa.string()),
    pa.field("amount", pa.float64()),
    pa.field("day", pa.date32()),
])


def events_rows(ids, ts=None):
    """Rows for `ids`: ts = 2024-01-01 + 7 min * id unless given; every 97th amount NULL."""
    ts = ts or [BASE_TS + dt.timedelta(minutes=7 * i) for i in ids]
    return pa.Table.from_pydict({
        "id": list(ids),
        "ts": ts,
        "kind": [KINDS[i % 4] for i in ids],
        "amount": [None if i % 97 == 0 else round(i * 1.25 % 100, 2) for i in ids],
        "day": [t.date() for t in ts],
    }, schema=EVENTS_ARROW)


def make_events(catalog):
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(),
                                        name="ts_day"))
    table = catalog.create_table(f"{NAMESPACE}.events", schema=EVENTS_SCHEMA,
                                 partition_spec=spec)
    for batch in range(3):
        table.append(events_rows(range(batch * 1000, batch * 1000 + 1000)))
        # Snapshots some milliseconds apart, so that a time between two is easy to write.
        time.sleep(0.02)
    day = dt.datetime(2024, 1, 3)
    replacement = events_rows(range(10000, 10100),
                              ts=[day + dt.timedelta(minutes=10 * k) for k in range(100)])
    table.overwrite(replacement, overwrite_filter=And(
        GreaterThanOrEqual("ts", day.isoformat()),
        LessThan("ts", (day + dt.timedelta(days=1)).isoformat())))
    table.delete("id < 50")
    return table_info(table)


# bucketed: bucket(4, id) partitions


def make_bucketed(catalog):
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "name", StringType()))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000,
                                        transform=BucketTransform(4), name="id_bucket"))
    table = catalog.create_table(f"{NAMESPACE}.bucketed", schema=schema, partition_spec=spec)
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    for batch in range(2):
        ids = range(batch * 500, batch * 500 + 500)
        table.append(pa.Table.from_pydict(
            {"id": list(ids), "name": [f"name-{i}" for i in ids]}, schema=arrow))
    return table_info(table)


# evolved: a rename, a type promotion and an added column between appends


def make_evolved(catalog):
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "name", StringType()),
                    NestedField(3, "qty", IntegerType()),
                    NestedField(4, "value", DoubleType()))
    table = catalog.create_table(f"{NAMESPACE}.evolved", schema=schema)
    old = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                     pa.field("qty", pa.int32()), pa.field("value", pa.float64())])
    for batch in range(2):
        ids = range(batch * 100, batch * 100 + 100)
        table.append(pa.Table.from_pydict({
            "id": list(ids), "name": [f"n{i}" for i in ids], "qty": [i % 10 for i in ids],
            "value": [i / 4 for i in ids]}, schema=old))

    with table.update_schema() as update:
        update.rename_column("name", "full_name")  # same field id 2
        update.update_column("qty", field_type=LongType())  # int -> long
        update.add_column("note", StringType())  # field id 5, NULL in the old files

    new = pa.schema([pa.field("id", pa.int64(), nullable=False),
                     pa.field("full_name", pa.string()), pa.field("qty", pa.int64()),
                     pa.field("value", pa.float64()), pa.field("note", pa.string())])
    ids = range(200, 300)
    table.append(pa.Table.from_pydict({
        "id": list(ids), "full_name": [f"n{i}" for i in ids],
        "qty": [i * 1_000_000_000 for i in ids],  # needs 64 bits
        "value": [i / 4 for i in ids], "note": [f"note {i}" for i in ids]}, schema=new))
    return table_info(table)


# hand-made delete files (pyiceberg 0.12 writes copy-on-write only, see the docstring)


class DeleteManifestWriter(ManifestWriterV2):
    """A ManifestWriterV2 writing a DELETES manifest.

    pyiceberg 0.12.0 declares data_file.equality_ids (field 135) as list<long> in the
    manifest's Avro schema where the spec (and DuckDB) say list<int> (element id 136). Avro
    int and long are encoded alike, so only the schema in the file header changes here."""

    def content(self):
        return ManifestContent.DELETES

    def _with_partition(self, format_version):
        schema = super()._with_partition(format_version)
        data_file = schema.find_field(2).field_type
        fields = [NestedField(f.field_id, f.name,
                              ListType(element_id=136, element_type=IntegerType(),
                                       element_required=True),
                              required=f.required, doc=f.doc)
                  if f.field_id == 135 else f
                  for f in data_file.fields]
        return Schema(*[NestedField(2, "data_file", StructType(*fields), required=True)
                        if f.field_id == 2 else f
                        for f in schema.fields])

    @property
    def _meta(self):
        return {**super()._meta, "content": "deletes"}


class AddDeleteFiles(_FastAppendFiles):
    """A fast append whose new manifest is a DELETES manifest."""

    def new_manifest_writer(self, spec):
        return DeleteManifestWriter(spec=spec, schema=self.schema(),
                                    output_file=self.new_manifest_output(),
                                    snapshot_id=self._snapshot_id,
                                    avro_compression=self._compression)


def write_delete_file(table, name, rows, content, **stats):
    """Writes `rows` (a pyarrow table) to <table>/data/<name> and commits it as a delete
    file of `content` (a DataFileContent) in a new snapshot; `stats` go to the DataFile."""
    path = f"{table.location()}/data/{name}"
    with table.io.new_output(path).create() as f:
        pq.write_table(rows, f)
    delete_file = DataFile.from_args(
        content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=rows.num_rows, file_size_in_bytes=len(table.io.new_input(path)), **stats)
    delete_file.spec_id = table.spec().spec_id
    with table.transaction() as tx:
        with AddDeleteFiles(operation=Operation.DELETE, transaction=tx, io=table.io) as add:
            add.append_data_file(delete_file)


def with_field_id(name, arrow_type, field_id):
    return pa.field(name, arrow_type, nullable=False,
                    metadata={b"PARQUET:field_id": str(field_id).encode()})


def make_posdeletes(catalog):
    table = catalog.create_table(f"{NAMESPACE}.posdeletes", schema=EVENTS_SCHEMA)
    table.append(events_rows(range(1000)))
    (data_file,) = [task.file.file_path for task in table.scan().plan_files()]
    positions = list(range(0, 1000, 10))  # in this single file, row position == id
    rows = pa.Table.from_pydict(
        {"file_path": [data_file] * len(positions), "pos": positions},
        schema=pa.schema([with_field_id("file_path", pa.string(), POS_DELETE_FILE_PATH_ID),
                          with_field_id("pos", pa.int64(), POS_DELETE_POS_ID)]))
    path, first, last = data_file.encode(), (0).to_bytes(8, "little"), (990).to_bytes(8, "little")
    # Java writers give file_path bounds when a delete file is for one data file: the same.
    write_delete_file(table, "pos-deletes-00000.parquet", rows, DataFileContent.POSITION_DELETES,
                      lower_bounds={POS_DELETE_FILE_PATH_ID: path, POS_DELETE_POS_ID: first},
                      upper_bounds={POS_DELETE_FILE_PATH_ID: path, POS_DELETE_POS_ID: last},
                      value_counts={POS_DELETE_FILE_PATH_ID: 100, POS_DELETE_POS_ID: 100},
                      null_value_counts={POS_DELETE_FILE_PATH_ID: 0, POS_DELETE_POS_ID: 0})
    return table_info(table)


def make_eqdeletes(catalog):
    table = catalog.create_table(f"{NAMESPACE}.eqdeletes", schema=EVENTS_SCHEMA)
    table.append(events_rows(range(1000)))
    ids = list(range(0, 1000, 3))
    rows = pa.Table.from_pydict({"id": ids},
                                schema=pa.schema([with_field_id("id", pa.int64(), 1)]))
    write_delete_file(table, "eq-deletes-00000.parquet", rows, DataFileContent.EQUALITY_DELETES,
                      equality_ids=[1],
                      lower_bounds={1: (0).to_bytes(8, "little")},
                      upper_bounds={1: (999).to_bytes(8, "little")},
                      value_counts={1: len(ids)}, null_value_counts={1: 0})
    # pyiceberg raises "PyIceberg does not yet support equality deletes" on a scan.
    return table_info(table, readable=False)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} FOLDER")
    json.dump(make_tables(sys.argv[1]), sys.stdout, indent=2)
    print()
