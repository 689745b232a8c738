//! Sessions as the command makes them: the Lambda executor's settings known, the disk
//! cache on, the measured rates kept beside it, a query's executor and Lambda function,
//! and `--set`'s refusals worded for the command line.

use std::sync::Arc;

use quiver_core::options::QuiverOptions;
use quiver_core::{
    default_cache_dir, describe, ExecutorKind, QuiverSession, SessionOptions, DISK_CACHE_BYTES,
};
use quiver_lambda_executor::executor::LambdaRunner;

/// The file under the cache folder that keeps what this machine was measured to do.
pub const RATES_FILE: &str = "rates.json";

/// A query's executor, and the Lambda functions `lambda` and `auto` may send fragments to.
pub struct Executor {
    /// `None`: `auto` where a worker function is named, else local.
    pub kind: Option<ExecutorKind>,
    pub function: Option<String>,
    pub coordinator: Option<String>,
    pub endpoint: Option<String>,
}

/// A session for a query: its executor (with the Lambda runner it sends fragments to,
/// where a worker function is named), `settings` applied, and the measured rates kept in
/// the cache folder the settings name.
pub async fn query_session(
    executor: &Executor,
    settings: &[(String, String)],
    threads: usize,
) -> Result<(QuiverSession, Option<Arc<LambdaRunner>>), String> {
    let function = (executor.function.clone())
        .or_else(|| quiver_lambda_executor::env("QUIVER_WORKER_FUNCTION"));
    let kind = executor.kind.unwrap_or(match function {
        Some(_) => ExecutorKind::Auto,
        None => ExecutorKind::DataFusion,
    });
    let mut session = new_session(SessionOptions {
        threads,
        executor: kind,
    })?;
    let lambda = match (kind, function) {
        (ExecutorKind::Remote, None) => {
            return Err(
                "--executor lambda needs --function NAME (the deployed worker function)".into(),
            )
        }
        (ExecutorKind::Remote | ExecutorKind::Auto, Some(function)) => {
            let coordinator = (executor.coordinator.clone())
                .or_else(|| quiver_lambda_executor::env("QUIVER_COORDINATOR_FUNCTION"));
            let endpoint = executor.endpoint.clone();
            let runner =
                quiver_lambda_executor::runner_from_env(function, coordinator, endpoint).await;
            session = session.with_fragment_runner(Arc::clone(&runner) as _);
            Some(runner)
        }
        _ => None,
    };
    for (key, value) in settings {
        session
            .set(key, value)
            .map_err(|e| setting_error(key, &e))?;
    }
    keep_rates(&session);
    Ok((session, lambda))
}

/// Keeps the session's measured rates in its cache folder (`quiver.cache_dir`, else the
/// user's), so that each run starts from what the runs before it measured.
pub fn keep_rates(session: &QuiverSession) {
    let options = QuiverOptions::of(session.context().state_ref().read().config_options());
    let folder = match options.cache_dir.trim() {
        "" => default_cache_dir(),
        dir => Some(dir.into()),
    };
    if let Some(folder) = folder {
        session.runtime().rates.keep_in(folder.join(RATES_FILE));
    }
}

/// A session as the command runs one: the Lambda executor's settings known, and remote
/// bytes kept on disk for the next run (4 GiB in the user's cache folder, or
/// `QUIVER_DISK_CACHE_BYTES`, 0 for none; `quiver.disk_cache_bytes` changes it after). The
/// cache folder is `QUIVER_CACHE_DIR` where set, as for the Lambda functions.
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
    if let Some(folder) = std::env::var("QUIVER_CACHE_DIR")
        .ok()
        .filter(|v| !v.is_empty())
    {
        (session.set("quiver.cache_dir", &folder)).map_err(|e| describe(&e))?;
    }
    keep_rates(&session);
    Ok(session)
}

/// Applies `--set`'s `KEY=VALUE` texts, in order.
pub fn apply_settings(session: &QuiverSession, settings: &[String]) -> Result<(), String> {
    for setting in settings {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("--set takes KEY=VALUE, not '{setting}'"))?;
        session
            .set(key.trim(), value.trim())
            .map_err(|e| setting_error(key, &e))?;
    }
    Ok(())
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
