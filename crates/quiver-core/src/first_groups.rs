//! `GROUP BY ... LIMIT n` without `ORDER BY` aggregates only the first `n` groups it meets.
//! Any `n` groups answer such a query, but each must be whole, so DataFusion hashes every
//! row into a table of every group and then keeps `n`: ClickBench's q17 (`GROUP BY UserID,
//! SearchPhrase LIMIT 10`, 10 million rows) built millions of groups to return ten. Here
//! the rows are filtered before the aggregate (`FirstGroupsExec`, under its partial
//! stage): a key is chosen when it is first seen while fewer than `n` are, and from then on
//! only the chosen keys' rows pass. That is correct across partitions because the choice is
//! shared and final: a row is dropped only once `n` keys are chosen, after which no key can
//! join them, so every row of a chosen key is aggregated, whichever partition reads it.
//!
//! Where the first rows hold fewer than `n` keys (few groups in all: nothing to gain), the
//! filter stops looking and lets every row through; no row was dropped before that, since
//! none is until `n` keys are chosen. Keys whose equality the row encoding does not share
//! with the aggregate's (floats: `-0.0` and `0.0` are one group) leave the plan as it is, as
//! do volatile keys (evaluated twice) and grouping sets. Only the local executor takes it
//! (`quiver.first_groups`): the choice is shared between partitions, which Lambda workers
//! are not.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{filter_record_batch, take};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::config::ConfigOptions;
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    replace_children_if_necessary, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
};
use futures::StreamExt;

use crate::options::QuiverOptions;

/// Limits above this many groups are left alone: the chosen keys are held and looked up
/// for every row.
const MOST_GROUPS: usize = 10_000;

/// Rows the filter looks at for `n` keys, at least, before it gives up and lets every row
/// through: per chosen key, and in all.
const ROWS_PER_GROUP: usize = 100;
const ROWS_AT_LEAST: usize = 1 << 16;

/// The rule: a limit over an aggregate with no `ORDER BY` or `HAVING` between them gets a
/// `FirstGroupsExec` under the aggregate's first stage.
#[derive(Debug)]
pub struct FirstGroups;

