//! `COPY (SELECT ...) TO 'prefix/' (FORMAT parquet, PARTITION_BY (col))`: a query's result
//! written as Parquet files, one folder per partition value (`col=value/`, as Hive and
//! DuckDB lay them out), then a manifest. The manifest is written last and lists every file:
//! a job that fails midway deletes what it wrote and leaves no manifest, so no reader takes
//! half an output for a whole one. (DuckDB's option list becomes DataFusion's
//! `STORED AS ... PARTITIONED BY` in `session::dialect`; folder names in `source::hive`.)

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use serde::{Deserialize, Serialize};

mod text;

pub use text::{write_text, TextFormat};

use crate::format::ParquetSink;
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

/// Where COPY writes: a folder of files (with partitions and a manifest), or one file.
#[derive(Debug, Clone)]
pub enum Destination {
    Folder(CopyTarget),
    File(String),
}

/// COPY's output as the query produces it: one Parquet file per partition value, each
/// encoded as batches arrive into a staging file on local disk (beside a local destination,
/// so that the final rename is atomic; else in the temporary folder) and put where it
/// belongs when `finish` is called. Memory holds a row group per open file, never the
/// answer. In the browser, which has no disk, files are staged in memory. Anything that
/// fails, or `abort`, deletes what was staged and what was already put.
pub struct CopyWriter<'a> {
    runtime: &'a QuiverRuntime,
    s3: &'a S3Options,
    destination: Destination,
    key_columns: Vec<usize>,
    kept: Vec<usize>,
    file_schema: SchemaRef,
    open: BTreeMap<Vec<Option<String>>, OpenFile>,
    /// Threads that encode each file's columns.
    threads: usize,
}

struct OpenFile {
    path: String,
    rows: u64,
    writer: ParquetSink<Staging>,
}

impl<'a> CopyWriter<'a> {
    /// A writer for results of `schema`; refuses a PARTITION_BY column the result lacks.
    pub fn new(
        runtime: &'a QuiverRuntime,
        s3: &'a S3Options,
        destination: Destination,
        schema: &SchemaRef,
    ) -> Result<Self> {
        let partition_by = match &destination {
            Destination::Folder(target) => target.partition_by.as_slice(),
            Destination::File(_) => &[],
        };
        let key_columns = partition_by
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
        Ok(Self {
            runtime,
            s3,
            destination,
            key_columns,
            kept,
            file_schema,
            open: BTreeMap::new(),
            threads: 1,
        })
    }

    /// A single file's columns encoded on `threads` threads.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Encodes one batch of the result into the files of its partition values.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.key_columns.is_empty() {
            return self.write_part(vec![], &batch.project(&self.kept)?);
        }
        for (key, rows) in split_by_key(batch, &self.key_columns)? {
            let part = take_record_batch(batch, &UInt32Array::from(rows))?.project(&self.kept)?;
            self.write_part(key, &part)?;
        }
        Ok(())
    }

    fn write_part(&mut self, key: Vec<Option<String>>, part: &RecordBatch) -> Result<()> {
        if !self.open.contains_key(&key) {
            let file = self.open_file(&key)?;
            self.open.insert(key.clone(), file);
        }
        let file = self.open.get_mut(&key).expect("opened above");
        file.writer.write(part)?;
        file.rows += part.num_rows() as u64;
        Ok(())
    }

    fn open_file(&self, key: &[Option<String>]) -> Result<OpenFile> {
        let path = match &self.destination {
            Destination::File(path) => path.clone(),
            Destination::Folder(target) => {
                let mut folder = target.folder.clone();
                for (name, value) in target.partition_by.iter().zip(key) {
                    folder.push_str(&format!("{name}={}/", hive::encode(value.as_deref())));
                }
                format!("{folder}part-{}.parquet", target.job)
            }
        };
        let staging = Staging::for_destination(&path)?;
        // A folder holds a file per partition value, all open at once: one encoder each,
        // or threads (and what they hold) would multiply with the values.
        let threads = match &self.destination {
            Destination::File(_) => self.threads,
            Destination::Folder(_) => 1,
        };
        let writer = ParquetSink::try_new(
            staging,
            &self.file_schema,
            crate::format::parquet_properties(),
            threads,
        )?;
        Ok(OpenFile {
            path,
            rows: 0,
            writer,
        })
    }

    /// Closes every file and puts it where it belongs; the files written, without a
    /// manifest (see `commit`). On error, nothing written is left behind.
    pub async fn finish(mut self) -> Result<Vec<WrittenFile>> {
        let empty_output = match &self.destination {
            Destination::File(_) => true,
            Destination::Folder(target) => target.partition_by.is_empty(),
        };
        if self.open.is_empty() && empty_output {
            // An empty answer still makes a file: its schema is the answer.
            let file = self.open_file(&[])?;
            self.open.insert(vec![], file);
        }
        let (runtime, s3) = (self.runtime, self.s3);
        let mut written = Vec::new();
        // Files not put yet are staged only; dropping them removes them.
        for (key, file) in std::mem::take(&mut self.open) {
            match put(runtime, s3, file).await {
                Ok(mut done) => {
                    if let Destination::Folder(target) = &self.destination {
                        done.partition = target.partition_by.iter().cloned().zip(key).collect();
                    }
                    written.push(done);
                }
                Err(error) => {
                    discard(runtime, s3, &written).await;
                    return Err(error);
                }
            }
        }
        Ok(written)
    }
}

