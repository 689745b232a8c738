//! Where a worker's (or sub-coordinator's) output goes: inline in the response when small,
//! else spilled under the result prefix, since a synchronous Lambda response holds at most
//! 6 MB. Whoever collects a spill reads and deletes it. A worker encodes its output as it
//! comes into a `Spool`, which moves to local disk past the response's size.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use futures::StreamExt;
use quiver_core::runtime::QuiverRuntime;
use quiver_core::source::{unique_id, ObjectMeta, S3Options};
use tempfile::TempPath;

use crate::protocol::{from_base64, to_base64, Exchanged, Output, WorkerRequest};

/// Where outputs, shipped fragments and exchange parts travel: the result prefix's store,
/// reached with the running statement's S3 settings (taken once, so a task that outlives
/// the statement, such as a losing duplicate's cleanup, still reaches it).
#[derive(Clone)]
pub struct Results {
    runtime: Arc<QuiverRuntime>,
    s3: S3Options,
}

impl Results {
    pub fn new(runtime: &Arc<QuiverRuntime>) -> Self {
        Self {
            s3: runtime.query().settings.s3.clone(),
            runtime: Arc::clone(runtime),
        }
    }

    /// The results of the statement a plan's `context` runs for.
    pub fn of(context: &TaskContext) -> Result<Self> {
        Ok(Self::new(&QuiverRuntime::of(context.session_config())?))
    }

    /// The output `bytes` of `request`, as it travels back: inline up to the request's
    /// limit, else under its result prefix. The one place that decides, for workers and
    /// sub-coordinators alike.
    pub async fn deliver(&self, request: &WorkerRequest, bytes: Vec<u8>) -> Result<Output> {
        if bytes.len() <= request.inline_limit {
            return Ok(Output::Inline(to_base64(&bytes)));
        }
        let key = spill_key(request, bytes.len() as u64)?;
        self.runtime
            .sources
            .put(&key, &self.s3, bytes.into())
            .await?;
        Ok(Output::Spilled(key))
    }

    /// Reads a spilled output and deletes it.
    pub async fn take(&self, path: &str) -> Result<Bytes> {
        let source = self.runtime.sources.for_path(path, &self.s3)?;
        let bytes = source.get(path).await?;
        source.delete(path).await?;
        Ok(bytes)
    }

    /// One object under the result prefix, whole.
    pub async fn get(&self, path: &str) -> Result<Bytes> {
        Ok(self
            .runtime
            .sources
            .for_path(path, &self.s3)?
            .get(path)
            .await?)
    }

    /// A range of one object under the result prefix (an exchange's part).
    pub async fn get_range(
        &self,
        object: &ObjectMeta,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes> {
        let source = self.runtime.sources.for_path(&object.path, &self.s3)?;
        Ok(source.get_range(object, range).await?)
    }

    /// A URL that reads `path` until `expires` from now, for an answer handed over.
    pub async fn presigned_get(&self, path: &str, expires: std::time::Duration) -> Result<String> {
        let source = self.runtime.sources.for_path(path, &self.s3)?;
        Ok(source.presigned_get(path, expires).await?)
    }

    /// Writes one object under the result prefix.
    pub async fn put(&self, path: &str, bytes: Bytes) -> Result<()> {
        Ok(self.runtime.sources.put(path, &self.s3, bytes).await?)
    }

    /// The fragment bytes of `request`: inline, or read from the result prefix.
    pub async fn fragment_bytes(&self, request: &WorkerRequest) -> Result<Vec<u8>> {
        match &request.fragment_key {
            Some(key) => Ok(self.get(key).await?.to_vec()),
            None => from_base64(&request.fragment),
        }
    }

    /// `fragment` as a request carries it: inline (base64) when it fits in `room` bytes,
    /// else written under the result prefix, whose key is returned too (delete it when
    /// the workers are done).
    pub async fn ship_fragment(
        &self,
        fragment: &[u8],
        room: usize,
        prefix: Option<&str>,
        query_id: &str,
    ) -> Result<(String, Option<String>)> {
        if fragment.len() <= room {
            return Ok((to_base64(fragment), None));
        }
        let prefix = prefix.ok_or_else(|| {
            DataFusionError::Execution(format!(
                "the fragment is {} bytes (the build sides of its joins), over the {room} a \
                 request carries, and no result prefix is set (QUIVER_RESULT_PREFIX) to pass \
                 it through S3: lower quiver.broadcast_bytes",
                fragment.len()
            ))
        })?;
        let key = format!("{}/{query_id}/fragment.proto", prefix.trim_end_matches('/'));
        self.put(&key, Bytes::copy_from_slice(fragment)).await?;
        Ok((String::new(), Some(key)))
    }

    /// Deletes objects (shipped fragments, spilled outputs, exchange parts, files a
    /// failed or losing attempt wrote); a failure only leaves them behind.
    pub async fn discard<'a>(&self, paths: impl IntoIterator<Item = &'a str>) {
        self.runtime.sources.discard(paths, &self.s3).await
    }

