//! Joins of two big sides on the workers, through an exchange (as Lambada does): a
//! partitioned hash join whose two sides are fragments, and whose build side is estimated
//! too big to travel with its probe side (`broadcast`), runs in two waves of workers.
//!
//! 1. The workers of each side run its fragment and hash the rows on the join keys into
//!    one part per join partition, written as one object per worker.
//! 2. One worker per join partition reads its part of every object of both sides, joins
//!    them, and runs the per-partition operators above the join (a partial aggregate, a
//!    TopK), so that only their output comes back to the coordinator.
//!
//! Both sides hash with DataFusion's repartitioning (one fixed seed), so equal keys meet
//! in the same partition in any process. Here: finding the stages (`exchange_joins`), what
//! each wave runs, and the worker's share of both (`hash_parts`, `over_parts`). Waves,
//! objects and their cleanup are the runner's (`FragmentRunner::exchange`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::Time;
use datafusion::physical_plan::repartition::{BatchPartitioner, RepartitionExec};
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan, Partitioning};
use futures::future::BoxFuture;

use super::broadcast::{distributed_as_required, travels};
use super::coordinator::held_output;
use super::FragmentRunner;
use crate::fragment::{encode, is_fragment, is_per_partition, probe_input, Fragment};

/// A join run through an exchange, with the per-partition operators above it.
pub struct ExchangeStage {
    /// The stage's top as planned; its output takes its place.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The join's build side, then its probe side.
    pub sides: [ExchangeSide; 2],
}

/// One side of an exchanged join: a fragment and the keys its rows are hashed on.
pub struct ExchangeSide {
    pub fragment: Fragment,
    keys: Vec<Arc<dyn PhysicalExpr>>,
}

impl ExchangeSide {
    /// What a first-wave worker runs: the fragment with an empty scan (as
    /// `Fragment::template`) under a hash repartition into `parts` (see `split_side`).
    pub fn template(&self, parts: usize) -> Result<Vec<u8>> {
        let hashed = RepartitionExec::try_new(
            self.fragment.template_plan()?,
            Partitioning::Hash(self.keys.clone(), parts.max(1)),
        )?;
        encode(&(Arc::new(hashed) as Arc<dyn ExecutionPlan>))
    }
}

impl ExchangeStage {
    /// What a second-wave worker runs: the stage with both of the join's inputs empty, to
    /// be filled with one partition's rows (`over_parts`).
    pub fn template(&self) -> Result<Vec<u8>> {
        encode(&over_parts(&self.plan, vec![], vec![])?)
    }
}

/// `plan` with every exchange stage replaced by its output, which `runner` computes; the
/// plan as it was when the runner has no exchange.
pub fn exchange_joins<'a>(
    plan: Arc<dyn ExecutionPlan>,
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    Box::pin(async move {
        let config = context.session_config().options();
        if !runner.exchanges(config) {
            return Ok(plan);
        }
        if let Some(stage) = stage_of(&plan, context, runner.broadcast_limit(config)) {
            let outputs = runner.exchange(&stage, context).await?;
            return held_output(&plan, outputs);
        }
        let mut children = Vec::new();
        for (i, child) in plan.children().into_iter().enumerate() {
            let rewritten = exchange_joins(Arc::clone(child), context, runner).await?;
            children.push(if Arc::ptr_eq(child, &rewritten) {
                rewritten
            } else {
                distributed_as_required(&plan, i, rewritten, context)?
            });
        }
        replace_children_if_necessary(plan, children)
    })
}

/// The stage whose top is `plan`: a chain of per-partition operators down to a partitioned
/// join whose sides are fragments under hash repartitions, the build side estimated at more
/// than `limit` bytes (a smaller one travels with the probe side instead).
fn stage_of(
    plan: &Arc<dyn ExecutionPlan>,
    context: &TaskContext,
    limit: u64,
) -> Option<ExchangeStage> {
    let join = partitioned_join(plan)?;
    let side = |input: &Arc<dyn ExecutionPlan>| {
        let repartition = input.downcast_ref::<RepartitionExec>()?;
        let Partitioning::Hash(keys, _) = repartition.partitioning() else {
            return None;
        };
        let fragment = repartition.input();
        if !is_fragment(fragment) || !travels(fragment, context) {
            return None;
        }
        Some(ExchangeSide {
            fragment: Fragment {
                plan: Arc::clone(fragment),
                bytes: encode(fragment).ok()?,
            },
            keys: keys.clone(),
        })
    };
    let (build, probe) = (side(join.left())?, side(join.right())?);
    (estimated_bytes(&build.fragment) > limit).then(|| ExchangeStage {
        plan: Arc::clone(plan),
        sides: [build, probe],
    })
}