/// Closes one file's writer and puts the file at its path.
async fn put(runtime: &QuiverRuntime, s3: &S3Options, file: OpenFile) -> Result<WrittenFile> {
    let OpenFile { path, rows, writer } = file;
    let staging = writer.into_inner()?;
    let bytes = staging.bytes;
    put_staged(runtime, s3, &path, staging).await?;
    Ok(WrittenFile {
        path,
        rows,
        bytes,
        partition: BTreeMap::new(),
    })
}

/// Puts a staged file at `path` (a local one is renamed over it).
async fn put_staged(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    path: &str,
    staging: Staging,
) -> Result<()> {
    match staging.sink {
        #[cfg(target_arch = "wasm32")]
        Sink::Memory(buffer) => runtime.sources.put(path, s3, buffer.into()).await?,
        #[cfg(not(target_arch = "wasm32"))]
        Sink::Disk { file, staged } => {
            let file = file.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            drop(file);
            runtime.sources.put_file(path, s3, &staged.0).await?
        }
    }
    Ok(())
}

/// Where a file is encoded before it is put, and how many bytes it holds.
struct Staging {
    sink: Sink,
    bytes: u64,
}

enum Sink {
    #[cfg(target_arch = "wasm32")]
    Memory(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Disk {
        file: std::io::BufWriter<std::fs::File>,
        staged: Staged,
    },
}

/// A staging file on disk, removed when dropped: after a failed or cancelled COPY, and
/// after a put (which has moved or copied it).
#[cfg(not(target_arch = "wasm32"))]
struct Staged(std::path::PathBuf);

#[cfg(not(target_arch = "wasm32"))]
impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Staging {
    /// Beside a local destination (`NAME.staged`, renamed over it at the end), else a new
    /// file in the temporary folder (`TMPDIR`; `/tmp` on Lambda).
    #[cfg(not(target_arch = "wasm32"))]
    fn for_destination(path: &str) -> Result<Self> {
        let at = match path.split_once("://") {
            None | Some(("file", _)) => {
                let mut name = path.strip_prefix("file://").unwrap_or(path).to_owned();
                name.push_str(".staged");
                std::path::PathBuf::from(name)
            }
            Some(_) => std::env::temp_dir().join(format!(
                "quiver-copy-{}.parquet",
                crate::source::unique_id()
            )),
        };
        let create = || {
            if let Some(parent) = at.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create(&at)
        };
        let file = create().map_err(|e| {
            DataFusionError::Execution(format!("COPY cannot write {}: {e}", at.display()))
        })?;
        let sink = Sink::Disk {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            staged: Staged(at),
        };
        Ok(Self { sink, bytes: 0 })
    }

    /// The browser has no disk.
    #[cfg(target_arch = "wasm32")]
    fn for_destination(_path: &str) -> Result<Self> {
        Ok(Self {
            sink: Sink::Memory(Vec::new()),
            bytes: 0,
        })
    }
}

impl Write for Staging {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Memory(buffer) => buffer.write(bytes),
            #[cfg(not(target_arch = "wasm32"))]
            Sink::Disk { file, .. } => file.write(bytes),
        }?;
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Memory(_) => Ok(()),
            #[cfg(not(target_arch = "wasm32"))]
            Sink::Disk { file, .. } => file.flush(),
        }
    }
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
    let mut writer = CopyWriter::new(runtime, s3, Destination::Folder(target.clone()), schema)?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish().await
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
async fn discard(runtime: &QuiverRuntime, s3: &S3Options, written: &[WrittenFile]) {
    let paths = written.iter().map(|file| file.path.as_str());
    runtime.sources.discard(paths, s3).await
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