    /// Deletes what an attempt's `output` left in the store (nothing for an inline one).
    pub async fn discard_output(&self, output: &Output) {
        match output {
            Output::Inline(_) => {}
            Output::Spilled(key) | Output::Exchanged(Exchanged { key, .. }) => {
                self.discard([key.as_str()]).await
            }
            Output::Written(files) => self.discard(files.iter().map(|f| f.path.as_str())).await,
        }
    }
}

/// Where an output of `len` bytes, too big for a response, goes under the result prefix.
fn spill_key(request: &WorkerRequest, len: u64) -> Result<String> {
    let prefix = request.result_prefix.as_deref().ok_or_else(|| {
        DataFusionError::Execution(format!(
            "worker {}: the output is {len} bytes, over the {} a response can carry, and no \
             result prefix is set (QUIVER_RESULT_PREFIX)",
            request.worker, request.inline_limit
        ))
    })?;
    Ok(result_key(prefix, &request.query_id, request.worker))
}

/// A worker's output encoded as its rows come (the format of `encode_partitions`): in
/// memory while it fits in a response, then in a file in the temporary folder (`/tmp` on
/// Lambda). An output bigger than the function's memory, a sort's, is never held whole.
pub struct Spool {
    limit: usize,
    memory: Vec<u8>,
    file: Option<(BufWriter<File>, TempPath)>,
    len: u64,
}

impl Spool {
    /// A spool that keeps up to `limit` bytes in memory.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            memory: Vec::new(),
            file: None,
            len: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Encodes one partition from `batches`; its rows.
    pub async fn write_partition(
        &mut self,
        schema: &SchemaRef,
        mut batches: SendableRecordBatchStream,
    ) -> Result<u64> {
        let at = self.len;
        self.write_all(&0u64.to_le_bytes())?;
        let mut rows = 0;
        let mut writer = StreamWriter::try_new(&mut *self, schema)?;
        while let Some(batch) = batches.next().await {
            let batch = batch?;
            rows += batch.num_rows() as u64;
            writer.write(&quiver_core::format::compact_views(&batch)?)?;
        }
        writer.finish()?;
        drop(writer);
        let stream = self.len - at - 8;
        self.write_at(at, &stream.to_le_bytes())?;
        Ok(rows)
    }

    /// The output as it travels back: inline when it fits in a response, else put under
    /// the result prefix (from disk, in parts, when it was spooled there).
    pub async fn deliver(self, results: &Results, request: &WorkerRequest) -> Result<Output> {
        let Some((mut file, path)) = self.file else {
            return results.deliver(request, self.memory).await;
        };
        file.flush().map_err(|e| spool_error(&e))?;
        let key = spill_key(request, self.len)?;
        (results.runtime.sources)
            .put_file(&key, &results.s3, &path)
            .await?;
        Ok(Output::Spilled(key))
    }

