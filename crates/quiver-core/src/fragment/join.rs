//! The shapes of joins that can run where their sides are read, and how a join is rebuilt
//! over new inputs. The coordinator's broadcast and exchange (`exec`) and the Lambda
//! worker all decide and rewrite with these, from below.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::JoinType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{Distribution, PartitioningSatisfaction};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::distribution_requirements::ChildSatisfactionOptions;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

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

/// A join that emits rows of one side at most (semi, anti and mark joins).
pub fn keeps_one_side(join: &HashJoinExec) -> bool {
    use datafusion::common::JoinType::*;
    matches!(
        join.join_type(),
        LeftSemi | LeftAnti | RightSemi | RightAnti | LeftMark | RightMark
    )
}

/// A partial aggregate or a TopK: an operator that sends back fewer rows than it reads.
pub fn reduces_rows(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let partial = plan
        .downcast_ref::<AggregateExec>()
        .is_some_and(|a| *a.mode() == AggregateMode::Partial);
    let top_k = plan
        .downcast_ref::<SortExec>()
        .is_some_and(|s| s.fetch().is_some());
    partial || top_k
}

/// `plan` as a hash join that can run partitioned: partitioned already, or collecting its
/// build side (not yet held in memory, which is a broadcast's), and not null-aware.
pub fn partitionable(plan: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
    plan.downcast_ref::<HashJoinExec>().filter(|join| {
        !join.null_aware
            && match join.partition_mode() {
                PartitionMode::Partitioned => true,
                PartitionMode::CollectLeft => !is_memory(join.left()),
                PartitionMode::Auto => false,
            }
    })
}

/// `join` made anew over `left` and `right` in `mode`: its keys, filter, type and
/// projection kept, its runtime state (a built hash table) not.
pub fn rejoin(
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

/// A join input without the exchange the planner put above it (a hash repartition for a
/// partitioned join, a merge for a collected build side).
pub fn below_exchange(plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
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
pub fn memory_bytes(plan: &Arc<dyn ExecutionPlan>) -> u64 {
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

/// What takes the place of `plan` (a fragment, an exchange stage, a build side) once its
/// output partitions are in: that output, held in memory.
pub fn held_output(
    plan: &Arc<dyn ExecutionPlan>,
    partitions: Vec<Vec<RecordBatch>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let partitions = if partitions.is_empty() {
        vec![vec![]]
    } else {
        partitions
    };
    let count = partitions.len();
    let exec: Arc<dyn ExecutionPlan> =
        MemorySourceConfig::try_new_exec(&partitions, plan.schema(), None)?;
    // Operators above were planned for the plan's partition count. Any count serves
    // those that repartition or merge; one that wanted a single partition (a final
    // aggregate over a one-bucket scan) gets the partitions merged, in order if the
    // output was sorted.
    if plan.output_partitioning().partition_count() == 1 && count > 1 {
        return Ok(match plan.output_ordering() {
            Some(ordering) => Arc::new(SortPreservingMergeExec::new(ordering.clone(), exec)),
            None => Arc::new(CoalescePartitionsExec::new(exec)),
        });
    }
    Ok(exec)
}

/// A rewritten `child` as `parent` requires its `i`th input to be partitioned: a join that
/// became a broadcast one no longer hashes its output on the keys, so an operator above
/// that counted on it gets the repartition the planner had left out.
pub fn distributed_as_required(
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
