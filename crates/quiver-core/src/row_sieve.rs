//! The node of the rules that drop rows a grouping above would not miss (`distinct_probes`,
//! `adjacent_repeats`): it passes its input on, each partition's batches through a sieve
//! of its kind over some key columns, and counts what the sieves dropped.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{future, StreamExt, TryStreamExt};

/// Whether a sieve that has read `read` rows and kept `kept` of them still pays: each
/// judgement is a number of rows read and the share of them a sieve may have kept by then.
pub(crate) fn still_pays(judgements: &[(usize, f64)], read: usize, kept: usize) -> bool {
    (judgements.iter()).all(|&(rows, share)| read < rows || kept as f64 <= share * read as f64)
}

/// One partition's sieve: the rows of each batch it keeps, in order.
pub(crate) trait Sieve: Send {
    fn sift(&mut self, batch: RecordBatch) -> Result<RecordBatch>;
}

/// A kind of sieve: its node's name, and a fresh sieve for each partition.
pub(crate) trait SieveKind: fmt::Debug + Send + Sync + 'static {
    /// The node's name in plans.
    const NAME: &'static str;

    /// The sieve of `partition` over `keys` (columns of the input, by index).
    fn sieve(
        &self,
        keys: &[usize],
        partition: usize,
        context: &TaskContext,
        input: &Arc<dyn ExecutionPlan>,
    ) -> Result<Box<dyn Sieve>>;
}

/// Passes its input's rows on through a sieve of kind `K` per partition.
#[derive(Debug)]
pub(crate) struct SieveExec<K: SieveKind> {
    kind: Arc<K>,
    input: Arc<dyn ExecutionPlan>,
    /// The columns whose values tell rows apart, by index.
    keys: Vec<usize>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl<K: SieveKind> SieveExec<K> {
    pub(crate) fn new(kind: Arc<K>, input: Arc<dyn ExecutionPlan>, keys: Vec<usize>) -> Self {
        let properties = Arc::clone(input.properties());
        Self {
            kind,
            input,
            keys,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl<K: SieveKind> DisplayAs for SieveExec<K> {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let schema = self.input.schema();
        let keys: Vec<&str> = (self.keys.iter())
            .map(|&i| schema.field(i).name().as_str())
            .collect();
        write!(f, "{}: keys=[{}]", K::NAME, keys.join(", "))
    }
}

impl<K: SieveKind> ExecutionPlan for SieveExec<K> {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[_; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal(format!("{} has one child", K::NAME)))?;
        let kind = Arc::clone(&self.kind);
        Ok(Arc::new(Self::new(kind, input, self.keys.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut sieve = (self.kind).sieve(&self.keys, partition, &context, &self.input)?;
        let input = self.input.execute(partition, context)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let compute = baseline.elapsed_compute().clone();
        let dropped = MetricBuilder::new(&self.metrics).counter("dropped_rows", partition);
        let sifted = input
            .map(move |batch| {
                let batch = batch?;
                let _timer = compute.timer();
                let rows = batch.num_rows();
                let kept = sieve.sift(batch)?;
                dropped.add(rows - kept.num_rows());
                Ok(kept)
            })
            .try_filter(|batch| future::ready(batch.num_rows() > 0))
            .inspect_ok(move |batch| baseline.record_output(batch.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.input.schema(),
            sifted,
        )))
    }

    /// Its keys are columns of its input, none an expression.
    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
