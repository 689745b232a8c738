//! Joins of two scans on the workers, through an exchange (as Lambada does): a hash join
//! whose two sides are fragments, and which the broadcast cannot send to its probe side
//! (its build side is too big to travel, as measured or as estimated well over the limit;
//! or its type needs every probe row to see a build row: left, full, left semi and anti
//! joins), runs in two waves of workers (see `fragment::stage`). Here: finding the stages
//! of a plan and handing them to the runner, and whether the runner would take a join.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};
use futures::future::BoxFuture;

use super::FragmentRunner;
use crate::fragment::{
    distributed_as_required, held_output, keeps_one_side, sides, stage_of, ExchangeSide,
};

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
pub fn takes(
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
pub fn takes_unmeasured(
    join: &HashJoinExec,
    reduced: bool,
    context: &TaskContext,
    runner: &dyn FragmentRunner,
) -> bool {
    let limit = runner.broadcast_limit(context.session_config().options());
    taken_sides(join, reduced, context, runner)
        .is_some_and(|[build, _]| build.fragment.estimated_output_bytes() > limit.saturating_mul(2))
}
