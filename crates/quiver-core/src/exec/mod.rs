//! Executors: who drives a physical plan. DataFusion on its own threads, or fragments
//! (see `fragment`) run by a `FragmentRunner` while the coordinator merges their outputs:
//! locally on rayon (the browser, `--executor fragments`, a Lambda worker's share), or on
//! Lambda workers (`quiver-lambda-executor`).
//!
//! compute (the pool fragments compute on) → local (a fragment's partitions on that pool) →
//! coordinator (fragments out to a runner, outputs merged), which first moves joins' small
//! build sides into their probe sides' fragments (broadcast), then runs joins of two scans
//! left over through the runner's exchange (exchange)

pub mod broadcast;
pub mod cancel;
pub mod compute;
pub mod coordinator;
pub mod exchange;
pub mod local;

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result;
use datafusion::execution::TaskContext;

use crate::copy::{CopyTarget, WrittenFile};
use crate::fragment::Fragment;

pub use compute::ComputePool;
pub use coordinator::{execute_with_fragments, travelling_fragments};
pub use local::{run_fragment, run_partitions, RayonRunner};

/// Who drives the physical plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutorKind {
    /// DataFusion runs the whole plan on its threads (the native default).
    #[default]
    DataFusion,
    /// Fragments run bucket by bucket on rayon, as in the browser and on Lambda workers.
    Fragments,
    /// Fragments run wherever the session's fragment runner sends them (Lambda workers).
    Remote,
}

/// Who runs fragments: rayon threads here, or Lambda workers.
#[async_trait::async_trait]
pub trait FragmentRunner: Send + Sync {
    /// All partitions of `fragment`'s output; the coordinator merges them.
    async fn run(
        &self,
        fragment: &Fragment,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>>;

    /// Runs `fragment` and writes its output where it runs, under `target` (each worker
    /// its own files, no manifest); `None` when this runner only returns outputs.
    async fn write(
        &self,
        _fragment: &Fragment,
        _target: &CopyTarget,
        _context: &Arc<TaskContext>,
    ) -> Option<Result<Vec<WrittenFile>>> {
        None
    }

    /// The most bytes of build sides that may travel inside one fragment (see
    /// `broadcast`); 0 keeps every join on the coordinator.
    fn broadcast_limit(&self, config: &datafusion::common::config::ConfigOptions) -> u64 {
        crate::options::QuiverOptions::of(config).broadcast_bytes
    }

    /// Whether this runner joins two big sides where they are read (`exchange`).
    fn exchanges(&self, _config: &datafusion::common::config::ConfigOptions) -> bool {
        false
    }

    /// An exchange stage's output partitions, computed by two waves of workers (see
    /// `exchange`); only called when `exchanges` says so.
    async fn exchange(
        &self,
        _stage: &exchange::ExchangeStage,
        _context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        Err(datafusion::error::DataFusionError::NotImplemented(
            "this runner has no exchange".into(),
        ))
    }

    /// What running a scan that reads `reads` would spend on workers, under `config`'s
    /// settings (`EXPLAIN COST`).
    fn estimate(
        &self,
        _reads: &crate::cost::PlannedReads,
        _config: &datafusion::common::config::ConfigOptions,
    ) -> crate::cost::WorkerCost {
        crate::cost::WorkerCost::default()
    }
}
