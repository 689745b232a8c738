//! Joins on the workers: a hash join whose probe side reads a scan gets its build side
//! computed first and held in memory, and that memory travels inside the probe side's
//! fragment. The join (and the partial aggregate above it, if any) then runs where the
//! probe side is read, and only joined rows, or partial states, come back.
//!
//! Only joins that emit nothing for unmatched build rows qualify (inner, right, right
//! semi, right anti, right mark): each bucket probes on its own, and no one would know
//! which build rows no bucket matched. A build side larger than the runner's limit stays
//! on the coordinator, computed once all the same; or, if the runner has an exchange and
//! both sides are scans, the join is left to it (`exchange`), which also takes the joins
//! whose build side the footers' statistics already put well over the limit.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::JoinType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{Distribution, PartitioningSatisfaction};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::distribution_requirements::ChildSatisfactionOptions;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};
use futures::future::BoxFuture;

use super::{execute_with_fragments, FragmentRunner};
use crate::fragment::{decode, encode, is_fragment};

/// `plan` with the build side of every join that can run on the workers computed and
/// moved into its probe side's fragment (see the module's comment).
pub fn broadcast_joins<'a>(
    plan: Arc<dyn ExecutionPlan>,
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    broadcast_below(plan, false, context, runner)
}

/// `broadcast_joins` below a chain of per-partition operators that `reduced` (a partial
/// aggregate or TopK in it), which is what makes an exchange worth it (`exchange`).
fn broadcast_below<'a>(
    plan: Arc<dyn ExecutionPlan>,
    reduced: bool,
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    Box::pin(async move {
        let reduced_here = reduced || super::exchange::reduces_rows(&plan);
        let chained = crate::fragment::is_per_partition(&plan)
            .then(|| crate::fragment::probe_input(&plan).map(|(i, _)| i))
            .flatten();
        let mut children = Vec::new();
        for (i, child) in plan.children().into_iter().enumerate() {
            let below = reduced_here && chained == Some(i);
            let rewritten = broadcast_below(Arc::clone(child), below, context, runner).await?;
            children.push(if Arc::ptr_eq(child, &rewritten) {
                rewritten
            } else {
                distributed_as_required(&plan, i, rewritten, context)?
            });
        }
        let plan = replace_children_if_necessary(plan, children)?;
        Ok(broadcast(&plan, reduced, context, runner)
            .await?
            .unwrap_or(plan))
    })
}

/// The join with its build side computed: inside the probe side's fragment when it fits,
/// else in memory where it was. `None` when the join does not qualify.
async fn broadcast(
    plan: &Arc<dyn ExecutionPlan>,
    reduced: bool,
    context: &Arc<TaskContext>,
    runner: &dyn FragmentRunner,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(join) = plan.downcast_ref::<HashJoinExec>() else {
        return Ok(None);
    };
    let (build, probe) = (below_exchange(join.left()), below_exchange(join.right()));
    if !probes_alone(join)
        || !matches!(
            join.partition_mode(),
            PartitionMode::Partitioned | PartitionMode::CollectLeft
        )
        || !is_fragment(probe)
        || !travels(build, context)
        || super::exchange::takes_unmeasured(join, reduced, context, runner)
    {
        return Ok(None);
    }
    let batches = execute_with_fragments(Arc::clone(build), Arc::clone(context), runner).await?;
    // Compacted: the side travels as Arrow IPC, which would carry whole string buffers.
    let batches = batches
        .iter()
        .map(crate::format::compact_views)
        .collect::<Result<Vec<_>>>()?;
    let held: Arc<dyn ExecutionPlan> =
        MemorySourceConfig::try_new_exec(&[batches], build.schema(), None)?;
    let limit = runner.broadcast_limit(context.session_config().options());
    if memory_bytes(&held) + memory_bytes(probe) > limit {
        if super::exchange::takes(join, reduced, context, runner) {
            return Ok(None);
        }
        // Too big to travel: the coordinator joins as planned, over the computed side,
        // still behind an exchange (a merge of its one partition for a collected side), so
        // that the join is not taken for one that travels.
        let left = match join.partition_mode() {
            PartitionMode::Partitioned => {
                replace_children_if_necessary(Arc::clone(join.left()), vec![Arc::clone(&held)])?
            }
            _ => Arc::new(CoalescePartitionsExec::new(held)),
        };
        let children = vec![left, Arc::clone(join.right())];
        return Ok(Some(replace_children_if_necessary(
            Arc::clone(plan),
            children,
        )?));
    }
    Ok(Some(rejoin(
        join,
        held,
        Arc::clone(probe),
        PartitionMode::CollectLeft,
    )?))
}

