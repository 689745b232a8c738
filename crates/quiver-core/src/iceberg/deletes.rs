//! Position delete files: `(file_path, pos)` rows naming rows of data files that a later
//! commit deleted. Each applies to the data files of its sequence number or older; the
//! positions become row selections of the scan (`ScanFile::deleted_rows`).

use std::collections::HashMap;

use datafusion::arrow::array::{Array, AsArray, RecordBatch, RecordBatchReader};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use futures::future::try_join_all;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::manifests::ManifestEntry;
use super::{object_meta, read, IcebergSnapshot};
use crate::runtime::QuiverRuntime;

/// The deleted row positions of each data file in `data` (by path, sorted, each once), from
/// the position delete files that apply to it.
pub async fn deleted_rows(
    runtime: &QuiverRuntime,
    snapshot: &IcebergSnapshot,
    data: &[ManifestEntry],
    deletes: &[ManifestEntry],
) -> Result<HashMap<String, Vec<u64>>> {
    let sequence: HashMap<&str, i64> = data
        .iter()
        .map(|d| (d.path.as_str(), d.sequence_number))
        .collect();
    let read = try_join_all(deletes.iter().map(|d| positions(runtime, d))).await?;
    let mut deleted: HashMap<String, Vec<u64>> = HashMap::new();
    for (delete, rows) in deletes.iter().zip(read) {
        for (path, position) in rows {
            let path = snapshot.resolve(&path);
            match sequence.get(path.as_str()) {
                Some(&data_sequence) if data_sequence <= delete.sequence_number => {
                    deleted.entry(path).or_default().push(position)
                }
                _ => {}
            }
        }
    }
    for positions in deleted.values_mut() {
        positions.sort_unstable();
        positions.dedup();
    }
    Ok(deleted)
}

/// The rows of a delete file, read whole (`kind` names it in errors): only the `columns`
/// named, if any, each of which it must have.
pub(super) async fn delete_file_rows(
    runtime: &QuiverRuntime,
    file: &ManifestEntry,
    kind: &str,
    columns: Option<&[&str]>,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let path = &file.path;
    let fail = |e: &dyn std::fmt::Display| {
        DataFusionError::Plan(format!("{path}: not {kind} delete file ({e})"))
    };
    let bytes = read(runtime, &object_meta(runtime, path, Some(file.size)).await?).await?;
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| fail(&e))?;
    if let Some(columns) = columns {
        let descriptor = builder.parquet_schema();
        let wanted: Vec<usize> = (0..descriptor.num_columns())
            .filter(|&i| columns.contains(&descriptor.column(i).name()))
            .collect();
        if wanted.len() != columns.len() {
            return Err(fail(&format!(
                "it lacks the columns {}",
                columns.join(", ")
            )));
        }
        let mask = ProjectionMask::leaves(descriptor, wanted);
        builder = builder.with_projection(mask);
    }
    let reader = builder.build().map_err(|e| fail(&e))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| fail(&e))?;
    Ok((schema, batches))
}

/// The `(file_path, pos)` rows of one position delete file.
async fn positions(runtime: &QuiverRuntime, file: &ManifestEntry) -> Result<Vec<(String, u64)>> {
    let columns = ["file_path", "pos"];
    let (schema, batches) = delete_file_rows(runtime, file, "a position", Some(&columns)).await?;
    let (path_at, position_at) = (schema.index_of("file_path")?, schema.index_of("pos")?);
    let mut rows = vec![];
    for batch in batches {
        let paths = cast(batch.column(path_at), &DataType::Utf8)?;
        let positions = cast(batch.column(position_at), &DataType::Int64)?;
        let (paths, positions) = (
            paths.as_string::<i32>(),
            positions.as_primitive::<Int64Type>(),
        );
        for row in 0..batch.num_rows() {
            if paths.is_valid(row) && positions.is_valid(row) && positions.value(row) >= 0 {
                rows.push((paths.value(row).to_string(), positions.value(row) as u64));
            }
        }
    }
    Ok(rows)
}