impl PhysicalOptimizerRule for FirstGroups {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !QuiverOptions::of(config).first_groups {
            return Ok(plan);
        }
        plan.transform_down(|node| {
            Ok(match limited(&node)? {
                // The aggregate below is done with; other limits lie beside it or above.
                Some(rewritten) => Transformed::new(rewritten, true, TreeNodeRecursion::Jump),
                None => Transformed::no(node),
            })
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "first_groups"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `node`, a limit (or a merge of partitions with one) of at most `MOST_GROUPS` rows right over an aggregate that can take the
/// filter, with the filter put in; `None` for anything else.
fn limited(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let wanted = if let Some(limit) = node.downcast_ref::<GlobalLimitExec>() {
        limit.fetch().map(|fetch| fetch + limit.skip())
    } else if node.downcast_ref::<LocalLimitExec>().is_some()
        || node.downcast_ref::<CoalescePartitionsExec>().is_some()
    {
        // DataFusion folds a limit into the merge of partitions when nothing lies between.
        node.fetch()
    } else {
        None
    };
    let Some(wanted) = wanted.filter(|n| (1..=MOST_GROUPS).contains(n)) else {
        return Ok(None);
    };
    let [child] = node.children()[..] else {
        return Ok(None);
    };
    rebuilt(node, above_aggregate(child, wanted)?)
}

/// `plan`, an aggregate's last stage (under projections), with the filter under its
/// first stage.
fn above_aggregate(
    plan: &Arc<dyn ExecutionPlan>,
    wanted: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        return match aggregate.mode() {
            AggregateMode::Single | AggregateMode::SinglePartitioned => {
                filtered_under(plan, aggregate, wanted)
            }
            AggregateMode::Final | AggregateMode::FinalPartitioned if takes(aggregate) => {
                rebuilt(plan, below_exchanges(aggregate.input(), wanted)?)
            }
            _ => Ok(None),
        };
    }
    match (plan.name(), &plan.children()[..]) {
        ("ProjectionExec" | "CoalesceBatchesExec", [child]) => {
            rebuilt(plan, above_aggregate(child, wanted)?)
        }
        _ => Ok(None),
    }
}

/// `plan`, the exchanges between an aggregate's stages, with the filter under the first.
fn below_exchanges(
    plan: &Arc<dyn ExecutionPlan>,
    wanted: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        return match aggregate.mode() {
            AggregateMode::Partial => filtered_under(plan, aggregate, wanted),
            _ => Ok(None),
        };
    }
    match (plan.name(), &plan.children()[..]) {
        ("RepartitionExec" | "CoalesceBatchesExec" | "CoalescePartitionsExec", [child]) => {
            rebuilt(plan, below_exchanges(child, wanted)?)
        }
        _ => Ok(None),
    }
}

/// `plan` (which is `aggregate`) reading its input through the filter, if it can take it.
fn filtered_under(
    plan: &Arc<dyn ExecutionPlan>,
    aggregate: &AggregateExec,
    wanted: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if !takes(aggregate) {
        return Ok(None);
    }
    let input = aggregate.input();
    let keys: Vec<_> = (aggregate.group_expr().expr().iter())
        .map(|(expr, _)| Arc::clone(expr))
        .collect();
    let schema = input.schema();
    for key in &keys {
        if is_volatile(key) || !same_equality(&key.data_type(&schema)?) {
            return Ok(None);
        }
    }
    let filter = FirstGroupsExec::new(Arc::clone(input), keys, wanted);
    rebuilt(plan, Some(Arc::new(filter)))
}

/// Whether the aggregate groups by plain keys (no grouping sets), computes something (a
/// bare `DISTINCT ... LIMIT` is DataFusion's own, which stops early) and has no limit of its
/// own.
fn takes(aggregate: &AggregateExec) -> bool {
    let group_by = aggregate.group_expr();
    group_by.is_single()
        && !group_by.expr().is_empty()
        && !aggregate.aggr_expr().is_empty()
        && aggregate.limit_options().is_none()
}

/// Whether two values of `data_type` are one group exactly when their row encodings are
/// equal (not floats, whose zeros and NaNs the encoding tells apart).
fn same_equality(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => same_equality(values),
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _)
        | DataType::Time32(_)
        | DataType::Time64(_) => true,
        _ => false,
    }
}

/// `plan` with its only child replaced by `child`, if there is one.
fn rebuilt(
    plan: &Arc<dyn ExecutionPlan>,
    child: Option<Arc<dyn ExecutionPlan>>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    child
        .map(|child| replace_children_if_necessary(Arc::clone(plan), vec![child]))
        .transpose()
}

/// The rows of its input whose keys are among the first `limit` keys seen in any
/// partition (see the module's comment).
#[derive(Debug)]
pub struct FirstGroupsExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    limit: usize,
    chosen: Arc<Mutex<Chosen>>,
    metrics: ExecutionPlanMetricsSet,
}

impl FirstGroupsExec {
    fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<Arc<dyn PhysicalExpr>>, limit: usize) -> Self {
        FirstGroupsExec {
            input,
            keys,
            limit,
            chosen: Default::default(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

/// What the partitions share: the keys chosen so far (row-encoded, and their hashes), the
/// rows looked at while fewer were chosen, and whether the filter gave up.
#[derive(Debug, Default)]
struct Chosen {
    keys: HashSet<Box<[u8]>>,
    hashes: HashSet<u64>,
    rows_seen: usize,
    gave_up: bool,
    settled: Option<Arc<Settled>>,
}

/// The chosen keys once all `limit` are: they no longer change, so each partition keeps
/// a reference and reads them without the lock.
#[derive(Debug)]
struct Settled {
    keys: HashSet<Box<[u8]>>,
    hashes: HashSet<u64>,
}

impl DisplayAs for FirstGroupsExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|key| key.to_string()).collect();
        write!(
            f,
            "FirstGroupsExec: groups={}, keys=[{}]",
            self.limit,
            keys.join(", ")
        )
    }
}

