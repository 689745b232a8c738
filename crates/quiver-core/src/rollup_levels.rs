//! A ROLLUP or CUBE (any grouping sets one of which holds every other's keys) is aggregated
//! level by level: each coarser set from the groups of a finer set (`quiver.rollup_levels`).
//!
//! DataFusion's partial aggregate of grouping sets looks every input row up once per set:
//! TPC-DS q67's ROLLUP of eight columns over 540,754 rows made 4.87 million lookups, most
//! into the finest set's 342 thousand groups, and q22's of four over 2.3 million inventory
//! rows 11.7 million. A coarser set is the finer set's groups merged by fewer keys, so here
//! a partition's rows are grouped once, by the finest set (DataFusion's partial aggregate
//! of that one set), and every coarser set from the states of the finer set of fewest keys
//! that holds its keys (`AggregateMode::PartialReduce`: states in, states out; in a ROLLUP
//! the set below; q67's eight coarser sets look up 789 thousand states in all). The output
//! is the partial aggregate's own (every key, NULL where rolled up, `__grouping_id`, then
//! the states), so the final aggregate and GROUPING() above it are unchanged. Sets no one
//! of which holds the others' keys (`GROUPING SETS ((a), (b))`), DISTINCT and ordered
//! aggregates stay DataFusion's.

use std::fmt;
use std::sync::Arc;
use web_time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::ScalarValue;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet, Time,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    collect, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
};
use futures::{stream, StreamExt, TryStreamExt};

use crate::options::QuiverOptions;

/// The rule: a partial aggregate of grouping sets with a finest set becomes a `RollupLevelsExec` over
/// a partial aggregate of its finest set.
#[derive(Debug)]
pub struct RollupLevels;

