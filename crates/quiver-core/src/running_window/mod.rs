//! Running aggregates: `sum`, `min`, `max` and `count` over `ROWS` or `RANGE BETWEEN
//! UNBOUNDED PRECEDING AND CURRENT ROW` (the frame of `sum(x) OVER (PARTITION BY a ORDER BY
//! b)`), computed in one pass over rows already sorted by partition and order
//! (`quiver.running_windows`).
//!
//! DataFusion's `BoundedWindowAggExec` evaluates such a frame row by row: it slices the new
//! row, updates an accumulator with it and reads the accumulator's value back as a scalar.
//! TPC-DS q51 (two cumulative sums, then two cumulative maxima over their full outer join,
//! 1.3 million rows in all) spent 654 ms of compute there, about half of the query's.
//! Here a batch is one loop per expression: the partition boundaries from the partition
//! keys' row encoding, the running value carried from row to row and across batches (41
//! ms for q51; `partition` holds the loop). What the loop cannot take (other frames,
//! DISTINCT, FILTER, floats, strings) stays DataFusion's.

mod partition;

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{WindowFrameBound, WindowFrameUnits};
use datafusion::physical_expr::window::{PlainAggregateWindowExpr, WindowExpr};
use datafusion::physical_expr::{OrderingRequirements, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::windows::BoundedWindowAggExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements, InputOrderMode,
    PlanProperties,
};
use futures::StreamExt;

use self::partition::PartitionState;
use crate::options::QuiverOptions;

/// The rule: each `BoundedWindowAggExec` over sorted input whose every expression is a
/// running aggregate the loop takes becomes a `RunningWindowExec`.
#[derive(Debug)]
pub struct RunningAggregates;

impl PhysicalOptimizerRule for RunningAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !QuiverOptions::of(config).running_windows {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            Ok(match node.downcast_ref::<BoundedWindowAggExec>() {
                Some(window) => match RunningWindowExec::of(window) {
                    Some(running) => Transformed::yes(Arc::new(running) as _),
                    None => Transformed::no(node),
                },
                None => Transformed::no(node),
            })
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "running_aggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What one expression computes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Min,
    Max,
    Count,
}

/// One running aggregate: its function, its argument, the type of its values, and whether
/// a row's value is its last peer's (a RANGE frame).
#[derive(Debug, Clone)]
struct Running {
    kind: Kind,
    arg: Arc<dyn PhysicalExpr>,
    output: DataType,
    peers: bool,
}

impl Running {
    /// `expr` as a running aggregate, where the loop computes what DataFusion would.
    fn of(expr: &Arc<dyn WindowExpr>, input: &SchemaRef) -> Option<Running> {
        let plain = expr.as_any().downcast_ref::<PlainAggregateWindowExpr>()?;
        let frame = plain.get_window_frame();
        let peers = frame.units == WindowFrameUnits::Range;
        let running_frame = (peers || frame.units == WindowFrameUnits::Rows)
            && matches!(&frame.start_bound, WindowFrameBound::Preceding(n) if n.is_null())
            && frame.end_bound == WindowFrameBound::CurrentRow;
        let aggregate = plain.get_aggregate_expr();
        // Its FILTER has no public accessor; its Debug ends with it (and a later version
        // that changes that only leaves more to DataFusion).
        let unfiltered = format!("{plain:?}").ends_with("filter: None }");
        if !running_frame || aggregate.is_distinct() || !unfiltered {
            return None;
        }
        let kind = match aggregate.fun().name() {
            "sum" => Kind::Sum,
            "min" => Kind::Min,
            "max" => Kind::Max,
            "count" => Kind::Count,
            _ => return None,
        };
        let [arg] = aggregate.expressions().try_into().ok()?;
        let input_type = arg.data_type(input).ok()?;
        let output = expr.field().ok()?.data_type().clone();
        let takes = match kind {
            Kind::Count => output == DataType::Int64,
            Kind::Min | Kind::Max => whole(&input_type) && input_type == output,
            Kind::Sum => match (&input_type, &output) {
                (DataType::Decimal128(_, from), DataType::Decimal128(_, to)) => from == to,
                (from, DataType::Int64) => whole(from) && !matches!(from, DataType::Date32),
                _ => false,
            },
        };
        takes.then_some(Running {
            kind,
            arg,
            output,
            peers,
        })
    }
}

