//! Where a worker's (or sub-coordinator's) output goes: inline in the response when small,
//! else spilled under the result prefix, since a synchronous Lambda response holds at most
//! 6 MB. Whoever collects a spill reads and deletes it.

use bytes::Bytes;
use datafusion::error::{DataFusionError, Result};
use quiver_core::runtime::QuiverRuntime;
use quiver_core::source::{unique_id, S3Options};

use crate::protocol::{to_base64, Output, WorkerRequest};

/// The output `bytes` of `request`, as it travels back: inline up to the request's limit,
/// else under its result prefix. The one place that decides, for workers and
/// sub-coordinators alike.
pub async fn deliver(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    request: &WorkerRequest,
    bytes: Vec<u8>,
) -> Result<Output> {
    if bytes.len() <= request.inline_limit {
        return Ok(Output::Inline(to_base64(&bytes)));
    }
    let prefix = request.result_prefix.as_deref().ok_or_else(|| {
        DataFusionError::Execution(format!(
            "worker {}: the output is {} bytes, over the {} a response can carry, and no \
             result prefix is set (QUIVER_RESULT_PREFIX)",
            request.worker,
            bytes.len(),
            request.inline_limit
        ))
    })?;
    let key = result_key(prefix, &request.query_id, request.worker);
    runtime.sources.put(&key, s3, bytes.into()).await?;
    Ok(Output::Spilled(key))
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

/// Reads a spilled output and deletes it.
pub async fn take(runtime: &QuiverRuntime, s3: &S3Options, path: &str) -> Result<Bytes> {
    let source = runtime.sources.for_path(path, s3)?;
    let bytes = source.get(path).await?;
    source.delete(path).await?;
    Ok(bytes)
}
