//! Who runs fragments: the `FragmentRunner` trait the coordinator sends them to (rayon
//! threads here, Lambda workers from `quiver-lambda-executor`), and which executor drives
//! a session's plans.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;

use crate::copy::{CopyTarget, WrittenFile};
use crate::cost::{PlannedReads, WorkerCost};
use crate::fragment::{ExchangeStage, Fragment};
use crate::options::QuiverOptions;
use crate::rates::MeasuredRates;

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
    /// Each query runs here (as `DataFusion`) or remotely, whichever the estimates and
    /// `quiver.place` pick (see `place`).
    Auto,
}

impl ExecutorKind {
    /// `local` (or `datafusion`), `fragments`, `lambda` (or `remote`), `auto`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "local" | "datafusion" => Some(Self::DataFusion),
            "fragments" => Some(Self::Fragments),
            "lambda" | "remote" => Some(Self::Remote),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }
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
    fn broadcast_limit(&self, config: &ConfigOptions) -> u64 {
        QuiverOptions::of(config).broadcast_bytes
    }

    /// Whether this runner joins two big sides where they are read (`exchange`).
    fn exchanges(&self, _config: &ConfigOptions) -> bool {
        false
    }

    /// An exchange stage's output partitions, computed by two waves of workers (see
    /// `exchange`); only called when `exchanges` says so.
    async fn exchange(
        &self,
        _stage: &ExchangeStage,
        _context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        Err(DataFusionError::NotImplemented(
            "this runner has no exchange".into(),
        ))
    }

    /// What running a scan that reads `reads` would spend on workers, under `config`'s
    /// settings and from what workers were `measured` to do (`EXPLAIN COST`).
    fn estimate(
        &self,
        _reads: &PlannedReads,
        _config: &ConfigOptions,
        _measured: &MeasuredRates,
    ) -> WorkerCost {
        WorkerCost::default()
    }
}
