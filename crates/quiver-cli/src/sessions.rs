//! Sessions as the command makes them: the Lambda executor's settings known, the disk
//! cache on, and `--set`'s refusals worded for the command line.

use quiver_core::{describe, QuiverSession, SessionOptions, DISK_CACHE_BYTES};

/// A session as the command runs one: the Lambda executor's settings known, and remote
/// bytes kept on disk for the next run (4 GiB in the user's cache folder, or
/// `QUIVER_DISK_CACHE_BYTES`, 0 for none; `quiver.disk_cache_bytes` changes it after).
pub fn new_session(options: SessionOptions) -> Result<QuiverSession, String> {
    let session = QuiverSession::new(options).map_err(|e| describe(&e))?;
    quiver_lambda_executor::register_options(&session);
    let bound = std::env::var("QUIVER_DISK_CACHE_BYTES")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DISK_CACHE_BYTES.to_string());
    session
        .set("quiver.disk_cache_bytes", bound.trim())
        .map_err(|e| {
            format!(
                "QUIVER_DISK_CACHE_BYTES={bound}: not a byte count ({})",
                describe(&e)
            )
        })?;
    Ok(session)
}

/// A refused `--set`, naming the setting once.
pub fn setting_error(key: &str, error: &datafusion::error::DataFusionError) -> String {
    let message = describe(error);
    if message.contains(key) {
        message
    } else {
        format!("{key}: {message}")
    }
}