impl ExecutionPlan for FirstGroupsExec {
    fn name(&self) -> &str {
        "FirstGroupsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // A filter: its input's partitions, order and equivalences.
        self.input.properties()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for key in &self.keys {
            if f(key)? == TreeNodeRecursion::Stop {
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
        Ok(Arc::new(FirstGroupsExec::new(
            input,
            self.keys.clone(),
            self.limit,
        )))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        let input = Arc::clone(&self.input);
        Ok(Arc::new(FirstGroupsExec::new(
            input,
            self.keys.clone(),
            self.limit,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = self.input.schema();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let mut filter = PartitionFilter::new(
            self.keys.clone(),
            self.limit,
            Arc::clone(&self.chosen),
            &schema,
        )?;
        let rows = input.filter_map(move |batch| {
            let _timer = baseline.elapsed_compute().timer();
            let kept = batch.and_then(|batch| filter.keep(batch));
            if let Ok(Some(kept)) = &kept {
                baseline.record_output(kept.num_rows());
            }
            futures::future::ready(kept.transpose())
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, rows)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// One partition's side of the filter.
struct PartitionFilter {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    limit: usize,
    give_up_after: usize,
    chosen: Arc<Mutex<Chosen>>,
    /// Set once the choice is settled or given up: no lock from then on.
    settled: Option<Arc<Settled>>,
    gave_up: bool,
    converter: RowConverter,
    hashes: Vec<u64>,
}

impl PartitionFilter {
    fn new(
        keys: Vec<Arc<dyn PhysicalExpr>>,
        limit: usize,
        chosen: Arc<Mutex<Chosen>>,
        schema: &SchemaRef,
    ) -> Result<Self> {
        let fields = (keys.iter())
            .map(|key| Ok(SortField::new(key.data_type(schema)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(PartitionFilter {
            keys,
            limit,
            give_up_after: (ROWS_PER_GROUP * limit).max(ROWS_AT_LEAST),
            chosen,
            settled: None,
            gave_up: false,
            converter: RowConverter::new(fields)?,
            hashes: Vec::new(),
        })
    }

    /// The rows of `batch` to aggregate; `None` when there are none.
    fn keep(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        if self.gave_up {
            return Ok(Some(batch));
        }
        let keys = (self.keys.iter())
            .map(|key| key.evaluate(&batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<ArrayRef>>>()?;
        self.hashes.clear();
        self.hashes.resize(batch.num_rows(), 0);
        create_hashes(&keys, &RandomState::with_seed(0), &mut self.hashes)?;
        let kept = match self.settled.clone() {
            Some(settled) => self.among(&settled, &keys)?,
            None => match self.choose(&keys)? {
                Some(kept) => kept,
                None => return Ok(Some(batch)),
            },
        };
        if kept.true_count() == batch.num_rows() {
            return Ok(Some(batch));
        }
        let batch = filter_record_batch(&batch, &kept)?;
        Ok((batch.num_rows() > 0).then_some(batch))
    }

    /// Rows whose key is chosen, choosing new keys while fewer than `limit` are; `None`
    /// once the filter has given up (every row passes).
    fn choose(&mut self, keys: &[ArrayRef]) -> Result<Option<BooleanArray>> {
        let mut chosen = self.chosen.lock().map_err(|_| poisoned())?;
        if chosen.gave_up {
            self.gave_up = true;
            return Ok(None);
        }
        if let Some(settled) = chosen.settled.clone() {
            drop(chosen);
            self.settled = Some(Arc::clone(&settled));
            return self.among(&settled, keys).map(Some);
        }
        let rows = self.converter.convert_columns(keys)?;
        let mut kept = Vec::with_capacity(rows.num_rows());
        for (row, hash) in rows.iter().zip(&self.hashes) {
            let key = row.as_ref();
            let known = chosen.keys.contains(key);
            let chose = !known && chosen.keys.len() < self.limit;
            if chose {
                chosen.keys.insert(key.into());
                chosen.hashes.insert(*hash);
            }
            kept.push(known || chose);
        }
        if chosen.keys.len() >= self.limit {
            // Settled keys live on in `settled` alone: nothing reads the sets being chosen.
            let settled = Arc::new(Settled {
                keys: std::mem::take(&mut chosen.keys),
                hashes: std::mem::take(&mut chosen.hashes),
            });
            chosen.settled = Some(Arc::clone(&settled));
            self.settled = Some(settled);
        } else {
            // Nothing was dropped: every key seen so far is chosen.
            chosen.rows_seen += rows.num_rows();
            if chosen.rows_seen >= self.give_up_after {
                chosen.gave_up = true;
            }
        }
        Ok(Some(BooleanArray::from(kept)))
    }

    /// Rows whose key is among the settled ones: the hash finds candidates, the row
    /// encoding of the candidates alone decides.
    fn among(&self, settled: &Settled, keys: &[ArrayRef]) -> Result<BooleanArray> {
        let candidates: Vec<u32> = (self.hashes.iter().enumerate())
            .filter(|(_, hash)| settled.hashes.contains(hash))
            .map(|(row, _)| row as u32)
            .collect();
        let mut kept = vec![false; self.hashes.len()];
        if !candidates.is_empty() {
            let indices = UInt32Array::from(candidates);
            let taken = (keys.iter())
                .map(|key| take(key.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let rows = self.converter.convert_columns(&taken)?;
            for (row, &index) in rows.iter().zip(indices.values()) {
                kept[index as usize] = settled.keys.contains(row.as_ref());
            }
        }
        Ok(BooleanArray::from(kept))
    }
}

fn poisoned() -> DataFusionError {
    DataFusionError::Internal("FirstGroupsExec: a partition panicked holding the keys".into())
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::compute::concat_batches;
    use datafusion::physical_plan::displayable;

    use crate::exec::ExecutorKind;
    use crate::{QuiverSession, SessionOptions};

    /// 20,000 rows in batches of 7: 5,000 groups of (k, s) with 4 rows each, spread over
    /// the whole table, and a NULL key among them.
    const TABLE: &str = "CREATE TABLE t AS SELECT \
        CASE WHEN value % 5000 = 17 THEN NULL ELSE value % 5000 END AS k, \
        'v' || CAST(value % 1000 AS VARCHAR) AS s, value AS v FROM range(20000)";

    async fn session() -> QuiverSession {
        let session = QuiverSession::local_two_threads();
        session
            .run("SET datafusion.execution.batch_size = 7")
            .await
            .unwrap();
        session.run(TABLE).await.unwrap();
        session
    }

    /// The (k, s, count, sum) rows a query returns.
    async fn groups(session: &QuiverSession, sql: &str) -> Vec<(Option<i64>, String, i64, i64)> {
        let output = session.run(sql).await.unwrap();
        let batch = concat_batches(&output.batches[0].schema(), &output.batches).unwrap();
        let column = |i: usize| batch.column(i).clone();
        let (k, s, n, v) = (column(0), column(1), column(2), column(3));
        let k = k.as_any().downcast_ref::<Int64Array>().unwrap();
        let int = |a: &dyn Array, row| a.as_any().downcast_ref::<Int64Array>().unwrap().value(row);
        let s = datafusion::arrow::compute::cast(&s, &datafusion::arrow::datatypes::DataType::Utf8)
            .unwrap();
        let s = s
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .unwrap();
        (0..batch.num_rows())
            .map(|row| {
                let key = k.is_valid(row).then(|| k.value(row));
                (
                    key,
                    s.value(row).to_string(),
                    int(n.as_ref(), row),
                    int(v.as_ref(), row),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_limit_without_order_aggregates_whole_groups_of_the_first_keys() {
        let session = session().await;
        let query = "SELECT k, s, count(*) AS n, sum(v) AS v FROM t GROUP BY k, s LIMIT 10";
        let plan = session.physical_plan(query).await.unwrap();
        let shown = displayable(plan.as_ref()).indent(true).to_string();
        assert!(shown.contains("FirstGroupsExec: groups=10"), "{shown}");

        let all = groups(
            &session,
            "SELECT k, s, count(*), sum(v) FROM t GROUP BY k, s",
        )
        .await;
        let first = groups(&session, query).await;
        assert_eq!(first.len(), 10);
        for group in &first {
            assert!(all.contains(group), "{group:?} is not a whole group");
        }
        // With an offset, and with a key that is an expression.
        let query = "SELECT k % 1000 AS k, s, count(*), sum(v) FROM t GROUP BY k % 1000, s \
            LIMIT 7 OFFSET 5";
        let all = groups(&session, &query.replace(" LIMIT 7 OFFSET 5", "")).await;
        let first = groups(&session, query).await;
        assert_eq!(first.len(), 7);
        assert!(first.iter().all(|group| all.contains(group)), "{first:?}");
    }

    #[tokio::test]
    async fn fewer_groups_than_the_limit_are_all_returned() {
        let session = session().await;
        // 4 groups in 20,000 rows: none is dropped; 3 in 70,000: the filter gives up after
        // 65,536 rows and lets every row through.
        for (query, count) in [
            (
                "SELECT k % 3 AS k, 'x' AS s, count(*), sum(v) FROM t GROUP BY k % 3 LIMIT 10",
                4,
            ),
            (
                "SELECT value % 3 AS k, 'x' AS s, count(*), sum(value) FROM range(70000) \
                 GROUP BY value % 3 LIMIT 10",
                3,
            ),
        ] {
            let plan = session.physical_plan(query).await.unwrap();
            let shown = displayable(plan.as_ref()).indent(true).to_string();
            assert!(shown.contains("FirstGroupsExec"), "{shown}");
            let mut answer = groups(&session, query).await;
            answer.sort();
            let mut all = groups(&session, &query.replace(" LIMIT 10", "")).await;
            all.sort();
            assert_eq!(answer, all);
            assert_eq!(answer.len(), count, "{answer:?}"); // with the NULL key in t
        }
    }

    #[tokio::test]
    async fn ordered_having_float_and_remote_plans_are_left_alone() {
        let session = session().await;
        for query in [
            "SELECT k, count(*) FROM t GROUP BY k ORDER BY 2 DESC LIMIT 10",
            "SELECT k, count(*) FROM t GROUP BY k HAVING count(*) > 3 LIMIT 10",
            "SELECT CAST(k AS DOUBLE), count(*) FROM t GROUP BY 1 LIMIT 10",
            "SELECT DISTINCT k FROM t LIMIT 10",
        ] {
            let plan = session.physical_plan(query).await.unwrap();
            let shown = displayable(plan.as_ref()).indent(true).to_string();
            assert!(!shown.contains("FirstGroupsExec"), "{query}\n{shown}");
        }
        let options = SessionOptions {
            threads: 2,
            executor: ExecutorKind::Fragments,
        };
        let fragments = QuiverSession::new(options).unwrap();
        fragments.run(TABLE).await.unwrap();
        let plan = fragments.physical_plan("SELECT k, count(*) FROM t GROUP BY k LIMIT 10");
        let shown = displayable(plan.await.unwrap().as_ref())
            .indent(true)
            .to_string();
        assert!(!shown.contains("FirstGroupsExec"), "{shown}");
    }
}