/// The bytes a fragment's output will hold, from the footers' statistics; where they give
/// no size (string columns have no fixed width), the Parquet bytes its buckets read, which
/// decoding rarely makes smaller.
fn estimated_bytes(fragment: &Fragment) -> u64 {
    let statistics =
        StatisticsContext::new().compute(fragment.plan.as_ref(), &StatisticsArgs::new());
    match statistics
        .ok()
        .and_then(|s| s.total_byte_size.get_value().copied())
    {
        Some(bytes) => bytes as u64,
        None => fragment.buckets().iter().map(|bucket| bucket.bytes).sum(),
    }
}

/// The partitioned hash join at the bottom of `plan`'s chain of per-partition operators.
fn partitioned_join(plan: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
    let mut node = plan;
    loop {
        if let Some(join) = node
            .downcast_ref::<HashJoinExec>()
            .filter(|j| *j.partition_mode() == PartitionMode::Partitioned)
        {
            return Some(join);
        }
        if !is_per_partition(node) {
            return None;
        }
        node = probe_input(node)?.1;
    }
}

/// A first-wave template's fragment and the partitioning its output is hashed into.
pub fn split_side(
    template: &Arc<dyn ExecutionPlan>,
) -> Result<(Arc<dyn ExecutionPlan>, Partitioning)> {
    let repartition = template.downcast_ref::<RepartitionExec>().ok_or_else(|| {
        DataFusionError::Plan("an exchange's fragment is not under a hash repartition".into())
    })?;
    Ok((
        Arc::clone(repartition.input()),
        repartition.partitioning().clone(),
    ))
}

/// A fragment's output rows hashed into `partitioning`'s parts, each one batch (or none).
pub fn hash_parts(
    batches: Vec<RecordBatch>,
    partitioning: &Partitioning,
) -> Result<Vec<Vec<RecordBatch>>> {
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Ok(vec![vec![]; partitioning.partition_count()]);
    };
    let mut parts = vec![vec![]; partitioning.partition_count()];
    let mut partitioner = BatchPartitioner::try_new(partitioning.clone(), Time::new(), 0, 1)?;
    for batch in batches {
        partitioner.partition(batch, |part, rows| {
            parts[part].push(rows);
            Ok(())
        })?;
    }
    parts
        .into_iter()
        .map(|rows| match rows.is_empty() {
            true => Ok(vec![]),
            false => Ok(vec![concat_batches(&schema, &rows)?]),
        })
        .collect()
}

/// A second-wave template over one join partition's rows of each side: the join made
/// anew over them (a fresh one builds its own hash table), the operators above rebuilt.
pub fn over_parts(
    stage: &Arc<dyn ExecutionPlan>,
    build: Vec<RecordBatch>,
    probe: Vec<RecordBatch>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(join) = stage
        .downcast_ref::<HashJoinExec>()
        .filter(|j| *j.partition_mode() == PartitionMode::Partitioned)
    {
        let held = |rows: Vec<RecordBatch>, side: &Arc<dyn ExecutionPlan>| {
            MemorySourceConfig::try_new_exec(&[rows], side.schema(), None)
        };
        return Ok(Arc::new(HashJoinExec::try_new(
            held(build, join.left())?,
            held(probe, join.right())?,
            join.on().to_vec(),
            join.filter().cloned(),
            join.join_type(),
            join.projection.as_deref().map(<[usize]>::to_vec),
            PartitionMode::Partitioned,
            join.null_equality(),
            join.null_aware,
        )?));
    }
    let (index, child) = probe_input(stage)
        .ok_or_else(|| DataFusionError::Internal("an exchange stage without its join".into()))?;
    let mut children: Vec<_> = stage.children().into_iter().cloned().collect();
    children[index] = over_parts(child, build, probe)?;
    replace_children_if_necessary(Arc::clone(stage), children)
}
