//! Where a worker's (or sub-coordinator's) output goes: inline in the response when small,
//! else spilled under the result prefix, since a synchronous Lambda response holds at most
//! 6 MB. Whoever collects a spill reads and deletes it.

use bytes::Bytes;
use datafusion::error::{DataFusionError, Result};
use quiver_core::runtime::QuiverRuntime;
use quiver_core::source::{unique_id, S3Options};

use crate::protocol::{from_base64, to_base64, Output, WorkerRequest};

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

/// The fragment bytes of `request`: inline, or read from the result prefix.
pub async fn fragment_bytes(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    request: &WorkerRequest,
) -> Result<Vec<u8>> {
    match &request.fragment_key {
        Some(key) => Ok(runtime.sources.for_path(key, s3)?.get(key).await?.to_vec()),
        None => from_base64(&request.fragment),
    }
}

/// `fragment` as a request carries it: inline (base64) when it fits in `room` bytes, else
/// written under the result prefix, whose key is returned too (delete it when the workers
/// are done).
pub async fn ship_fragment(
    runtime: &QuiverRuntime,
    s3: &S3Options,
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
             request carries, and no result prefix is set (QUIVER_RESULT_PREFIX) to pass it \
             through S3: lower quiver.broadcast_bytes",
            fragment.len()
        ))
    })?;
    let key = format!("{}/{query_id}/fragment.proto", prefix.trim_end_matches('/'));
    runtime
        .sources
        .put(&key, s3, Bytes::copy_from_slice(fragment))
        .await?;
    Ok((String::new(), Some(key)))
}

/// Deletes an object under the result prefix (a shipped fragment, a spilled output, an
/// exchange's part); a failure only leaves it behind.
pub async fn discard_object(runtime: &QuiverRuntime, s3: &S3Options, key: &str) {
    if let Ok(source) = runtime.sources.for_path(key, s3) {
        let _ = source.delete(key).await;
    }
}
