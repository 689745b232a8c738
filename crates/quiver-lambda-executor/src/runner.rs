//! The Lambda runner itself: the functions it invokes, and what their workers did. The
//! rooms above each add a part of its work (`deal`, `waves`, `tree`, `exchange`), and
//! `executor` makes it a `FragmentRunner`.

use std::sync::Mutex;

use crate::invoke::Invoker;
use crate::protocol::WorkerMetrics;

pub struct LambdaRunner {
    pub(crate) invoker: Invoker,
    pub(crate) worker_function: String,
    /// This coordinator's own function, invoked as a sub-coordinator; none from the CLI.
    pub(crate) coordinator_function: Option<String>,
    /// What the workers of the last query did, summed.
    metrics: Mutex<WorkerMetrics>,
}

impl LambdaRunner {
    pub fn new(
        invoker: Invoker,
        worker_function: String,
        coordinator_function: Option<String>,
    ) -> Self {
        Self {
            invoker,
            worker_function,
            coordinator_function,
            metrics: Mutex::default(),
        }
    }

    /// The workers' metrics since the last call, summed.
    pub fn take_metrics(&self) -> WorkerMetrics {
        std::mem::take(&mut *self.metrics.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn add_metrics(&self, metrics: &WorkerMetrics) {
        self.metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(metrics);
    }
}
