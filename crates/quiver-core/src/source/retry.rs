//! Retries of a remote source's requests where object_store makes none: in the browser its
//! backoff would sleep on tokio's timer, whose clock panics in wasm ("time not implemented
//! on this platform"), so a reset connection or a 503 aborted the module. Here a failed
//! request is made again on the engine worker's own timer. Natively object_store retries
//! (five times, with backoff), and a request is made once here.
//!
//! Also the one timer of the I/O layer (`sleep`): tokio's natively, `setTimeout` in the
//! browser. Hedging (`hedge`) waits on it too.

#[cfg(target_arch = "wasm32")]
use crate::error::QuiverError;
use crate::error::Result;

/// Retries of a failed request in the browser (object_store's five natively).
#[cfg(target_arch = "wasm32")]
const BROWSER_RETRIES: usize = 3;

/// `request`, made again in the browser while it fails without an answer (a reset
/// connection, a 5xx), after 0.1, 0.4 and 1.6 s. Not found, denied and changed are
/// answers. Natively it is made once: object_store retries.
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

/// object_store's retries: `native` natively, none in the browser (see the module's
/// comment; `retried` retries there instead).
pub fn store_retries(native: object_store::RetryConfig) -> object_store::RetryConfig {
    if cfg!(target_arch = "wasm32") {
        object_store::RetryConfig {
            max_retries: 0,
            ..native
        }
    } else {
        native
    }
}

/// Whether a timer can run here: natively, inside a tokio runtime (the command, the Lambda
/// functions, the tests); in the browser, on the engine worker's event loop, where reads run.
pub fn timers_available() -> bool {
    cfg!(target_arch = "wasm32") || tokio::runtime::Handle::try_current().is_ok()
}

#[cfg(not(target_arch = "wasm32"))]
pub async fn sleep(duration: std::time::Duration) {
    tokio::time::sleep(duration).await;
}

/// A `setTimeout` of this thread's global scope, on its event loop (`on_event_loop`: the
/// timer's promise is not `Send`).
#[cfg(target_arch = "wasm32")]
pub async fn sleep(duration: std::time::Duration) {
    use wasm_bindgen::JsCast;
    let millis = i32::try_from(duration.as_millis()).unwrap_or(i32::MAX);
    super::on_event_loop(async move {
        let timer = js_sys::Promise::new(&mut |resolve, _| {
            // `setTimeout` is looked up on the global itself, a worker's or a window's.
            let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
            let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, millis);
        });
        let _ = wasm_bindgen_futures::JsFuture::from(timer).await;
    })
    .await;
}
