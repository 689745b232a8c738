//! How early a statement's partial aggregates stop grouping, chosen from its plan.
//!
//! DataFusion's partial aggregate stops grouping once it has probed
//! `skip_partial_aggregation_probe_rows_threshold` rows if its groups are still
//! `skip_partial_aggregation_probe_ratio_threshold` (0.8) of them, and passes the rest of
//! its rows on as they come: the final aggregate groups them anyway, and a partial table of
//! nearly as many keys is the same work and memory twice. Most groupings of many keys
//! repeat each key a few times in the first rows (ClickBench's SearchPhrase, UserID and URL
//! at 33-45% of the 32 Ki rows probed), where the partial table still costs a hash lookup,
//! mostly a cache miss, for every row, and pages of its own. Where every aggregate's state
//! is fixed-width, a row passed on is its keys and a few numbers, so such a plan stops at
//! `quiver.partial_skip_ratio` (10%). Where a state is a string or a list (`MIN(URL)`, a
//! `COUNT(DISTINCT)` beside other aggregates) the rows passed on carry it, and the ratio
//! stays DataFusion's: at 10%, ClickBench q21 (`MIN(URL)` by SearchPhrase) held 15 MB more.
//! The ratio is a setting of the statement's task, so it is one for the whole plan.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use crate::options::QuiverOptions;

/// The task `plan` runs in: the session's, with `quiver.partial_skip_ratio` as DataFusion's
/// ratio where every grouped partial aggregate of the plan has fixed-width states.
pub(super) fn task_for(
    context: &SessionContext,
    plan: &Arc<dyn ExecutionPlan>,
) -> Arc<TaskContext> {
    let state = context.state();
    let task = TaskContext::from(&state);
    let ratio = QuiverOptions::of(state.config_options()).partial_skip_ratio;
    let theirs = (state.config_options().execution).skip_partial_aggregation_probe_ratio_threshold;
    if ratio >= theirs || !partial_states_fixed_width(plan) {
        return Arc::new(task);
    }
    let mut config = state.config().clone();
    config
        .options_mut()
        .execution
        .skip_partial_aggregation_probe_ratio_threshold = ratio;
    Arc::new(task.with_session_config(config))
}

/// Whether `plan` has a grouped partial aggregate, and every one's states are fixed-width.
fn partial_states_fixed_width(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let (mut grouped, mut wide) = (false, false);
    let _ = plan.apply(|node| {
        let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
            return Ok(TreeNodeRecursion::Continue);
        };
        if *aggregate.mode() == AggregateMode::Partial && !aggregate.group_expr().is_empty() {
            grouped = true;
            wide = !aggregate.aggr_expr().iter().all(|a| fixed_width_states(a));
        }
        Ok(if wide {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    grouped && !wide
}

fn fixed_width_states(aggregate: &AggregateFunctionExpr) -> bool {
    aggregate.state_fields().is_ok_and(|fields| {
        fields.iter().all(|field| {
            let kind = field.data_type();
            kind.primitive_width().is_some() || *kind == DataType::Boolean
        })
    })
}
