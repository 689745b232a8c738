//! What travels between the coordinator and its workers, as JSON through the Invoke API.
//! A worker's output is a list of partitions, each an Arrow IPC stream; it travels inline
//! (base64) when small and through the S3 result prefix when not, since a synchronous
//! Lambda response holds at most 6 MB.

use std::collections::BTreeMap;
use std::io::Cursor;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::error::{DataFusionError, Result};
use quiver_core::bucket::Bucket;
use quiver_core::copy::{CopyTarget, WrittenFile};
use quiver_core::metrics::MetricsSnapshot;
use quiver_core::scan::ScanFile;
use serde::{Deserialize, Serialize};

/// One worker's task: a fragment and the buckets it runs over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    /// Names the query in logs and in spilled result keys.
    pub query_id: String,
    /// This worker's number within the query.
    pub worker: usize,
    /// The fragment as datafusion-proto bytes (base64) with an empty scan: the same for
    /// every worker of a query. Empty when `fragment_key` is set.
    pub fragment: String,
    /// Where the fragment's bytes are instead, under the result prefix: one whose join
    /// build sides make it too big for a request (Lambda takes at most 6 MB) travels
    /// through S3, written once by the coordinator and read by each worker.
    #[serde(default)]
    pub fragment_key: Option<String>,
    /// The files this worker reads (path, size, etag) ...
    pub files: Vec<ScanFile>,
    /// ... and its buckets of them (file index, row groups, bytes).
    pub buckets: Vec<Bucket>,
    /// The query's `quiver.*` settings (coalesce gap, S3 endpoint, ...).
    pub settings: BTreeMap<String, String>,
    /// Where an output too big for a response goes (`s3://bucket/prefix/`).
    pub result_prefix: Option<String>,
    /// Outputs above this many bytes go to the result prefix.
    pub inline_limit: usize,
    /// Buckets per worker when this request goes to a sub-coordinator (tree invocation):
    /// it fans `buckets` out to workers of its own and merges their partial states.
    #[serde(default)]
    pub fan_out: Option<Vec<Vec<Bucket>>>,
    /// For COPY: write the output under this target instead of returning it.
    #[serde(default)]
    pub write: Option<CopyTarget>,
    /// An exchange's first wave: the fragment sits under a hash repartition; its output is
    /// hashed into that many parts, written as one object under the result prefix.
    #[serde(default)]
    pub exchange: bool,
    /// An exchange's second wave: the join partitions this worker joins, each from the
    /// parts the first wave wrote. The fragment is then the stage with empty inputs, and
    /// `files` and `buckets` are empty.
    #[serde(default)]
    pub join: Vec<JoinPartition>,
}

/// A byte range of an object one worker of an exchange's first wave wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Piece {
    pub key: String,
    pub start: u64,
    pub end: u64,
}

/// One join partition of an exchange: its pieces of the build side, then of the probe side.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JoinPartition {
    pub sides: [Vec<Piece>; 2],
}

/// What a first-wave worker wrote: one object, and in it each part's bytes (an Arrow IPC
/// stream) and rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchanged {
    pub key: String,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    pub start: u64,
    pub end: u64,
    pub rows: u64,
}

/// What a worker did, for `--profile` and the coordinator's logs; summed over workers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerMetrics {
    /// Sub-coordinators that took part (tree invocation).
    #[serde(default)]
    pub sub_coordinators: u64,
    /// Rows the workers returned.
    pub rows: u64,
    /// Bytes of Arrow IPC the workers returned (before base64).
    #[serde(default)]
    pub bytes: u64,
    /// Buckets the workers ran.
    pub buckets: u64,
    /// Worker invocations that answered.
    #[serde(default)]
    pub invocations: u64,
    /// Their time times their function's memory, as Lambda bills it.
    #[serde(default)]
    pub gb_seconds: f64,
    /// Their time, from a request's arrival to its answer, summed.
    #[serde(default)]
    pub seconds: f64,
    /// Bytes the workers wrote to and read from an exchange's objects.
    #[serde(default)]
    pub exchanged: u64,
    /// Straggling requests that got a duplicate invocation.
    #[serde(default)]
    pub hedged: u64,
    /// The most memory one worker process held while it ran (resident bytes; the
    /// largest over the workers), to set against its function's memory.
    #[serde(default)]
    pub peak_memory: u64,
    /// Their reads, as any query reports them, with the phases decode, run and encode.
    #[serde(flatten)]
    pub reads: MetricsSnapshot,
}

