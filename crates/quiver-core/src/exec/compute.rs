//! Where fragments compute: synchronous work over bytes already in memory, handed to
//! threads that never wait on the network. The caller awaits the answer, so the thread
//! that drives I/O (the browser worker's event loop) keeps running while others compute.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::channel::oneshot;
use futures::future::{select, Either};

use datafusion::error::{DataFusionError, Result};

pub enum ComputePool {
    /// A pool of our own: native sessions and Lambda workers.
    Own(rayon::ThreadPool),
    /// rayon's global pool, which wasm-bindgen-rayon builds from Web Workers in the browser.
    Global,
    /// The calling thread itself: the single-threaded browser build has no other thread.
    Inline,
}

impl ComputePool {
    /// The pool a session gets on this target: its own threads natively, the Web Workers'
    /// pool in the threaded browser build, none in the single-threaded one.
    pub fn for_target(threads: usize) -> Result<Self> {
        if cfg!(all(target_arch = "wasm32", target_feature = "atomics")) {
            return Ok(Self::Global);
        }
        if cfg!(target_arch = "wasm32") {
            return Ok(Self::Inline);
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("quiver-compute-{i}"))
            .build()
            .map(Self::Own)
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }

    pub fn threads(&self) -> usize {
        match self {
            Self::Own(pool) => pool.current_num_threads(),
            Self::Global => rayon::current_num_threads(),
            Self::Inline => 1,
        }
    }

    /// Starts `job` on a compute thread now; the returned future gives its answer.
    pub fn start<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send + 'static {
        let (sender, receiver) = oneshot::channel();
        self.spawn(move || {
            let _ = sender.send(job());
        });
        answer_of(receiver)
    }

    /// Runs the future `work` makes to its end on a compute thread, under a current-thread
    /// tokio runtime (DataFusion's exchanges spawn tokio tasks). Dropping the returned future
    /// stops the work at its next yield, and sets the `Cancelled` flag `work` is given, for
    /// work that does not yield (an operator that emits batch after batch without waiting:
    /// a cancelled cross join held its thread for minutes).
    pub fn start_async<T, F>(
        &self,
        work: impl FnOnce(Cancelled) -> F + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: Future<Output = Result<T>>,
    {
        let (mut sender, receiver) = oneshot::channel();
        let cancelled = Cancelled::default();
        let on_drop = SetOnDrop(cancelled.clone());
        self.spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(DataFusionError::External(Box::new(e))));
                    return;
                }
            };
            let answer = runtime.block_on(async {
                let work = std::pin::pin!(work(cancelled));
                match select(work, sender.cancellation()).await {
                    Either::Left((answer, _)) => Some(answer),
                    Either::Right(_) => None, // nobody waits for it any more
                }
            });
            if let Some(answer) = answer {
                let _ = sender.send(answer);
            }
        });
        async move {
            let _on_drop = on_drop;
            answer_of(receiver).await
        }
    }

    fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        match self {
            Self::Own(pool) => {
                // The caller's tokio runtime, entered on the compute thread: an operator
                // that spilled reads its files back through tokio's blocking pool, which
                // panicked without it (a sort over its memory limit on a Lambda worker).
                let runtime = tokio::runtime::Handle::try_current().ok();
                pool.spawn(move || {
                    let _entered = runtime.as_ref().map(|runtime| runtime.enter());
                    job()
                })
            }
            Self::Global => rayon::spawn(job),
            Self::Inline => job(),
        }
    }
}

/// Set when nobody waits for a `start_async` answer any more.
#[derive(Debug, Clone, Default)]
pub struct Cancelled(Arc<AtomicBool>);

impl Cancelled {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets its flag when the future holding it is dropped (finished or not).
struct SetOnDrop(Cancelled);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        (self.0).0.store(true, Ordering::Relaxed);
    }
}

async fn answer_of<T>(receiver: oneshot::Receiver<Result<T>>) -> Result<T> {
    receiver
        .await
        .map_err(|_| DataFusionError::Internal("a compute thread died".into()))?
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    use std::time::Duration;

    use super::*;

    #[test]
    fn start_async_gives_the_answer() {
        let pool = ComputePool::for_target(1).unwrap();
        let answer = futures::executor::block_on(pool.start_async(|_| async { Ok(42) }));
        assert_eq!(answer.unwrap(), 42);
    }

    /// A cancelled query drops the future; the work must not go on holding the thread.
    #[test]
    fn dropping_start_async_stops_the_work_at_its_next_yield() {
        let pool = ComputePool::for_target(1).unwrap();
        let (ended, ending) = channel::<()>();
        let answer = pool.start_async(move |_| async move {
            let _ended = ended; // dropped (disconnecting `ending`) when the work stops
            loop {
                tokio::task::yield_now().await;
            }
            #[allow(unreachable_code)]
            Ok(())
        });
        drop(answer);
        let stopped = ending.recv_timeout(Duration::from_secs(10));
        assert_eq!(stopped, Err(RecvTimeoutError::Disconnected));
        // and the thread is free for the next job
        let next = futures::executor::block_on(pool.start(|| Ok(7)));
        assert_eq!(next.unwrap(), 7);
    }

    /// Work that never yields sees the flag once its answer is no longer awaited.
    #[test]
    fn dropping_start_async_sets_the_flag_for_work_that_never_yields() {
        let pool = ComputePool::for_target(1).unwrap();
        let (ended, ending) = channel::<()>();
        let answer = pool.start_async(move |cancelled| async move {
            let _ended = ended;
            while !cancelled.is_set() {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        });
        drop(answer);
        let stopped = ending.recv_timeout(Duration::from_secs(10));
        assert_eq!(stopped, Err(RecvTimeoutError::Disconnected));
    }
}
