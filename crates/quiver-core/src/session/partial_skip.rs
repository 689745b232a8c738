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

/// Rows a partition's partial aggregate groups before it may stop: where its groups are
/// still 80% of its rows (DataFusion's ratio), the rest of its rows pass on ungrouped to
/// the final aggregate. DataFusion waits for 100,000 rows; every one of them is copied into
/// a hash table that saves the final aggregate nothing, and a table of long strings is
/// memory too. At 32 Ki rows, interleaved processes, 5 passes (2026-12-02): ClickBench one
/// file's hashing queries 0.968x (q39's strings 0.77x and 479 -> 368 MB, q13 0.91x, q31
/// 0.96x), TPC-DS 0.978x over all 99 (3 passes) and 0.997x over its 13 largest aggregations
/// (q97 0.96x; q95 and q75 hold 5-9 MB more at their peak), tpchgen-cli's TPC-H 0.991x,
/// ClickBench 100 files' hashing queries 0.961x.
pub(super) const SKIP_PARTIAL_AGGREGATION_AFTER_ROWS: usize = 32 << 10;

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

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;

    use crate::QuiverSession;

    /// Rows the partial aggregate of `SELECT k, {aggregates} ... GROUP BY k` passed on
    /// ungrouped (EXPLAIN ANALYZE's `skipped_aggregation_rows`), over 100,000 rows whose
    /// keys `k` are `value * 7919 % 100003 % keys`: out of order (sorted keys are grouped
    /// as they come, never skipped).
    async fn rows_passed_ungrouped(session: &QuiverSession, keys: u32, aggregates: &str) -> f64 {
        let sql = format!(
            "EXPLAIN ANALYZE SELECT value * 7919 % 100003 % {keys} AS k, {aggregates} \
             FROM range(100000) GROUP BY k"
        );
        let output = session.run(&sql).await.unwrap();
        let shown = pretty_format_batches(&output.batches).unwrap().to_string();
        let (_, after) = (shown.split_once("skipped_aggregation_rows="))
            .unwrap_or_else(|| panic!("no partial aggregate's metrics in {shown}"));
        let shown = after.split([',', ']']).next().unwrap().trim();
        match shown.strip_suffix(" K") {
            Some(thousands) => thousands.parse::<f64>().unwrap() * 1000.0,
            None => shown.parse().unwrap(),
        }
    }

    #[tokio::test]
    async fn a_partial_aggregate_of_unique_keys_stops_grouping_after_32_ki_rows() {
        let session = QuiverSession::local_two_threads();
        // About 50,000 unique keys in each of two partitions, in batches of 8 Ki rows:
        // each groups its first 32 Ki rows (and at most a batch more), then passes the rest.
        let passed = rows_passed_ungrouped(&session, 100_003, "count(*)").await;
        let (fewest, most) = (100_000.0 - 2.0 * 40_960.0, 100_000.0 - 2.0 * 32_768.0);
        assert!(
            (fewest..=most).contains(&passed),
            "{passed} rows passed ungrouped"
        );
        let waits = "SET datafusion.execution.skip_partial_aggregation_probe_rows_threshold \
            = 100000";
        session.run(waits).await.unwrap();
        assert_eq!(
            rows_passed_ungrouped(&session, 100_003, "count(*)").await,
            0.0
        );
    }

    #[tokio::test]
    async fn repeated_keys_stop_grouping_at_a_tenth_only_where_states_are_fixed_width() {
        let session = QuiverSession::local_two_threads();
        // 30,000 keys: about 61% of a partition's first 32 Ki rows are distinct, under
        // DataFusion's 80%; the rest of its 50,000 rows pass on where the ratio is 10%.
        let numbers = rows_passed_ungrouped(&session, 30_000, "count(*), sum(value)").await;
        assert!(numbers >= 15_000.0, "{numbers} rows passed ungrouped");
        // A string state keeps DataFusion's ratio (MIN of strings can pass rows on too).
        let strings = "count(*), min(CAST(value AS VARCHAR))";
        assert_eq!(rows_passed_ungrouped(&session, 30_000, strings).await, 0.0);
        session
            .run("SET quiver.partial_skip_ratio = 0.8")
            .await
            .unwrap();
        assert_eq!(
            rows_passed_ungrouped(&session, 30_000, "count(*)").await,
            0.0
        );
        let refused = session.run("SET quiver.partial_skip_ratio = 1.5").await;
        let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("not a share"), "{message}");
    }
}