impl WorkerMetrics {
    /// What the workers cost, as Lambda bills them.
    pub fn cost(&self) -> quiver_core::cost::WorkerCost {
        quiver_core::cost::WorkerCost {
            workers: self.invocations,
            gb_seconds: self.gb_seconds,
            seconds: 0.0,
        }
    }

    pub fn add(&mut self, other: &WorkerMetrics) {
        self.sub_coordinators += other.sub_coordinators;
        self.rows += other.rows;
        self.bytes += other.bytes;
        self.exchanged += other.exchanged;
        self.buckets += other.buckets;
        self.hedged += other.hedged;
        self.invocations += other.invocations;
        self.gb_seconds += other.gb_seconds;
        self.seconds += other.seconds;
        self.peak_memory = self.peak_memory.max(other.peak_memory);
        self.reads.add(&other.reads);
    }
}

/// Where a worker's output is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// The encoded partitions, base64.
    Inline(String),
    /// The key of an object under the result prefix holding them; the reader deletes it.
    Spilled(String),
    /// For COPY: the files the worker wrote.
    Written(Vec<WrittenFile>),
    /// For an exchange's first wave: the object the worker wrote; whoever joins deletes it.
    Exchanged(Exchanged),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerResponse {
    pub output: Output,
    pub metrics: WorkerMetrics,
}

/// Partitions as bytes: for each, its length (u64, little endian) and an IPC stream.
pub fn encode_partitions(
    schema: &datafusion::arrow::datatypes::SchemaRef,
    partitions: &[Vec<RecordBatch>],
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for batches in partitions {
        let mut stream = Vec::new();
        let mut writer = StreamWriter::try_new(&mut stream, schema)?;
        for batch in batches {
            writer.write(&quiver_core::format::compact_views(batch)?)?;
        }
        writer.finish()?;
        drop(writer);
        out.extend_from_slice(&(stream.len() as u64).to_le_bytes());
        out.extend_from_slice(&stream);
    }
    Ok(out)
}

pub fn decode_partitions(bytes: &[u8]) -> Result<Vec<Vec<RecordBatch>>> {
    partition_ranges(bytes)?
        .into_iter()
        .map(|range| decode_stream(&bytes[range.start as usize..range.end as usize]))
        .collect()
}

/// Where each partition's IPC stream lies in `encode_partitions`' bytes.
pub fn partition_ranges(bytes: &[u8]) -> Result<Vec<std::ops::Range<u64>>> {
    let bad = || DataFusionError::Execution("a worker's output is truncated".into());
    let mut ranges = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let length = bytes.get(at..at + 8).ok_or_else(bad)?;
        let length = u64::from_le_bytes(length.try_into().map_err(|_| bad())?) as usize;
        let start = at + 8;
        let end = start.checked_add(length).filter(|&end| end <= bytes.len());
        let end = end.ok_or_else(bad)?;
        ranges.push(start as u64..end as u64);
        at = end;
    }
    Ok(ranges)
}

/// The batches of one Arrow IPC stream.
pub fn decode_stream(stream: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(Cursor::new(stream), None)?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

pub fn to_base64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

pub fn from_base64(text: &str) -> Result<Vec<u8>> {
    BASE64
        .decode(text)
        .map_err(|e| DataFusionError::Execution(format!("malformed base64: {e}")))
}
/// `s3://b/a.parquet row groups 0-3, s3://b/c.parquet row group 7`, shortened.
pub fn describe_buckets(files: &[ScanFile], buckets: &[Bucket]) -> String {
    let mut parts: Vec<String> = buckets
        .iter()
        .take(3)
        .map(|bucket| {
            let path = files
                .get(bucket.file)
                .map(|f| f.meta.path.as_str())
                .unwrap_or("?");
            match bucket.row_groups.as_slice() {
                [one] => format!("bucket {path} row group {one}"),
                [first, .., last] => format!("bucket {path} row groups {first}-{last}"),
                [] => format!("bucket {path}"),
            }
        })
        .collect();
    if buckets.len() > 3 {
        parts.push(format!("and {} more buckets", buckets.len() - 3));
    }
    parts.join(", ")
}
