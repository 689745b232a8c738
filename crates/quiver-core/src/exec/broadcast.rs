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
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};
use futures::future::BoxFuture;

use super::exchange::{takes, takes_unmeasured};
use super::FragmentRunner;
use crate::fragment::{
    below_exchange, distributed_as_required, is_fragment, is_memory, is_per_partition,
    memory_bytes, probe_input, probes_alone, reduces_rows, rejoin, travelling_bytes,
};

/// Computes a build side, a plan of its own: the coordinator's recursion, handed down so
/// that this module never climbs back up to it.
pub type ComputeSide<'a> = Arc<
    dyn Fn(Arc<dyn ExecutionPlan>) -> BoxFuture<'a, Result<Vec<RecordBatch>>> + Send + Sync + 'a,
>;

/// `plan` with the build side of every join that can run on the workers computed and
/// moved into its probe side's fragment (see the module's comment).
pub fn broadcast_joins<'a>(
    plan: Arc<dyn ExecutionPlan>,
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
    compute: ComputeSide<'a>,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    let joins = Broadcast {
        context,
        runner,
        compute,
    };
    Box::pin(async move { joins.below(plan, false).await })
}

/// What a broadcast of one plan's joins needs.
struct Broadcast<'a> {
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
    compute: ComputeSide<'a>,
}

impl<'a> Broadcast<'a> {
    /// `broadcast_joins` below a chain of per-partition operators that `reduced` (a partial
    /// aggregate or TopK in it), which is what makes an exchange worth it (`exchange`).
    fn below<'s>(
        &'s self,
        plan: Arc<dyn ExecutionPlan>,
        reduced: bool,
    ) -> BoxFuture<'s, Result<Arc<dyn ExecutionPlan>>> {
        Box::pin(async move {
            let reduced_here = reduced || reduces_rows(&plan);
            let chained = is_per_partition(&plan)
                .then(|| probe_input(&plan).map(|(i, _)| i))
                .flatten();
            let mut children = Vec::new();
            for (i, child) in plan.children().into_iter().enumerate() {
                let below = reduced_here && chained == Some(i);
                let rewritten = self.below(Arc::clone(child), below).await?;
                children.push(if Arc::ptr_eq(child, &rewritten) {
                    rewritten
                } else {
                    distributed_as_required(&plan, i, rewritten, self.context)?
                });
            }
            let plan = replace_children_if_necessary(plan, children)?;
            Ok(self.broadcast(&plan, reduced).await?.unwrap_or(plan))
        })
    }

    /// The join with its build side computed: inside the probe side's fragment when it
    /// fits, else in memory where it was. `None` when the join does not qualify.
    async fn broadcast(
        &self,
        plan: &Arc<dyn ExecutionPlan>,
        reduced: bool,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let (context, runner) = (self.context, self.runner);
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
            || takes_unmeasured(join, reduced, context, runner)
        {
            return Ok(None);
        }
        let batches = (self.compute)(Arc::clone(build)).await?;
        // Compacted: the side travels as Arrow IPC, which would carry whole string buffers.
        let batches = batches
            .iter()
            .map(crate::format::compact_views)
            .collect::<Result<Vec<_>>>()?;
        let held: Arc<dyn ExecutionPlan> =
            MemorySourceConfig::try_new_exec(&[batches], build.schema(), None)?;
        let limit = runner.broadcast_limit(context.session_config().options());
        if memory_bytes(&held) + memory_bytes(probe) > limit {
            if takes(join, reduced, context, runner) {
                return Ok(None);
            }
            return Ok(Some(kept_here(plan, join, held)?));
        }
        Ok(Some(rejoin(
            join,
            held,
            Arc::clone(probe),
            PartitionMode::CollectLeft,
        )?))
    }
}

/// A join whose computed build side is too big to travel: the coordinator joins as
/// planned, over the computed side, still behind an exchange (a merge of its one
/// partition for a collected side), so that the join is not taken for one that travels.
fn kept_here(
    plan: &Arc<dyn ExecutionPlan>,
    join: &HashJoinExec,
    held: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let left = match join.partition_mode() {
        PartitionMode::Partitioned => {
            replace_children_if_necessary(Arc::clone(join.left()), vec![held])?
        }
        _ => Arc::new(CoalescePartitionsExec::new(held)),
    };
    let children = vec![left, Arc::clone(join.right())];
    replace_children_if_necessary(Arc::clone(plan), children)
}

/// Whether `plan` runs on its own: an expression that needs a value from above it (a
/// scalar subquery's) does not survive encoding. Rows already held always do; encoding
/// them only to find that out copied a side kept here (over the limit, so possibly
/// hundreds of MB) each time an enclosing build side was computed.
fn travels(plan: &Arc<dyn ExecutionPlan>, context: &TaskContext) -> bool {
    is_memory(plan) || travelling_bytes(plan, context).is_ok()
}
