//! `iceberg_snapshots(…)` and `iceberg_metadata(…)`, with DuckDB's columns: a table's
//! snapshots, and the live entries of a snapshot's manifests.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::MemTable;
use datafusion::error::Result;
use futures::future::try_join_all;

use super::manifests::Content;
use super::IcebergSnapshot;
use crate::runtime::QuiverRuntime;

/// One row per snapshot of the table, oldest first.
pub fn snapshots_table(table: &IcebergSnapshot) -> Result<MemTable> {
    let mut snapshots: Vec<_> = table.metadata.snapshots.iter().collect();
    snapshots.sort_by_key(|s| (s.sequence_number, s.timestamp_ms));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(
            snapshots.iter().map(|s| s.sequence_number as u64),
        )),
        Arc::new(UInt64Array::from_iter_values(
            snapshots.iter().map(|s| s.snapshot_id as u64),
        )),
        Arc::new(TimestampMicrosecondArray::from_iter_values(
            snapshots.iter().map(|s| s.timestamp_ms * 1000),
        )),
        Arc::new(StringArray::from_iter(
            snapshots.iter().map(|s| s.manifest_list.as_deref()),
        )),
    ];
    let schema = Arc::new(Schema::new(vec![
        Field::new("sequence_number", DataType::UInt64, false),
        Field::new("snapshot_id", DataType::UInt64, false),
        Field::new(
            "timestamp_ms",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("manifest_list", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    MemTable::try_new(schema, vec![vec![batch]])
}

/// One row per live file of the snapshot's manifests (reads every manifest).
pub async fn metadata_table(runtime: &QuiverRuntime, table: &IcebergSnapshot) -> Result<MemTable> {
    let read = table.manifests.iter().map(|m| table.entries(runtime, m));
    let entries = try_join_all(read).await?;
    let mut rows = vec![];
    for (manifest, entries) in table.manifests.iter().zip(&entries) {
        for entry in entries {
            rows.push((manifest, entry));
        }
    }
    let text = |f: &dyn Fn(usize) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values((0..rows.len()).map(f)))
    };
    let columns: Vec<ArrayRef> = vec![
        text(&|i| rows[i].0.path.clone()),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(m, _)| m.sequence_number),
        )),
        text(&|i| match rows[i].0.content {
            0 => "DATA".into(),
            _ => "DELETE".into(),
        }),
        text(&|i| match rows[i].1.status {
            0 => "EXISTING".into(),
            _ => "ADDED".into(),
        }),
        text(&|i| match rows[i].1.content {
            Content::Data => "EXISTING".into(),
            Content::PositionDeletes => "POSITION_DELETES".into(),
            Content::EqualityDeletes => "EQUALITY_DELETES".into(),
        }),
        text(&|i| rows[i].1.path.clone()),
        text(&|i| rows[i].1.format.to_uppercase()),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, e)| e.records),
        )),
    ];
    let names = [
        "manifest_path",
        "manifest_sequence_number",
        "manifest_content",
        "status",
        "content",
        "file_path",
        "file_format",
        "record_count",
    ];
    let fields: Vec<Field> = names
        .iter()
        .zip(&columns)
        .map(|(name, column)| Field::new(*name, column.data_type().clone(), false))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    MemTable::try_new(schema, vec![vec![batch]])
}
