//! The Lambda executor: how a plan's fragments reach Quiver's worker functions and come
//! back. The `quiver` command (`--executor lambda`) and the coordinator function both run
//! queries through it; the functions themselves live in `lambda/`.
//!
//! options (`lambda.*` settings) → protocol (what travels) → results (inline or spilled)
//! → model (a fan-out's time and GB-seconds, measured) → invoke (the Invoke API) → hedge (retries, duplicates for stragglers) → deal (buckets
//! to workers) → waves (a fragment's requests at once) → tree (sub-coordinators) →
//! exchange (joins of two big sides, in two waves), each a part of the runner's work (`runner`)
//! → executor (the runner as a `FragmentRunner`)

mod deal;
pub mod exchange;
pub mod executor;
pub mod hedge;
pub mod invoke;
pub mod model;
pub mod options;
pub mod protocol;
pub mod results;
mod runner;
pub mod tree;
mod waves;

use std::sync::Arc;
use std::time::Duration;

use executor::LambdaRunner;
use invoke::Invoker;

/// A runner that invokes `worker_function` (and `coordinator_function`, for tree
/// invocation) at `QUIVER_LAMBDA_ENDPOINT` or AWS's endpoint.
pub async fn runner_from_env(
    worker_function: String,
    coordinator_function: Option<String>,
    endpoint: Option<String>,
) -> Arc<LambdaRunner> {
    let endpoint = endpoint.or_else(|| env("QUIVER_LAMBDA_ENDPOINT"));
    // A worker runs at most 15 minutes; the invocation waits a little longer.
    let timeout = env("QUIVER_INVOKE_TIMEOUT_SECS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(910);
    let invoker = Invoker::new(endpoint.as_deref(), Duration::from_secs(timeout)).await;
    Arc::new(LambdaRunner::new(
        invoker,
        worker_function,
        coordinator_function,
    ))
}

/// Adds the `lambda.*` settings to a session, with their defaults from the environment.
pub fn register_options(session: &quiver_core::QuiverSession) {
    session.add_settings(options::LambdaOptions::from_env());
}

/// An environment variable, unset when empty.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}
