//! Joins of two scans on the workers, through an exchange (as Lambada does): a hash join
//! whose two sides are fragments, and which `broadcast` cannot send to its probe side (its
//! build side is too big to travel, as measured or as estimated well over the limit; or
//! its type needs every probe row to see a build row: left, full, left semi and anti
//! joins), runs in two waves of workers.
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
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::Time;
use datafusion::physical_plan::repartition::{BatchPartitioner, RepartitionExec};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan, Partitioning};
use futures::future::BoxFuture;

use super::broadcast::{below_exchange, distributed_as_required, is_memory, rejoin};
use super::coordinator::held_output;
use super::FragmentRunner;
use crate::fragment::{decode, encode, is_fragment, is_per_partition, probe_input, Fragment};

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
        if let Some(stage) = stage_of(&plan, context) {
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

/// Whether `runner` would run `join` through an exchange (see `stage_of`), below a chain
/// of per-partition operators that `reduced` rows or not: so `broadcast` leaves it alone.
pub(super) fn takes(
    join: &HashJoinExec,
    reduced: bool,
    context: &TaskContext,
    runner: &dyn FragmentRunner,
) -> bool {
    taken_sides(join, reduced, context, runner).is_some()
}

/// The sides of a join `runner` would take (see `takes`), each encoded once.
fn taken_sides(
    join: &HashJoinExec,
    reduced: bool,
    context: &TaskContext,
    runner: &dyn FragmentRunner,
) -> Option<[ExchangeSide; 2]> {
    let taken =
        runner.exchanges(context.session_config().options()) && (reduced || keeps_one_side(join));
    taken.then(|| sides(join, context)).flatten()
}

/// Whether `runner` takes `join` without `broadcast` computing its build side to measure it
/// first: the footers' statistics put it over twice the broadcast limit. Statistics after
/// filters are rough (TPC-H Q3 and Q5's build sides were estimated at 18.8 MB against a
/// limit of 16 MiB, and held 9.1 MB); measuring a side costs computing it twice when it
/// does not fit after all, so only those well over are trusted.
pub(super) fn takes_unmeasured(
    join: &HashJoinExec,
    reduced: bool,
    context: &TaskContext,
    runner: &dyn FragmentRunner,
) -> bool {
    let limit = runner.broadcast_limit(context.session_config().options());
    taken_sides(join, reduced, context, runner)
        .is_some_and(|[build, _]| estimated_bytes(&build.fragment) > limit.saturating_mul(2))
}

/// The stage whose top is `plan`: a chain of per-partition operators down to a hash join
/// whose two sides are fragments (below the exchange the planner put over each). After
/// `broadcast`, such a join is one it left: not one that probes alone (left, full, left
/// semi and anti joins), or one whose build side is too big to travel. And the stage must
/// send back less than its sides (`reduces_rows` above the join, or `keeps_one_side`):
/// joined rows held on the coordinator cost it as much memory as the sides would, and the
/// trip through S3 bought nothing (TPC-H Q7, Q9 and Q18 at SF 1 sent back as much or
/// more, after exchanging 100–240 MB).
fn stage_of(plan: &Arc<dyn ExecutionPlan>, context: &TaskContext) -> Option<ExchangeStage> {
    let (join, reduced) = stage_join(plan)?;
    if !reduced && !keeps_one_side(join) {
        return None;
    }
    Some(ExchangeStage {
        plan: Arc::clone(plan),
        sides: sides(join, context)?,
    })
}

/// `join`'s build and probe sides, if both are fragments that travel (below the exchange
/// the planner put over each), with the keys each side's rows hash on.
fn sides(join: &HashJoinExec, context: &TaskContext) -> Option<[ExchangeSide; 2]> {
    let side = |input: &Arc<dyn ExecutionPlan>, keys: Vec<Arc<dyn PhysicalExpr>>| {
        let fragment = below_exchange(input);
        if !is_fragment(fragment) {
            return None;
        }
        // Encoded once; a fragment whose bytes do not decode (a scalar subquery's value
        // in it) does not travel.
        let bytes = encode(fragment).ok()?;
        decode(&bytes, context).ok()?;
        Some(ExchangeSide {
            fragment: Fragment {
                plan: Arc::clone(fragment),
                bytes,
            },
            keys,
        })
    };
    let (left, right) = join
        .on()
        .iter()
        .map(|(left, right)| (Arc::clone(left), Arc::clone(right)))
        .unzip();
    Some([side(join.left(), left)?, side(join.right(), right)?])
}

/// A partial aggregate or a TopK: an operator that sends back fewer rows than it reads.
pub(super) fn reduces_rows(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let partial = plan
        .downcast_ref::<AggregateExec>()
        .is_some_and(|a| *a.mode() == AggregateMode::Partial);
    let top_k = plan
        .downcast_ref::<SortExec>()
        .is_some_and(|s| s.fetch().is_some());
    partial || top_k
}

/// A join that emits rows of one side at most (semi, anti and mark joins).
fn keeps_one_side(join: &HashJoinExec) -> bool {
    use datafusion::common::JoinType::*;
    matches!(
        join.join_type(),
        LeftSemi | LeftAnti | RightSemi | RightAnti | LeftMark | RightMark
    )
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

/// The hash join at the bottom of `plan`'s chain of per-partition operators, and whether
/// an operator of the chain `reduces_rows`.
fn stage_join(plan: &Arc<dyn ExecutionPlan>) -> Option<(&HashJoinExec, bool)> {
    let mut node = plan;
    let mut reduced = false;
    loop {
        if let Some(join) = partitionable(node) {
            return Some((join, reduced));
        }
        if !is_per_partition(node) {
            return None;
        }
        reduced |= reduces_rows(node);
        node = probe_input(node)?.1;
    }
}

/// `plan` as a hash join that can run partitioned: partitioned already, or collecting its
/// build side (not yet held in memory, which is `broadcast`'s), and not null-aware.
fn partitionable(plan: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
    plan.downcast_ref::<HashJoinExec>().filter(|join| {
        !join.null_aware
            && match join.partition_mode() {
                PartitionMode::Partitioned => true,
                PartitionMode::CollectLeft => !is_memory(join.left()),
                PartitionMode::Auto => false,
            }
    })
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
    if let Some(join) = partitionable(stage) {
        let held = |rows: Vec<RecordBatch>, side: &Arc<dyn ExecutionPlan>| {
            MemorySourceConfig::try_new_exec(&[rows], side.schema(), None)
        };
        let (left, right) = (held(build, join.left())?, held(probe, join.right())?);
        return rejoin(join, left, right, PartitionMode::Partitioned);
    }
    let (index, child) = probe_input(stage)
        .ok_or_else(|| DataFusionError::Internal("an exchange stage without its join".into()))?;
    let mut children: Vec<_> = stage.children().into_iter().cloned().collect();
    children[index] = over_parts(child, build, probe)?;
    replace_children_if_necessary(Arc::clone(stage), children)
}
