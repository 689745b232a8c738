//! Tail latency of range reads. A GET on a connection that stopped passing bytes would hold
//! its query until the connection is closed (seconds to minutes). Every read of a remote
//! source is timed; one still running past the point where the source's recent reads say it
//! is late (`source::Latencies`) is hedged: a second GET for the same range goes out, the
//! first answer wins and the other is dropped, which cancels it (Starling's remedy).
//! Footers and data take this one path, natively (a tokio timer) and in the browser (the
//! engine worker's `setTimeout`; dropping the loser aborts its fetch). In the browser this is
//! also where a failed read is retried (`get`).

use std::ops::Range;

use bytes::Bytes;
use futures::future::{select, Either};
use web_time::Instant;

#[cfg(target_arch = "wasm32")]
use crate::error::QuiverError;
use crate::error::Result;
use crate::metrics::QueryMetrics;
use crate::source::{HedgePolicy, ObjectMeta, ObjectSource};

/// The bytes of `range` of `object`, hedged when the read is late.
pub async fn read_range(
    source: &dyn ObjectSource,
    object: &ObjectMeta,
    range: Range<u64>,
    policy: &HedgePolicy,
    metrics: &QueryMetrics,
) -> Result<Bytes> {
    if range.start > range.end || range.end > object.size {
        // Never asked of a source (which would allocate it): only a corrupt plan gets here.
        return Err(crate::error::QuiverError::Read {
            path: object.path.clone(),
            start: range.start,
            end: range.end,
            reason: format!("outside the object's {} bytes", object.size),
        });
    }
    let bytes = range.end - range.start;
    let Some(latencies) = source.latencies() else {
        return get(source, object, range).await;
    };
    let started = Instant::now();
    let first = Box::pin(get(source, object, range.clone()));
    let Some(late) = latencies
        .late_after(bytes, policy)
        .filter(|_| timers_available())
    else {
        let read = first.await;
        if read.is_ok() {
            latencies.record(started.elapsed(), bytes);
        }
        return read;
    };
    let first = match select(first, Box::pin(sleep(late))).await {
        Either::Left((read, _)) => {
            if read.is_ok() {
                latencies.record(started.elapsed(), bytes);
            }
            return read;
        }
        Either::Right(((), first)) => first,
    };
    QueryMetrics::add(&metrics.hedged_requests, 1);
    let hedged = Instant::now();
    let second = Box::pin(get(source, object, range));
    // The first to succeed wins and the other is abandoned; a failure waits for the other.
    let (read, took) = match select(first, second).await {
        Either::Left((Ok(read), _)) => (Ok(read), started.elapsed()),
        Either::Right((Ok(read), _)) => (Ok(read), hedged.elapsed()),
        Either::Left((Err(_), second)) => return second.await,
        Either::Right((Err(_), first)) => return first.await,
    };
    QueryMetrics::add(&metrics.abandoned_requests, 1);
    latencies.record(took, bytes);
    read
}

/// One GET, retried in the browser (`retried`).
async fn get(source: &dyn ObjectSource, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
    retried(|| source.get_range(object, range.clone())).await
}

/// `request`, made again in the browser while it fails without an answer (a reset
/// connection, a 5xx): object_store does not retry there (`source::remote::retries`), so
/// this does, on the worker's timer, after 0.1, 0.4 and 1.6 s. Not found, denied and changed
/// are answers. Natively it is made once: object_store retries.
pub async fn retried<T, F, R>(mut request: R) -> Result<T>
where
    R: FnMut() -> F,
    F: std::future::Future<Output = Result<T>>,
{
    #[cfg(target_arch = "wasm32")]
    {
        let mut wait = std::time::Duration::from_millis(100);
        for _ in 0..BROWSER_RETRIES {
            match request().await {
                Err(QuiverError::Io { .. } | QuiverError::Read { .. }) => sleep(wait).await,
                answer => return answer,
            }
            wait *= 4;
        }
    }
    request().await
}

/// Retries of a failed request in the browser (object_store's five natively).
#[cfg(target_arch = "wasm32")]
const BROWSER_RETRIES: usize = 3;

/// Whether a timer can run here: natively, inside a tokio runtime (the command, the Lambda
/// functions, the tests); in the browser, on the engine worker's event loop, where reads run.
fn timers_available() -> bool {
    cfg!(target_arch = "wasm32") || tokio::runtime::Handle::try_current().is_ok()
}

#[cfg(not(target_arch = "wasm32"))]
async fn sleep(duration: std::time::Duration) {
    tokio::time::sleep(duration).await;
}

/// A `setTimeout` of this thread's global scope, on its event loop (`on_event_loop`: the
/// timer's promise is not `Send`).
#[cfg(target_arch = "wasm32")]
async fn sleep(duration: std::time::Duration) {
    use wasm_bindgen::JsCast;
    let millis = i32::try_from(duration.as_millis()).unwrap_or(i32::MAX);
    crate::source::on_event_loop(async move {
        let timer = js_sys::Promise::new(&mut |resolve, _| {
            // `setTimeout` is looked up on the global itself, a worker's or a window's.
            let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
            let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, millis);
        });
        let _ = wasm_bindgen_futures::JsFuture::from(timer).await;
    })
    .await;
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::source::Latencies;
    use async_trait::async_trait;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Reads that take 10 ms, except the ones numbered in `stalled`, which never answer.
    #[derive(Debug, Default)]
    struct Stalling {
        latencies: Latencies,
        reads: AtomicUsize,
        stalled: Vec<usize>,
    }

    #[async_trait]
    impl ObjectSource for Stalling {
        async fn list(&self, _: &str) -> Result<Vec<ObjectMeta>> {
            Ok(vec![])
        }
        async fn head(&self, path: &str) -> Result<ObjectMeta> {
            Err(crate::error::QuiverError::NotFound { path: path.into() })
        }
        async fn get_range(&self, _: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            if self.stalled.contains(&n) {
                futures::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(Bytes::from(vec![7; (range.end - range.start) as usize]))
        }
        fn latencies(&self) -> Option<&Latencies> {
            Some(&self.latencies)
        }
    }

    #[tokio::test]
    async fn a_stalled_read_is_hedged_and_the_duplicate_answers() {
        let source = Stalling {
            stalled: vec![10],
            ..Default::default()
        };
        let object = ObjectMeta {
            path: "s3://b/k".into(),
            size: 100,
            version: "\"1\"".into(),
        };
        let policy = HedgePolicy {
            multiple: 3.0,
            floor: Duration::from_millis(50),
        };
        let metrics = QueryMetrics::default();
        for _ in 0..10 {
            read_range(&source, &object, 0..10, &policy, &metrics)
                .await
                .unwrap();
        }
        assert_eq!(QueryMetrics::get(&metrics.hedged_requests), 0);
        let started = Instant::now();
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            read_range(&source, &object, 0..10, &policy, &metrics),
        )
        .await
        .expect("the stalled read was not hedged")
        .unwrap();
        assert_eq!(read.len(), 10);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(QueryMetrics::get(&metrics.hedged_requests), 1);
        assert_eq!(QueryMetrics::get(&metrics.abandoned_requests), 1);
        assert_eq!(source.reads.load(Ordering::SeqCst), 12);
    }
}