/// Whether values of `data_type` are whole numbers the loop reads as `i128`.
fn whole(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Decimal128(_, _)
            | DataType::Date32
    )
}

/// The rows of its input with each running aggregate's value added, in its input's order.
#[derive(Debug)]
pub struct RunningWindowExec {
    input: Arc<dyn ExecutionPlan>,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    order_by: Vec<Arc<dyn PhysicalExpr>>,
    running: Vec<Running>,
    names: Vec<String>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    distribution: InputDistributionRequirements,
    ordering: Vec<Option<OrderingRequirements>>,
    metrics: ExecutionPlanMetricsSet,
}

impl RunningWindowExec {
    /// `window` computed by the loop, where its input is sorted and it takes every
    /// expression.
    fn of(window: &BoundedWindowAggExec) -> Option<RunningWindowExec> {
        if window.input_order_mode != InputOrderMode::Sorted {
            return None;
        }
        let exprs = window.window_expr();
        let first = exprs.first()?;
        let (partition_by, order) = (first.partition_by().to_vec(), first.order_by());
        let input = window.input();
        let running = (exprs.iter())
            .map(|expr| {
                let same_window =
                    expr.partition_by() == partition_by.as_slice() && expr.order_by() == order;
                same_window.then(|| Running::of(expr, &input.schema()))?
            })
            .collect::<Option<Vec<_>>>()?;
        Some(RunningWindowExec {
            input: Arc::clone(input),
            partition_by,
            order_by: order.iter().map(|sort| Arc::clone(&sort.expr)).collect(),
            running,
            names: exprs.iter().map(|e| e.name().to_string()).collect(),
            schema: window.schema(),
            properties: Arc::clone(window.properties()),
            distribution: window.input_distribution_requirements(),
            ordering: window.required_input_ordering(),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for RunningWindowExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "RunningWindowExec: wdw=[{}]", self.names.join(", "))
    }
}

impl ExecutionPlan for RunningWindowExec {
    fn name(&self) -> &str {
        "RunningWindowExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.distribution.clone()
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        self.ordering.clone()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let args = self.running.iter().map(|running| &running.arg);
        for expr in self.partition_by.iter().chain(args) {
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = children.swap_remove(0);
        Ok(Arc::new(RunningWindowExec {
            input,
            partition_by: self.partition_by.clone(),
            order_by: self.order_by.clone(),
            running: self.running.clone(),
            names: self.names.clone(),
            schema: Arc::clone(&self.schema),
            properties: Arc::clone(&self.properties),
            distribution: self.distribution.clone(),
            ordering: self.ordering.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let state = PartitionState::new(
            self.partition_by.clone(),
            self.order_by.clone(),
            self.running.clone(),
            &self.input.schema(),
            Arc::clone(&self.schema),
        )?;
        // Each input batch gives out the rows whose values it settles; the end of the
        // input, those still held (`partition`).
        let rows = futures::stream::unfold(Some((input, state)), move |running| {
            let baseline = baseline.clone();
            async move {
                let (mut input, mut state) = running?;
                loop {
                    let next = input.next().await;
                    let _timer = baseline.elapsed_compute().timer();
                    let out = match next {
                        Some(batch) => batch.and_then(|batch| state.take(batch)),
                        None => return state.finish().transpose().map(|out| (out, None)),
                    };
                    match out {
                        Ok(None) => continue,
                        Ok(Some(out)) => {
                            baseline.record_output(out.num_rows());
                            return Some((Ok(out), Some((input, state))));
                        }
                        Err(e) => return Some((Err(e), None)),
                    }
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            rows,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::physical_plan::displayable;

    use crate::QuiverSession;

    /// Rows in batches of 7 (a partition spans several), nulls in `v`, decimals in `d`.
    const ROWS: &str = "SELECT value % 5 AS k, value AS o, \
        CASE WHEN value % 4 = 0 THEN NULL ELSE value * 3 - 500 END AS v, \
        CAST(value * 25 - 2000 AS DECIMAL(9, 2)) AS d FROM range(200)";

    #[tokio::test]
    async fn running_aggregates_answer_as_datafusion_does() {
        let session = QuiverSession::local_two_threads();
        let set = |on: bool| format!("SET quiver.running_windows = {on}");
        session
            .run("SET datafusion.execution.batch_size = 7")
            .await
            .unwrap();
        let rows = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW";
        let by_k = format!("PARTITION BY k ORDER BY o {rows}");
        let over = |windows: &str| format!("SELECT k, o, {windows} FROM ({ROWS})");
        // (a query, whether the loop computes its windows)
        let cases = [
            (over(&format!("sum(v) OVER ({by_k})")), true),
            (
                over(&format!("max(v) OVER ({by_k}), min(v) OVER ({by_k})")),
                true,
            ),
            (
                over(&format!("sum(d) OVER ({by_k}), max(d) OVER ({by_k})")),
                true,
            ),
            (
                over(&format!("count(v) OVER ({by_k}), count(*) OVER ({by_k})")),
                true,
            ),
            (over(&format!("sum(v) OVER (ORDER BY o {rows})")), true),
            // q51's shape: a running max over a running sum.
            (
                format!(
                    "SELECT k, o, max(s) OVER ({by_k}) FROM ({})",
                    over(&format!("sum(d) OVER ({by_k}) AS s"))
                ),
                true,
            ),
            // RANGE (the default frame with an ORDER BY) takes the current row's peers
            // too; peer groups here span batches.
            (over("sum(v) OVER (PARTITION BY k ORDER BY o % 7)"), true),
            (
                over(
                    "count(*) OVER (PARTITION BY k ORDER BY o - o % 20), \
                      max(d) OVER (PARTITION BY k ORDER BY o - o % 20)",
                ),
                true,
            ),
            (
                over("min(d) OVER (PARTITION BY k ORDER BY o % 3 DESC)"),
                true,
            ),
            (over("sum(v) OVER (ORDER BY o % 4)"), true),
            // Nulls in the order key are one another's peers.
            (over("sum(o) OVER (PARTITION BY k ORDER BY v)"), true),
            (
                over(&format!(
                    "sum(v) OVER (PARTITION BY k ORDER BY o % 7), sum(v) OVER ({by_k})"
                )),
                true,
            ),
            (
                over(&format!("sum(CAST(v AS DOUBLE)) OVER ({by_k})")),
                false,
            ),
            (
                over(&format!("sum(v) FILTER (WHERE v > 0) OVER ({by_k})")),
                false,
            ),
        ];
        for (query, computed) in cases {
            let sql = format!("{query} ORDER BY k, o");
            session.run(&set(true)).await.unwrap();
            let plan = session.physical_plan(&sql).await.unwrap();
            let shown = displayable(plan.as_ref()).indent(true).to_string();
            assert_eq!(
                shown.contains("RunningWindowExec"),
                computed,
                "{sql}\n{shown}"
            );
            let answer = |output: crate::QueryOutput| {
                pretty_format_batches(&output.batches).unwrap().to_string()
            };
            let looped = answer(session.run(&sql).await.unwrap());
            session.run(&set(false)).await.unwrap();
            let datafusion = answer(session.run(&sql).await.unwrap());
            assert_eq!(looped, datafusion, "{sql}");
            assert!(looped.lines().count() > 200, "{sql}");
        }
    }
}
