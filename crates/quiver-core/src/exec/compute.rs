//! Where fragments compute: synchronous work over bytes already in memory, handed to
//! threads that never wait on the network. The caller awaits the answer, so the thread
//! that drives I/O (the browser worker's event loop) keeps running while others compute.

use std::future::Future;

use futures::channel::oneshot;

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
        let job = move || {
            let _ = sender.send(job());
        };
        match self {
            Self::Own(pool) => pool.spawn(job),
            Self::Global => rayon::spawn(job),
            Self::Inline => job(),
        }
        async move {
            receiver
                .await
                .map_err(|_| DataFusionError::Internal("a compute thread died".into()))?
        }
    }
}