/// `join` made anew over `left` and `right` in `mode`: its keys, filter, type and
/// projection kept, its runtime state (a built hash table) not.
pub(super) fn rejoin(
    join: &HashJoinExec,
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    mode: PartitionMode,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(Arc::new(HashJoinExec::try_new(
        left,
        right,
        join.on().to_vec(),
        join.filter().cloned(),
        join.join_type(),
        join.projection.as_deref().map(<[usize]>::to_vec),
        mode,
        join.null_equality(),
        join.null_aware,
    )?))
}

/// Whether `join` emits nothing for build rows no probe row matched (inner, right, right
/// semi, anti and mark joins), so that each bucket can probe the build side on its own.
pub fn probes_alone(join: &HashJoinExec) -> bool {
    !join.null_aware
        && matches!(
            join.join_type(),
            JoinType::Inner
                | JoinType::Right
                | JoinType::RightSemi
                | JoinType::RightAnti
                | JoinType::RightMark
        )
}

/// A join input without the exchange the planner put above it (a hash repartition for a
/// partitioned join, a merge for a collected build side).
pub(super) fn below_exchange(plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    let is_exchange = plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some();
    match plan.children().as_slice() {
        [only] if is_exchange => only,
        _ => plan,
    }
}

/// The rows `plan` holds, if it is data held in memory.
fn memory_source(plan: &Arc<dyn ExecutionPlan>) -> Option<&MemorySourceConfig> {
    plan.downcast_ref::<DataSourceExec>()?
        .data_source()
        .downcast_ref::<MemorySourceConfig>()
}

/// Whether `plan` is data held in memory.
pub fn is_memory(plan: &Arc<dyn ExecutionPlan>) -> bool {
    memory_source(plan).is_some()
}

/// Bytes of the data held in memory anywhere in `plan`: what travels with it.
fn memory_bytes(plan: &Arc<dyn ExecutionPlan>) -> u64 {
    let own = memory_source(plan).map_or(0, |memory| {
        memory
            .partitions()
            .iter()
            .flatten()
            .map(RecordBatch::get_array_memory_size)
            .sum::<usize>() as u64
    });
    own + plan.children().into_iter().map(memory_bytes).sum::<u64>()
}

/// Whether `plan` runs on its own: an expression that needs a value from above it (a
/// scalar subquery's) does not survive encoding. Rows already held always do; encoding
/// them only to find that out copied a side kept here (over the limit, so possibly
/// hundreds of MB) each time an enclosing build side was computed.
fn travels(plan: &Arc<dyn ExecutionPlan>, context: &TaskContext) -> bool {
    is_memory(plan)
        || encode(plan)
            .and_then(|bytes| decode(&bytes, context))
            .is_ok()
}

/// A rewritten `child` as `parent` requires its `i`th input to be partitioned: a join that
/// became a broadcast one no longer hashes its output on the keys, so an operator above
/// that counted on it gets the repartition the planner had left out.
pub(super) fn distributed_as_required(
    parent: &Arc<dyn ExecutionPlan>,
    i: usize,
    child: Arc<dyn ExecutionPlan>,
    context: &TaskContext,
) -> Result<Arc<dyn ExecutionPlan>> {
    let requirements = parent.input_distribution_requirements();
    let satisfaction =
        requirements.child_satisfaction(i, child.as_ref(), ChildSatisfactionOptions::new())?;
    let Some(required) = requirements.child_distribution(i) else {
        return Ok(child);
    };
    if satisfaction == PartitioningSatisfaction::Exact {
        return Ok(child);
    }
    Ok(match required {
        Distribution::SinglePartition => Arc::new(CoalescePartitionsExec::new(child)),
        Distribution::UnspecifiedDistribution => child,
        keyed => {
            let count = context.session_config().target_partitions();
            Arc::new(RepartitionExec::try_new(
                child,
                keyed.clone().create_partitioning(count),
            )?)
        }
    })
}
