//! `COPY (SELECT ...) TO 'prefix/' (FORMAT parquet, PARTITION_BY (col))`: a query's result
//! written as Parquet files, one folder per partition value (`col=value/`, as Hive and
//! DuckDB lay them out), then a manifest. The manifest is written last and lists every file:
//! a job that fails midway deletes what it wrote and leaves no manifest, so no reader takes
//! half an output for a whole one. (DuckDB's option list becomes DataFusion's
//! `STORED AS ... PARTITIONED BY` in `session::dialect`; folder names in `source::hive`.)

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::runtime::QuiverRuntime;
use crate::source::{hive, S3Options};

/// The manifest's name inside the target folder.
pub const MANIFEST: &str = "_quiver_manifest.json";

/// One file COPY wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WrittenFile {
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    /// The partition values, by column.
    pub partition: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Serialize)]
struct Manifest<'a> {
    job: &'a str,
    format: &'static str,
    partition_by: &'a [String],
    rows: u64,
    files: &'a [WrittenFile],
}

/// Where and how to write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyTarget {
    /// A folder: `s3://bucket/prefix/`, `out/`.
    pub folder: String,
    pub partition_by: Vec<String>,
    /// Unique per job, in file names: re-running a job never overwrites another's files.
    pub job: String,
}

/// Writes `batches` under `target` and then the manifest. On any error the files already
/// written are deleted (best effort) and there is no manifest.
pub async fn write_copy(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let written = write_parts(runtime, s3, target, schema, batches).await?;
    commit(runtime, s3, target, written).await
}

/// The files of `batches` under `target`, without a manifest (a worker's share of a job);
/// on error, what was written is deleted again.
pub async fn write_parts(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let mut written = Vec::new();
    match write_files(runtime, s3, target, schema, batches, &mut written).await {
        Ok(()) => Ok(written),
        Err(error) => {
            discard(runtime, s3, &written).await;
            Err(error)
        }
    }
}

/// Makes a job's files visible as complete by writing the manifest that lists them;
/// if that fails, the files are deleted.
pub async fn commit(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    written: Vec<WrittenFile>,
) -> Result<Vec<WrittenFile>> {
    let manifest = Manifest {
        job: &target.job,
        format: "parquet",
        partition_by: &target.partition_by,
        rows: written.iter().map(|f| f.rows).sum(),
        files: &written,
    };
    let result = match serde_json::to_vec_pretty(&manifest) {
        Ok(bytes) => runtime
            .sources
            .put(&format!("{}{MANIFEST}", target.folder), s3, bytes.into())
            .await
            .map_err(Into::into),
        Err(e) => Err(DataFusionError::Internal(e.to_string())),
    };
    match result {
        Ok(()) => Ok(written),
        Err(error) => {
            discard(runtime, s3, &written).await;
            Err(error)
        }
    }
}

/// Deletes written files, best effort (a failed job's leftovers are not in any manifest).
pub async fn discard(runtime: &QuiverRuntime, s3: &S3Options, written: &[WrittenFile]) {
    for file in written {
        if let Ok(source) = runtime.sources.for_path(&file.path, s3) {
            let _ = source.delete(&file.path).await;
        }
    }
}

/// COPY to one file, without partitions: the file alone, no manifest (an object store
/// `put` and a local rename are each all or nothing).
pub async fn write_file(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    path: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, Arc::clone(schema), Some(properties()))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    let bytes = buffer.len() as u64;
    runtime.sources.put(path, s3, buffer.into()).await?;
    Ok(vec![WrittenFile {
        path: path.to_string(),
        rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
        bytes,
        partition: BTreeMap::new(),
    }])
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

async fn write_files(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    written: &mut Vec<WrittenFile>,
) -> Result<()> {
    let key_columns = target
        .partition_by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                DataFusionError::Plan(format!(
                    "PARTITION_BY column '{name}' is not in the query's result ({})",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    // Partition columns live in folder names, not in the files (as Hive and DuckDB do).
    let kept: Vec<usize> = (0..schema.fields().len())
        .filter(|i| !key_columns.contains(i))
        .collect();
    let file_schema = Arc::new(schema.project(&kept)?);
    let mut groups: BTreeMap<Vec<Option<String>>, Vec<RecordBatch>> = BTreeMap::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        for (key, rows) in split_by_key(batch, &key_columns)? {
            let part = take_record_batch(batch, &UInt32Array::from(rows))?.project(&kept)?;
            groups.entry(key).or_default().push(part);
        }
    }
    if groups.is_empty() && key_columns.is_empty() {
        groups.insert(vec![], vec![]);
    }
    let properties = properties();
    for (key, parts) in groups {
        let mut folder = target.folder.clone();
        for (name, value) in target.partition_by.iter().zip(&key) {
            folder.push_str(&format!("{name}={}/", hive::encode(value.as_deref())));
        }
        let path = format!("{folder}part-{}.parquet", target.job);
        let mut buffer = Vec::new();
        let mut writer = ArrowWriter::try_new(
            &mut buffer,
            Arc::clone(&file_schema),
            Some(properties.clone()),
        )?;
        for part in &parts {
            writer.write(part)?;
        }
        writer.close()?;
        let bytes = buffer.len() as u64;
        runtime.sources.put(&path, s3, buffer.into()).await?;
        written.push(WrittenFile {
            path,
            rows: parts.iter().map(|p| p.num_rows() as u64).sum(),
            bytes,
            partition: target.partition_by.iter().cloned().zip(key).collect(),
        });
    }
    Ok(())
}

/// Row indexes of `batch` per distinct value of its key columns, as text.
fn split_by_key(
    batch: &RecordBatch,
    key_columns: &[usize],
) -> Result<BTreeMap<Vec<Option<String>>, Vec<u32>>> {
    let texts = key_columns
        .iter()
        .map(|&i| cast(batch.column(i), &DataType::Utf8))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let texts: Vec<&datafusion::arrow::array::StringArray> = texts
        .iter()
        .map(|a| {
            a.as_any()
                .downcast_ref()
                .expect("cast to Utf8 gives strings")
        })
        .collect();
    let mut groups: BTreeMap<Vec<Option<String>>, Vec<u32>> = BTreeMap::new();
    for row in 0..batch.num_rows() {
        let key = texts
            .iter()
            .map(|a| (!a.is_null(row)).then(|| a.value(row).to_string()))
            .collect();
        groups.entry(key).or_default().push(row as u32);
    }
    Ok(groups)
}
