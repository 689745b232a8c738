//! Quiver's two AWS Lambda functions. The coordinator plans each query and fans its
//! fragments out to worker functions through the Lambda executor
//! (`quiver_lambda_executor`, which the `quiver` command uses too); workers read their byte
//! ranges, run the fragment on all their vCPUs and return partial results; the coordinator
//! merges them.
//!
//! worker (runs a fragment) → coordinator (the function's events)

pub mod coordinator;
pub mod worker;

use datafusion::error::Result;
use quiver_core::QuiverSession;

/// Where a function keeps remote bytes for its next requests: `/tmp`, the one place it may
/// write, sized by Terraform (`ephemeral_storage`), which sets `QUIVER_DISK_CACHE_BYTES`.
/// `QUIVER_CACHE_DIR` moves it (the emulator's tests keep theirs in a folder of their own).
pub const CACHE_DIR: &str = "/tmp/quiver-cache";

/// Sets the function's own disk cache on `session`, after a request's settings, so a
/// request never points it elsewhere (off without `QUIVER_DISK_CACHE_BYTES`).
pub fn keep_on_disk(session: &QuiverSession) -> Result<()> {
    let env = quiver_lambda_executor::env;
    let dir = env("QUIVER_CACHE_DIR").unwrap_or_else(|| CACHE_DIR.to_string());
    session.set("quiver.cache_dir", &dir)?;
    let bound = env("QUIVER_DISK_CACHE_BYTES");
    session.set("quiver.disk_cache_bytes", bound.as_deref().unwrap_or("0"))
}