impl PhysicalOptimizerRule for RollupLevels {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !QuiverOptions::of(config).rollup_levels {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let levels = match node.downcast_ref::<AggregateExec>() {
                Some(aggregate) => RollupLevelsExec::of(aggregate)?,
                None => None,
            };
            Ok(match levels {
                Some(levels) => Transformed::yes(Arc::new(levels) as _),
                None => Transformed::no(node),
            })
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "rollup_levels"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The partial aggregate of grouping sets, level by level: partition `i` is the finest
/// set's partial aggregate of input partition `i`, then each coarser set reduced from a
/// finer one, in the layout of the partial aggregate it replaces.
#[derive(Debug)]
pub struct RollupLevelsExec {
    finest: Arc<dyn ExecutionPlan>,
    levels: Arc<Levels>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// What every partition needs to reduce one level to the next.
#[derive(Debug)]
struct Levels {
    /// Each set's NULL mask (true: that key is rolled up), finest first.
    masks: Vec<Vec<bool>>,
    /// The index of the set each set is reduced from.
    from: Vec<usize>,
    /// The grouping keys (expressions over the input) and their names in the output.
    keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
    aggregates: Vec<Arc<AggregateFunctionExpr>>,
    /// The aggregates' raw input (which their state fields are typed from).
    input_schema: SchemaRef,
    /// The replaced aggregate's output: keys, `__grouping_id`, states.
    schema: SchemaRef,
}

impl RollupLevelsExec {
    /// `aggregate` level by level, where it is a partial aggregate of two or more grouping
    /// sets, one holding every other's keys, whose every aggregate merges its states in any
    /// order.
    fn of(aggregate: &AggregateExec) -> Result<Option<Self>> {
        let group_by = aggregate.group_expr();
        let merges_freely = aggregate
            .aggr_expr()
            .iter()
            .all(|expr| !expr.is_distinct() && expr.order_bys().is_empty());
        if *aggregate.mode() != AggregateMode::Partial
            || !group_by.has_grouping_set()
            || aggregate.limit_options().is_some()
            || !merges_freely
        {
            return Ok(None);
        }
        let Some((masks, from)) = sets_in_turn(group_by.groups()) else {
            return Ok(None);
        };
        let levels = Levels {
            masks,
            from,
            keys: group_by.expr().to_vec(),
            aggregates: aggregate.aggr_expr().to_vec(),
            input_schema: aggregate.input_schema(),
            schema: aggregate.schema(),
        };
        // The finest set as a set of grouping sets, which DataFusion never stops grouping
        // (a plain partial aggregate passes rows on where its first rows barely group,
        // and the levels then hold every row: TPC-DS q22 took 2.2 times as long).
        let finest = AggregateExec::try_new(
            AggregateMode::Partial,
            levels.set(levels.keys.clone(), &levels.masks[0])?,
            aggregate.aggr_expr().to_vec(),
            aggregate.filter_expr().to_vec(),
            Arc::clone(aggregate.input()),
            aggregate.input_schema(),
        )?;
        Ok(Some(Self {
            finest: Arc::new(finest),
            levels: Arc::new(levels),
            properties: Arc::clone(aggregate.properties()),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }
}

/// The sets' masks, finest first, each with the set it is reduced from (the finest's
/// own index for itself): the finer set of fewest keys that holds all of its keys. `None`
/// where one set does not hold every other's keys, or a set repeats.
fn sets_in_turn(groups: &[Vec<bool>]) -> Option<(Vec<Vec<bool>>, Vec<usize>)> {
    let mut masks = groups.to_vec();
    masks.sort_by_key(|mask| mask.iter().filter(|rolled_up| **rolled_up).count());
    // Whether set `finer` holds every key of set `coarser` (a rolled-up key stays rolled up).
    let holds =
        |finer: &[bool], coarser: &[bool]| finer.iter().zip(coarser).all(|(f, c)| !*f || *c);
    let distinct = (1..masks.len()).all(|i| !masks[..i].contains(&masks[i]));
    if masks.len() < 2 || !distinct || !masks.iter().all(|mask| holds(&masks[0], mask)) {
        return None;
    }
    // Sorted by rolled-up keys, a set's finer sets come before it; the last has fewest keys.
    let from = (0..masks.len())
        .map(|i| {
            (0..i)
                .rev()
                .find(|&j| holds(&masks[j], &masks[i]))
                .unwrap_or(0)
        })
        .collect();
    Some((masks, from))
}

impl Levels {
    /// The grouping of the set `mask` alone, as DataFusion groups a set of grouping sets
    /// (`keys` the keys' expressions): a rolled-up key NULL, `__grouping_id` numbered as
    /// it numbers the set, and the total's row even where no row came.
    fn set(
        &self,
        keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
        mask: &[bool],
    ) -> Result<PhysicalGroupBy> {
        let nulls = (self.schema.fields().iter().zip(&self.keys))
            .map(|(field, (_, name))| {
                let null = ScalarValue::try_from(field.data_type())?;
                Ok((
                    Arc::new(Literal::new(null)) as Arc<dyn PhysicalExpr>,
                    name.clone(),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PhysicalGroupBy::new(keys, nulls, vec![mask.to_vec()], true))
    }

    /// The set `mask`'s partial states, merged from `below` (the finer set's, in the
    /// output layout) by DataFusion's aggregate in `PartialReduce` mode. Where no row came
    /// it is DataFusion's partial aggregate of no rows (the total's row, for a total).
    async fn reduced(
        &self,
        mask: &[bool],
        below: Vec<RecordBatch>,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<RecordBatch>> {
        let reduce = if below.iter().all(|batch| batch.num_rows() == 0) {
            AggregateExec::try_new(
                AggregateMode::Partial,
                self.set(self.keys.clone(), mask)?,
                self.aggregates.clone(),
                vec![None; self.aggregates.len()],
                Arc::new(EmptyExec::new(Arc::clone(&self.input_schema))),
                Arc::clone(&self.input_schema),
            )?
        } else {
            let keys = (self.keys.iter().enumerate())
                .map(|(index, (_, name))| (Arc::new(Column::new(name, index)) as _, name.clone()))
                .collect();
            let source =
                MemorySourceConfig::try_new_exec(&[below], Arc::clone(&self.schema), None)?;
            AggregateExec::try_new(
                AggregateMode::PartialReduce,
                self.set(keys, mask)?,
                self.aggregates.clone(),
                vec![None; self.aggregates.len()],
                source,
                Arc::clone(&self.input_schema),
            )?
        };
        collect(Arc::new(reduce), Arc::clone(context))
            .await?
            .into_iter()
            .map(|batch| self.relabelled(batch))
            .collect()
    }

    /// `batch`, one set's partial states, under the replaced aggregate's schema (its
    /// names and which keys may be NULL).
    fn relabelled(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let columns = batch.columns().to_vec();
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    /// A partition's sets in turn, finest first, each once the set it is reduced from is
    /// whole. A set is held while a set yet to come is reduced from it (counted against
    /// the pool, not refused: it is already in memory); in a ROLLUP, only the set below.
    fn stream(
        self: Arc<Self>,
        finest: SendableRecordBatchStream,
        context: Arc<TaskContext>,
        held: MemoryReservation,
        compute: Time,
    ) -> impl futures::Stream<Item = Result<RecordBatch>> + Send {
        let start = Turn {
            finest: Some(finest),
            kept: vec![Vec::new(); self.masks.len()],
            next: 1,
            held,
        };
        stream::try_unfold(start, move |mut turn| {
            let (levels, context) = (Arc::clone(&self), Arc::clone(&context));
            let compute = compute.clone();
            async move {
                let (index, set) = match turn.finest.take() {
                    Some(finest) => {
                        let relabelled = |batch: RecordBatch| levels.relabelled(batch);
                        let set = finest.map(|batch| batch.and_then(relabelled));
                        (0, set.try_collect().await?)
                    }
                    None if turn.next < levels.masks.len() => {
                        let index = turn.next;
                        turn.next += 1;
                        let from = levels.from[index];
                        // Its last use gives the set up; an earlier one shares it.
                        let below = match levels.from[index + 1..].contains(&from) {
                            true => turn.kept[from].clone(),
                            false => std::mem::take(&mut turn.kept[from]),
                        };
                        // In memory: its time is all compute.
                        let started = Instant::now();
                        let set = levels
                            .reduced(&levels.masks[index], below, &context)
                            .await?;
                        compute.add_elapsed(started);
                        (index, set)
                    }
                    None => return Ok::<_, DataFusionError>(None),
                };
                if levels.from[index + 1..].contains(&index) {
                    turn.kept[index] = set.clone();
                }
                turn.held
                    .resize(turn.kept.iter().map(|set| bytes(set)).sum());
                Ok(Some((set, turn)))
            }
        })
        .map_ok(|set: Vec<RecordBatch>| stream::iter(set.into_iter().map(Ok)))
        .try_flatten()
    }
}

/// Where a partition's stream of sets stands.
struct Turn {
    finest: Option<SendableRecordBatchStream>,
    /// Each set's states while a set yet to come is reduced from it (else empty).
    kept: Vec<Vec<RecordBatch>>,
    /// The index of the set it reduces next.
    next: usize,
    held: MemoryReservation,
}

/// The memory `batches` hold.
fn bytes(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::get_array_memory_size).sum()
}

impl DisplayAs for RollupLevelsExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let sets = self.levels.masks.iter().map(|mask| {
            let keys: Vec<&str> = (self.levels.keys.iter().zip(mask))
                .filter(|(_, rolled_up)| !**rolled_up)
                .map(|((_, name), _)| name.as_str())
                .collect();
            format!("({})", keys.join(", "))
        });
        write!(
            f,
            "RollupLevelsExec: sets=[{}]",
            sets.collect::<Vec<_>>().join(", ")
        )
    }
}

impl ExecutionPlan for RollupLevelsExec {
    fn name(&self) -> &'static str {
        "RollupLevelsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.finest]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [finest] = <[_; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("RollupLevelsExec has one child".into()))?;
        Ok(Arc::new(Self {
            finest,
            levels: Arc::clone(&self.levels),
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let finest = self.finest.execute(partition, Arc::clone(&context))?;
        let held = MemoryConsumer::new(format!("RollupLevelsExec[{partition}]"))
            .register(context.memory_pool());
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let compute = baseline.elapsed_compute().clone();
        let levels = Arc::clone(&self.levels)
            .stream(finest, context, held, compute)
            .inspect_ok(move |batch| baseline.record_output(batch.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.levels.schema),
            levels,
        )))
    }

    /// The sets' keys are columns of its own layout, none an expression over its input.
    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
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

    /// 3,000 rows in batches of 7 (a partition spans many): NULL keys among `a`'s, a
    /// string key, decimals and strings to aggregate.
    const TABLE: &str = "CREATE TABLE t AS SELECT \
        CASE WHEN value % 11 = 0 THEN NULL ELSE value % 7 END AS a, \
        'b' || CAST(value % 5 AS VARCHAR) AS b, value % 13 AS c, value AS v, \
        CAST(value * 25 - 2000 AS DECIMAL(9, 2)) AS d, 's' || CAST(value AS VARCHAR) AS s \
        FROM range(3000)";

    const AGGREGATES: &str = "sum(v), count(*), avg(v), sum(d), min(s), max(d), \
        grouping(a), grouping(b)";

    #[tokio::test]
    async fn grouping_sets_answer_level_by_level_as_datafusion_does() {
        let session = QuiverSession::local_two_threads();
        session
            .run("SET datafusion.execution.batch_size = 7")
            .await
            .unwrap();
        session.run(TABLE).await.unwrap();
        let grouped = |keys: &str, by: &str| {
            format!("SELECT {keys}, {AGGREGATES} FROM t {by} ORDER BY 1, 2, 3, 4")
        };
        // (a query, whether its sets are reduced level by level)
        let cases = [
            (grouped("a, b, c", "GROUP BY ROLLUP(a, b, c)"), true),
            (
                grouped("a, b, count(c)", "GROUP BY GROUPING SETS ((a, b), (a), ())"),
                true,
            ),
            // Out of order: the finest set is found whatever order they are listed in.
            (
                grouped("a, b, count(c)", "GROUP BY GROUPING SETS ((), (b, a), (b))"),
                true,
            ),
            (
                "SELECT a + 1, upper(b), sum(v), count(*) FROM t \
                    GROUP BY ROLLUP(a + 1, upper(b)) ORDER BY 1, 2, 3, 4"
                    .to_string(),
                true,
            ),
            // Nothing to group: no set has a row, the total's none either.
            (
                grouped("a, b, c", "WHERE v < 0 GROUP BY ROLLUP(a, b, c)"),
                true,
            ),
            // A tree: (a, c) and (b) from the finest, (a) from (a, c).
            (
                grouped(
                    "a, b, c",
                    "GROUP BY GROUPING SETS ((a, b, c), (b), (a, c), (a))",
                ),
                true,
            ),
            (grouped("a, b, c", "GROUP BY CUBE(a, b, c)"), true),
            // No set holds the others' keys.
            (
                grouped("a, b, count(c)", "GROUP BY GROUPING SETS ((a), (b))"),
                false,
            ),
            (
                "SELECT a, b, count(DISTINCT c) FROM t GROUP BY ROLLUP(a, b) ORDER BY 1, 2"
                    .to_string(),
                false,
            ),
        ];
        for (sql, levels) in cases {
            let answer = |on: bool| {
                let session = &session;
                let sql = &sql;
                async move {
                    let set = format!("SET quiver.rollup_levels = {on}");
                    session.run(&set).await.unwrap();
                    let plan = session.physical_plan(sql).await.unwrap();
                    let shown = displayable(plan.as_ref()).indent(true).to_string();
                    let output = session.run(sql).await.unwrap();
                    let rows = pretty_format_batches(&output.batches).unwrap().to_string();
                    (shown, rows)
                }
            };
            let (shown, by_levels) = answer(true).await;
            assert_eq!(shown.contains("RollupLevelsExec"), levels, "{sql}\n{shown}");
            let (shown, by_datafusion) = answer(false).await;
            assert!(!shown.contains("RollupLevelsExec"), "{sql}\n{shown}");
            assert_eq!(by_levels, by_datafusion, "{sql}");
            let empty = sql.contains("v < 0");
            assert_eq!(by_levels.lines().count() > 10, !empty, "{sql}\n{by_levels}");
        }
    }

    /// Unique keys over two partitions: the finest set's states are as many as its rows,
    /// and the set above still reduces them (DataFusion's partial aggregate of plain keys
    /// would have stopped grouping here).
    #[tokio::test]
    async fn a_finest_set_of_unique_keys_rolls_up() {
        let session = QuiverSession::local_two_threads();
        let sql = "SELECT value % 3 AS a, value AS b, sum(value), count(*) \
            FROM range(100000) GROUP BY ROLLUP(a, b) ORDER BY 1, 2";
        let mut answers = Vec::new();
        for on in [true, false] {
            let set = format!("SET quiver.rollup_levels = {on}");
            session.run(&set).await.unwrap();
            let output = session.run(sql).await.unwrap();
            answers.push(pretty_format_batches(&output.batches).unwrap().to_string());
        }
        let differing = answers[0]
            .lines()
            .zip(answers[1].lines())
            .find(|(a, b)| a != b);
        assert_eq!(differing, None);
        // Every value, each of the three a's, and the total.
        assert_eq!(answers[0].lines().count(), 100_000 + 3 + 1 + 4);
    }
}
