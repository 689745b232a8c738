//! Running aggregates: `sum`, `min`, `max` and `count` over `ROWS BETWEEN UNBOUNDED
//! PRECEDING AND CURRENT ROW`, computed in one pass over rows already sorted by partition
//! and order (`quiver.running_windows`).
//!
//! DataFusion's `BoundedWindowAggExec` evaluates such a frame row by row: it slices the new
//! row, updates an accumulator with it and reads the accumulator's value back as a scalar.
//! TPC-DS q51 (two cumulative sums, then two cumulative maxima over their full outer join,
//! 1.3 million rows in all) spent 654 ms of compute there, about half of the query's.
//! Here a batch is one loop per expression: the partition boundaries from the partition
//! keys' row encoding, the running value carried from row to row and across batches (41
//! ms for q51). What the loop cannot take (other frames, DISTINCT, FILTER, floats,
//! strings) stays DataFusion's.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Decimal128Array, Int16Array, Int32Array, Int64Array,
    Int8Array, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Int16Type, Int32Type, Int64Type, Int8Type, SchemaRef,
};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
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

/// One running aggregate: its function, its argument, and the type of its values.
#[derive(Debug, Clone)]
struct Running {
    kind: Kind,
    arg: Arc<dyn PhysicalExpr>,
    output: DataType,
}

