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

/// Sets `function`'s own disk cache on `session`, after a request's settings, so a request
/// never points it elsewhere (off without `QUIVER_DISK_CACHE_BYTES`). Each function has its
/// folder: on Lambda every instance has its own `/tmp` anyway, and under the emulator, where
/// all share one, a worker then finds only what workers kept, as it would on Lambda.
pub fn keep_on_disk(session: &QuiverSession, function: &str) -> Result<()> {
    let env = quiver_lambda_executor::env;
    let base = env("QUIVER_CACHE_DIR").unwrap_or_else(|| CACHE_DIR.to_string());
    let dir = std::path::Path::new(&base).join(function);
    session.set("quiver.cache_dir", &dir.to_string_lossy())?;
    let bound = env("QUIVER_DISK_CACHE_BYTES");
    session.set("quiver.disk_cache_bytes", bound.as_deref().unwrap_or("0"))
}
