//! The coordinator function: SQL by direct invoke or a function URL, fanned out to the
//! worker function named by `QUIVER_WORKER_FUNCTION` (see `quiver_lambda::coordinator`).

// The coordinator's future nests every layer of a query's I/O (retries included) and
// outgrew rustc's default depth of 128 when computing its layout.
#![recursion_limit = "256"]

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use quiver_lambda::coordinator::Coordinator;
use serde_json::Value;

/// mimalloc (see `quiver_core::allocator`).
#[global_allocator]
static ALLOCATOR: quiver_core::allocator::Allocator = quiver_core::allocator::Allocator;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let worker =
        quiver_lambda_executor::env("QUIVER_WORKER_FUNCTION").unwrap_or_else(|| "worker".into());
    // Lambda names the function itself; sub-coordinators are invocations of it.
    let itself = quiver_lambda_executor::env("AWS_LAMBDA_FUNCTION_NAME");
    let runner = quiver_lambda_executor::runner_from_env(worker, itself, None).await;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let coordinator = Arc::new(Coordinator::new(runner, threads)?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let coordinator = Arc::clone(&coordinator);
        async move {
            coordinator
                .handle(event.payload)
                .await
                .map_err(|e| Error::from(quiver_core::describe(&e)))
        }
    }))
    .await
}