    /// Overwrites bytes already written at offset `at` (a partition's length).
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> Result<()> {
        let io = |e: std::io::Error| spool_error(&e);
        match &mut self.file {
            None => {
                let at = at as usize;
                self.memory[at..at + bytes.len()].copy_from_slice(bytes);
            }
            Some((file, _)) => {
                file.seek(SeekFrom::Start(at)).map_err(io)?;
                file.write_all(bytes).map_err(io)?;
                file.seek(SeekFrom::End(0)).map_err(io)?;
            }
        }
        Ok(())
    }
}

impl Write for Spool {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.file.is_none() && self.memory.len() + bytes.len() > self.limit {
            let (file, path) = tempfile::Builder::new()
                .prefix("quiver-output-")
                .suffix(".arrows")
                .tempfile()?
                .into_parts();
            let mut file = BufWriter::with_capacity(1 << 20, file);
            file.write_all(&std::mem::take(&mut self.memory))?;
            self.file = Some((file, path));
        }
        match &mut self.file {
            None => self.memory.extend_from_slice(bytes),
            Some((file, _)) => file.write_all(bytes)?,
        }
        self.len += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            None => Ok(()),
            Some((file, _)) => file.flush(),
        }
    }
}

fn spool_error(e: &std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "cannot write the output to the temporary folder ({}): {e}",
        std::env::temp_dir().display()
    ))
}

/// `prefix/QUERY/worker-N-UNIQUE.arrows`: new for every attempt, so a retried worker never
/// overwrites what an earlier attempt wrote.
pub fn result_key(prefix: &str, query_id: &str, worker: usize) -> String {
    format!(
        "{}/{query_id}/worker-{worker}-{}.arrows",
        prefix.trim_end_matches('/'),
        unique_id()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    use super::*;
    use crate::protocol::{decode_partitions, encode_partitions};

    fn partitions() -> (SchemaRef, Vec<Vec<RecordBatch>>) {
        let schema = Arc::new(Schema::new(vec![Field::new("i", DataType::Int64, false)]));
        let batch = |from: i64, rows: i64| {
            let column = Int64Array::from_iter_values(from..from + rows);
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(column)]).unwrap()
        };
        let partitions = vec![
            vec![batch(0, 3)],
            vec![batch(3, 5000), batch(5003, 5000)],
            vec![],
        ];
        (schema, partitions)
    }

    /// The bytes `limit`'s spool ends with, and whether it went to disk.
    fn spooled(limit: usize) -> (Vec<u8>, bool) {
        let (schema, partitions) = partitions();
        let mut spool = Spool::new(limit);
        for batches in partitions {
            let stream = futures::stream::iter(batches.into_iter().map(Ok));
            let stream = Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&schema), stream));
            futures::executor::block_on(spool.write_partition(&schema, stream)).unwrap();
        }
        match spool.file {
            None => (spool.memory, false),
            Some((mut file, path)) => {
                file.flush().unwrap();
                (std::fs::read(&path).unwrap(), true)
            }
        }
    }

    /// Spooled to memory or, past the limit, to disk: the same bytes as encoding the
    /// partitions whole, lengths patched in place.
    #[test]
    fn a_spool_encodes_as_encode_partitions_does_in_memory_or_on_disk() {
        let (schema, partitions) = partitions();
        let whole = encode_partitions(&schema, &partitions).unwrap();
        let (in_memory, on_disk) = spooled(whole.len());
        assert!(!on_disk);
        assert_eq!(in_memory, whole);
        let (from_disk, on_disk) = spooled(1000);
        assert!(on_disk);
        assert_eq!(from_disk, whole);
        let decoded = decode_partitions(&from_disk).unwrap();
        let rows: Vec<usize> = decoded
            .iter()
            .map(|p| p.iter().map(RecordBatch::num_rows).sum())
            .collect();
        assert_eq!(rows, [3, 10000, 0]);
    }
}
