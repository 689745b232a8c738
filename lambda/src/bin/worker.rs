//! The worker function: runs a fragment over its buckets (see `quiver_lambda::worker`).
//! `QUIVER_FAULT_FILE` injects faults for tests: when that file exists, the worker fails
//! the way it says (`error`, `panic`, `crash`, or `sleep=SECONDS` before working as usual),
//! once (it deletes the file), or on every invocation while the file says `always`;
//! `worker=N` in it limits the fault to worker N.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use quiver_lambda::worker::{handle, Worker};
use quiver_lambda_executor::protocol::{WorkerRequest, WorkerResponse};

/// mimalloc (see `quiver_core::allocator`).
#[global_allocator]
static ALLOCATOR: quiver_core::allocator::Allocator = quiver_core::allocator::Allocator;

async fn injected_fault(worker: usize) -> Result<(), Error> {
    let Some(path) = quiver_lambda_executor::env("QUIVER_FAULT_FILE") else {
        return Ok(());
    };
    let Ok(kind) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    // "error always worker=1": only that worker takes the fault.
    let only = kind
        .split_whitespace()
        .find_map(|w| w.strip_prefix("worker="));
    if only.is_some_and(|only| only != worker.to_string()) {
        return Ok(());
    }
    if !kind.contains("always") && std::fs::remove_file(&path).is_err() {
        return Ok(()); // another worker took it
    }
    let first = kind.split_whitespace().next().unwrap_or_default();
    if let Some(seconds) = first.strip_prefix("sleep=") {
        let seconds: u64 = seconds.parse().map_err(|_| "injected fault: bad sleep")?;
        tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
        return Ok(());
    }
    match first {
        "panic" => panic!("injected fault: panic"),
        "crash" => std::process::abort(),
        _ => Err("injected fault: error".into()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let worker = Arc::new(Worker::new()?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<WorkerRequest>| {
        let worker = Arc::clone(&worker);
        async move {
            injected_fault(event.payload.worker).await?;
            let started = std::time::Instant::now();
            let (query, number, buckets) = (
                event.payload.query_id.clone(),
                event.payload.worker,
                event.payload.buckets.len(),
            );
            let response: WorkerResponse = handle(worker, event.payload)
                .await
                .map_err(|e| Error::from(quiver_core::describe(&e)))?;
            // One write: the emulator's instances share a log, and stderr is unbuffered,
            // so a line formatted piece by piece interleaved with another worker's.
            let line = format!(
                "quiver worker {number} of {query}: {buckets} buckets, {} rows, {} requests, \
                 {} bytes in {:.0} ms, peak {} MB\n",
                response.metrics.rows,
                response.metrics.reads.requests,
                response.metrics.reads.bytes_read,
                started.elapsed().as_secs_f64() * 1e3,
                response.metrics.peak_memory >> 20
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            Ok::<_, Error>(response)
        }
    }))
    .await
}