impl Running {
    /// `expr` as a running aggregate, where the loop computes what DataFusion would.
    fn of(expr: &Arc<dyn WindowExpr>, input: &SchemaRef) -> Option<Running> {
        let plain = expr.as_any().downcast_ref::<PlainAggregateWindowExpr>()?;
        let frame = plain.get_window_frame();
        let running_frame = frame.units == WindowFrameUnits::Rows
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
        takes.then_some(Running { kind, arg, output })
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
        let partition_by = exprs.first()?.partition_by().to_vec();
        let input = window.input();
        let running = (exprs.iter())
            .map(|expr| {
                let same_partitions = expr.partition_by() == partition_by.as_slice();
                same_partitions.then(|| Running::of(expr, &input.schema()))?
            })
            .collect::<Option<Vec<_>>>()?;
        Some(RunningWindowExec {
            input: Arc::clone(input),
            partition_by,
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
        let fields = self.partition_by.iter().map(|key| {
            let data_type = key.data_type(&self.input.schema())?;
            Ok(SortField::new(data_type))
        });
        let mut state = PartitionState {
            keys: RowConverter::new(fields.collect::<Result<Vec<_>>>()?)?,
            partition_by: self.partition_by.clone(),
            running: self.running.clone(),
            values: vec![None; self.running.len()],
            counts: vec![0; self.running.len()],
            last_key: None,
            schema: Arc::clone(&self.schema),
        };
        let rows = input.map(move |batch| {
            let _timer = baseline.elapsed_compute().timer();
            let extended = state.extended(&batch?)?;
            baseline.record_output(extended.num_rows());
            Ok(extended)
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

/// What one partition of the plan carries from batch to batch.
struct PartitionState {
    keys: RowConverter,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    running: Vec<Running>,
    /// Each aggregate's value so far in the current partition (`None` before a value).
    values: Vec<Option<i128>>,
    counts: Vec<i64>,
    /// The partition key of the last row seen.
    last_key: Option<OwnedRow>,
    schema: SchemaRef,
}

impl PartitionState {
    /// `batch` with each aggregate's running value as a column.
    fn extended(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let starts = self.partition_starts(batch)?;
        let mut columns = batch.columns().to_vec();
        for (i, running) in self.running.iter().enumerate() {
            let arg = running.arg.evaluate(batch)?.into_array(batch.num_rows())?;
            let column = match running.kind {
                Kind::Count => {
                    let count = &mut self.counts[i];
                    let counted = (0..arg.len()).map(|row| {
                        *count = if starts[row] { 0 } else { *count };
                        *count += i64::from(arg.is_valid(row));
                        *count
                    });
                    Arc::new(Int64Array::from_iter_values(counted)) as ArrayRef
                }
                kind => {
                    let value = &mut self.values[i];
                    let values = wide_values(&arg);
                    let so_far = (values.into_iter().zip(&starts)).map(|(next, &start)| {
                        if start {
                            *value = None;
                        }
                        *value = match (*value, next) {
                            (None, next) => next,
                            (Some(so_far), None) => Some(so_far),
                            (Some(so_far), Some(next)) => Some(combined(kind, so_far, next)),
                        };
                        *value
                    });
                    narrowed(so_far.collect(), &running.output)?
                }
            };
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    /// For each row of `batch`, whether a new partition starts there.
    fn partition_starts(&mut self, batch: &RecordBatch) -> Result<Vec<bool>> {
        // One partition: the running values start empty.
        if self.partition_by.is_empty() {
            return Ok(vec![false; batch.num_rows()]);
        }
        let keys = (self.partition_by.iter())
            .map(|key| key.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        let rows = self.keys.convert_columns(&keys)?;
        let mut starts = Vec::with_capacity(batch.num_rows());
        for row in 0..rows.num_rows() {
            starts.push(match row {
                0 => self
                    .last_key
                    .as_ref()
                    .is_none_or(|last| last.row() != rows.row(0)),
                _ => rows.row(row) != rows.row(row - 1),
            });
        }
        if rows.num_rows() > 0 {
            self.last_key = Some(rows.row(rows.num_rows() - 1).owned());
        }
        Ok(starts)
    }
}

/// `so_far` and `next` combined by `kind` (sums wrap, as DataFusion's do).
fn combined(kind: Kind, so_far: i128, next: i128) -> i128 {
    match kind {
        Kind::Sum => so_far.wrapping_add(next),
        Kind::Min => so_far.min(next),
        Kind::Max => so_far.max(next),
        Kind::Count => unreachable!("counts are counted apart"),
    }
}

/// The values of `array` (one of `whole`'s types) as `i128`.
fn wide_values(array: &ArrayRef) -> Vec<Option<i128>> {
    fn wide<T: datafusion::arrow::datatypes::ArrowPrimitiveType>(
        array: &ArrayRef,
    ) -> Vec<Option<i128>>
    where
        T::Native: Into<i128>,
    {
        array
            .as_primitive::<T>()
            .iter()
            .map(|v| v.map(Into::into))
            .collect()
    }
    match array.data_type() {
        DataType::Int8 => wide::<Int8Type>(array),
        DataType::Int16 => wide::<Int16Type>(array),
        DataType::Int32 => wide::<Int32Type>(array),
        DataType::Int64 => wide::<Int64Type>(array),
        DataType::Date32 => wide::<Date32Type>(array),
        DataType::Decimal128(_, _) => wide::<Decimal128Type>(array),
        other => unreachable!("Running::of takes no {other}"),
    }
}

/// `values` as an array of `data_type` (one of `whole`'s types; a running min or max
/// stays within its argument's values, a sum wraps as DataFusion's does).
fn narrowed(values: Vec<Option<i128>>, data_type: &DataType) -> Result<ArrayRef> {
    let values = values.into_iter();
    Ok(match data_type {
        DataType::Int8 => Arc::new(values.map(|v| v.map(|v| v as i8)).collect::<Int8Array>()),
        DataType::Int16 => Arc::new(values.map(|v| v.map(|v| v as i16)).collect::<Int16Array>()),
        DataType::Int32 => Arc::new(values.map(|v| v.map(|v| v as i32)).collect::<Int32Array>()),
        DataType::Int64 => Arc::new(values.map(|v| v.map(|v| v as i64)).collect::<Int64Array>()),
        DataType::Date32 => Arc::new(values.map(|v| v.map(|v| v as i32)).collect::<Date32Array>()),
        DataType::Decimal128(precision, scale) => Arc::new(
            values
                .collect::<Decimal128Array>()
                .with_precision_and_scale(*precision, *scale)?,
        ),
        other => unreachable!("Running::of takes no {other}"),
    })
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::physical_plan::displayable;

    use crate::exec::ExecutorKind;
    use crate::{QuiverSession, SessionOptions};

    /// Rows in batches of 7 (a partition spans several), nulls in `v`, decimals in `d`.
    const ROWS: &str = "SELECT value % 5 AS k, value AS o, \
        CASE WHEN value % 4 = 0 THEN NULL ELSE value * 3 - 500 END AS v, \
        CAST(value * 25 - 2000 AS DECIMAL(9, 2)) AS d FROM range(200)";

    #[tokio::test]
    async fn running_aggregates_answer_as_datafusion_does() {
        let options = SessionOptions {
            threads: 2,
            executor: ExecutorKind::DataFusion,
        };
        let session = QuiverSession::new(options).unwrap();
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
            // RANGE (the default frame) takes the current row's peers too.
            (over("sum(v) OVER (PARTITION BY k ORDER BY o % 3)"), false),
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
