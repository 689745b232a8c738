//! Probe rows a DISTINCT above cannot tell apart are dropped before they reach the join.
//!
//! An aggregate with no aggregate functions (`SELECT DISTINCT`, INTERSECT and EXCEPT, the
//! inner grouping of a COUNT(DISTINCT)) reads its input as a set: two rows that agree on
//! every column it reads are one. Below it, through projections, filters and exchanges,
//! a hash join's probe row matters only through the probe columns read above, its join
//! keys and its join filter's columns: two probe rows that agree on those give the join
//! the same matches and the aggregate the same rows. So the first such join's probe input
//! gets a `DistinctProbeExec` that keeps the first row of each combination and drops the
//! rest. TPC-DS q38 (INTERSECT of three channels' distinct customer names and dates)
//! probes a year of store_sales, ten lines per ticket, into customer: the lines of a
//! ticket agree on customer and date, so one in ten is probed and grouped by two names.
//! Joins further down are left alone: they are often the filters (q38's year of dates
//! keeps a fifth of store_sales), and rows are cheaper probed there than sifted.
//!
//! It pays only where rows repeat, and costs a lookup per row where they do not: each
//! partition stops sifting once the rows it has read show too few repeats (`JUDGEMENTS`),
//! or when the pool refuses its table, and passes rows on untouched from then.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::JoinSide;
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::utils::build_join_schema;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};

use crate::options::QuiverOptions;
use crate::row_sieve::{still_pays, Sieve, SieveExec, SieveKind};

/// When a partition judges whether sifting pays: once it has read so many rows, the share
/// of them it may have kept and still sift. Each kept row costs a lookup here and the join
/// and grouping above; each dropped one saves those two. A first batch kept nearly whole
/// says the probe rows are distinct already (TPC-H Q16's parts and suppliers: 6 rows of
/// 118,000 dropped, at a lookup of four keys each, 8% of the query); rows that repeat show
/// it within a batch or a few (q38's ticket lines).
const JUDGEMENTS: [(usize, f64); 2] = [(4_096, 0.9), (32_768, 0.5)];

/// The rule: a hash join's probe input below an aggregate that reads its input as a set
/// gets a `DistinctProbeExec` over the probe columns that matter.
#[derive(Debug)]
pub struct DistinctProbes;

impl PhysicalOptimizerRule for DistinctProbes {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !QuiverOptions::of(config).distinct_probes {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(read) = columns_read_as_a_set(aggregate) else {
                return Ok(Transformed::no(node));
            };
            Ok(match sifted(aggregate.input(), &read)? {
                Some(input) => Transformed::yes(replace_children_if_necessary(node, vec![input])?),
                None => Transformed::no(node),
            })
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "distinct_probes"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The input columns an aggregate reads, where it reads its input as a set: it groups raw
/// rows by one set of keys and computes nothing over them.
pub(crate) fn columns_read_as_a_set(aggregate: &AggregateExec) -> Option<BTreeSet<usize>> {
    let raw = matches!(
        aggregate.mode(),
        AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
    );
    let group_by = aggregate.group_expr();
    if !raw || !aggregate.aggr_expr().is_empty() || !group_by.is_single() {
        return None;
    }
    Some(columns_of(group_by.expr().iter().map(|(expr, _)| expr)))
}

/// The indices of the columns `exprs` read.
fn columns_of<'a>(exprs: impl IntoIterator<Item = &'a Arc<dyn PhysicalExpr>>) -> BTreeSet<usize> {
    let columns = exprs.into_iter().flat_map(collect_columns);
    columns.map(|column| column.index()).collect()
}

/// `node` with a `DistinctProbeExec` over the probe input of the first hash join it reaches
/// through operators that keep a set of rows a set (`read`: the columns read of its
/// output), or `None` where it reaches none.
fn sifted(
    node: &Arc<dyn ExecutionPlan>,
    read: &BTreeSet<usize>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let below = if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
        let exprs = projection.expr();
        columns_of(read.iter().map(|&index| &exprs[index].expr))
    } else if let Some(filter) = node.downcast_ref::<FilterExec>() {
        let mut below: BTreeSet<usize> = match filter.projection() {
            Some(projection) => read.iter().map(|&index| projection[index]).collect(),
            None => read.clone(),
        };
        below.extend(columns_of([filter.predicate()]));
        below
    } else if passes_rows_on(node) {
        read.clone()
    } else if let Some(join) = node.downcast_ref::<HashJoinExec>() {
        return probe_sifted(node, join, read);
    } else {
        return Ok(None);
    };
    match sifted(node.children()[0], &below)? {
        Some(child) => Ok(Some(replace_children_if_necessary(
            Arc::clone(node),
            vec![child],
        )?)),
        None => Ok(None),
    }
}

/// `join` (`node`) with its probe input sifted on the probe columns read above (of
/// `read`), its join keys and its join filter's columns; `None` where no probe column is
/// read above (a semi join keeping build rows, TPC-DS q14's items sold in a channel): a
/// probe row then costs the join one lookup, as much as sifting it would.
fn probe_sifted(
    node: &Arc<dyn ExecutionPlan>,
    join: &HashJoinExec,
    read: &BTreeSet<usize>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let (_, sides) = build_join_schema(
        &join.left().schema(),
        &join.right().schema(),
        join.join_type(),
    );
    let output = |index: usize| match &join.projection {
        Some(projection) => &sides[projection[index]],
        None => &sides[index],
    };
    let mut probe: BTreeSet<usize> = (read.iter().map(|&index| output(index)))
        .filter(|column| column.side == JoinSide::Right)
        .map(|column| column.index)
        .collect();
    if probe.is_empty() {
        return Ok(None);
    }
    probe.extend(columns_of(join.on().iter().map(|(_, right)| right)));
    if let Some(filter) = join.filter() {
        let columns = filter.column_indices().iter();
        probe.extend(
            columns
                .filter(|c| c.side == JoinSide::Right)
                .map(|c| c.index),
        );
    }
    // Not below this join's probe input: a join there may be the filter (TPC-DS q38's
    // date_dim keeps a year of store_sales), whose rows are cheaper probed than sifted.
    let right = Arc::clone(join.right());
    let right = match distinct_already(&right, &probe) {
        true => right,
        false => Arc::new(DistinctProbeExec::new(
            Arc::new(FirstOfEach),
            right,
            probe.into_iter().collect(),
        )),
    };
    let children = vec![Arc::clone(join.left()), right];
    replace_children_if_necessary(Arc::clone(node), children).map(Some)
}

/// Whether `node` passes its input's rows on as they are, only batched or spread over
/// partitions otherwise.
fn passes_rows_on(node: &Arc<dyn ExecutionPlan>) -> bool {
    matches!(
        node.name(),
        "CoalesceBatchesExec" | "RepartitionExec" | "CoalescePartitionsExec" | "CooperativeExec"
    )
}

/// Whether `node`'s rows are distinct on `keys` already: a finished grouping's rows, all
/// of whose keys are among them (INTERSECT's probe side, a DISTINCT's output).
fn distinct_already(node: &Arc<dyn ExecutionPlan>, keys: &BTreeSet<usize>) -> bool {
    if passes_rows_on(node) {
        return distinct_already(node.children()[0], keys);
    }
    node.downcast_ref::<AggregateExec>()
        .is_some_and(|aggregate| {
            let finished = matches!(
                aggregate.mode(),
                AggregateMode::Final
                    | AggregateMode::FinalPartitioned
                    | AggregateMode::Single
                    | AggregateMode::SinglePartitioned
            );
            let group_by = aggregate.group_expr();
            finished
                && group_by.is_single()
                && (0..group_by.expr().len()).all(|key| keys.contains(&key))
        })
}

/// Keeps the first row of each combination of its keys' values in a partition and drops
/// the rest, while that pays (see the module's header).
pub(crate) type DistinctProbeExec = SieveExec<FirstOfEach>;

/// `DistinctProbeExec`'s kind of sieve.
#[derive(Debug)]
pub(crate) struct FirstOfEach;

impl SieveKind for FirstOfEach {
    const NAME: &'static str = "DistinctProbeExec";

    fn sieve(
        &self,
        keys: &[usize],
        partition: usize,
        context: &TaskContext,
        input: &Arc<dyn ExecutionPlan>,
    ) -> Result<Box<dyn Sieve>> {
        let key_schema = Arc::new(input.schema().project(keys)?);
        Ok(Box::new(FirstRows {
            keys: keys.to_vec(),
            seen: Some(new_group_values(key_schema, &GroupOrdering::None)?),
            groups: Vec::new(),
            read: 0,
            kept: 0,
            held: MemoryConsumer::new(format!("DistinctProbeExec[{partition}]"))
                .register(context.memory_pool()),
        }))
    }
}

/// One partition's combinations seen so far, until sifting stops paying.
struct FirstRows {
    keys: Vec<usize>,
    /// `None` once it passes rows on untouched.
    seen: Option<Box<dyn GroupValues>>,
    groups: Vec<usize>,
    read: usize,
    kept: usize,
    held: MemoryReservation,
}

impl Sieve for FirstRows {
    fn sift(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let Some(seen) = self.seen.as_mut() else {
            return Ok(batch);
        };
        let columns: Vec<ArrayRef> = self
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let known = seen.len();
        self.groups.clear();
        seen.intern(&columns, &mut self.groups)?;
        // A row is kept where it brings a combination first met in this batch (groups may
        // be numbered in another order than their first rows).
        let mut met = vec![false; seen.len() - known];
        let groups = &self.groups;
        let keep = BooleanArray::new(
            BooleanBuffer::collect_bool(groups.len(), |row| {
                let group = groups[row];
                group >= known && !std::mem::replace(&mut met[group - known], true)
            }),
            None,
        );
        let kept = met.len();
        self.read += batch.num_rows();
        self.kept += kept;
        let sifted = filter_record_batch(&batch, &keep)?;
        let refused = self.held.try_resize(seen.size()).is_err();
        if refused || !still_pays(&JUDGEMENTS, self.read, self.kept) {
            self.seen = None;
            self.held.free();
        }
        Ok(sifted)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_plan::{collect, displayable};

    use super::*;
    use crate::QuiverSession;

    /// Sales lines, eight to a ticket, a ticket's lines of one customer and day; customers
    /// with names that repeat; days with months.
    const TABLES: [&str; 3] = [
        "CREATE TABLE sales AS SELECT value AS line, value / 8 AS ticket, \
            (value / 8) % 300 AS customer, (value / 8) % 50 AS day, value % 7 AS quantity \
            FROM range(20000)",
        "CREATE TABLE customers AS SELECT value AS customer, 'f' || CAST(value % 40 AS VARCHAR) AS first, \
            CASE WHEN value % 13 = 0 THEN NULL ELSE 'l' || CAST(value % 17 AS VARCHAR) END AS last, \
            value % 5 AS most FROM range(280)",
        "CREATE TABLE days AS SELECT value AS day, value % 12 AS month FROM range(50)",
    ];

    #[tokio::test]
    async fn distinct_rows_over_joins_answer_as_datafusion_does() {
        let session = QuiverSession::local_two_threads();
        session
            .run("SET datafusion.execution.batch_size = 100")
            .await
            .unwrap();
        for table in TABLES {
            session.run(table).await.unwrap();
        }
        let names = |where_: &str| {
            format!(
                "SELECT DISTINCT c.last, c.first, d.month FROM sales s \
                JOIN days d ON s.day = d.day JOIN customers c ON s.customer = c.customer {where_}"
            )
        };
        // (a query, whether a probe is sifted)
        let cases = [
            (
                format!(
                    "{} ORDER BY 1, 2, 3",
                    names("WHERE d.month BETWEEN 2 AND 9")
                ),
                true,
            ),
            (
                format!(
                    "{} INTERSECT {} ORDER BY 1, 2, 3",
                    names(""),
                    names("WHERE s.quantity = 3")
                ),
                true,
            ),
            (
                format!(
                    "{} EXCEPT {} ORDER BY 1, 2, 3",
                    names(""),
                    names("WHERE d.month < 4")
                ),
                true,
            ),
            // A join filter's columns tell probe rows apart as well.
            (
                "SELECT DISTINCT c.first, s.day FROM sales s JOIN customers c \
                    ON s.customer = c.customer AND s.quantity > c.most ORDER BY 1, 2"
                    .to_string(),
                true,
            ),
            // Unmatched rows of an outer join.
            (
                "SELECT DISTINCT c.last, s.day FROM sales s LEFT JOIN customers c \
                    ON s.customer = c.customer ORDER BY 1, 2"
                    .to_string(),
                true,
            ),
            // A semi join that keeps the probe rows (sales, the larger side).
            (
                "SELECT DISTINCT s.customer % 100, s.day FROM sales s WHERE s.day IN \
                    (SELECT d.day FROM days d WHERE d.month < 6) ORDER BY 1, 2"
                    .to_string(),
                true,
            ),
            // One that keeps the build rows (days): no probe column is read above.
            (
                "SELECT DISTINCT d.month FROM days d WHERE d.day IN \
                    (SELECT s.day FROM sales s WHERE s.quantity = 2) ORDER BY 1"
                    .to_string(),
                false,
            ),
            (
                "SELECT d.month, count(DISTINCT c.last) FROM sales s JOIN days d ON s.day = d.day \
                    JOIN customers c ON s.customer = c.customer GROUP BY d.month ORDER BY 1"
                    .to_string(),
                true,
            ),
            // A sum counts every row.
            (
                "SELECT c.last, sum(s.quantity) FROM sales s JOIN customers c \
                    ON s.customer = c.customer GROUP BY c.last ORDER BY 1"
                    .to_string(),
                false,
            ),
        ];
        for (sql, sifts) in cases {
            let mut answers = Vec::new();
            for on in [true, false] {
                session
                    .run(&format!("SET quiver.distinct_probes = {on}"))
                    .await
                    .unwrap();
                let plan = session.physical_plan(&sql).await.unwrap();
                let shown = displayable(plan.as_ref()).indent(true).to_string();
                assert_eq!(
                    shown.contains("DistinctProbeExec"),
                    on && sifts,
                    "{sql}\n{shown}"
                );
                let output = session.run(&sql).await.unwrap();
                answers.push(pretty_format_batches(&output.batches).unwrap().to_string());
            }
            assert_eq!(answers[0], answers[1], "{sql}");
            assert!(answers[0].lines().count() > 5, "{sql}\n{}", answers[0]);
        }
    }

    /// The rows `DistinctProbeExec` keeps of `batches` (one column, one partition) under a
    /// pool of `pool_bytes`.
    async fn kept(batches: Vec<Vec<i64>>, pool_bytes: usize) -> usize {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batches = (batches.into_iter())
            .map(|values| {
                let column = Arc::new(Int64Array::from(values)) as ArrayRef;
                RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap()
            })
            .collect::<Vec<_>>();
        let source = MemorySourceConfig::try_new_exec(&[batches], schema, None).unwrap();
        let sieve = Arc::new(DistinctProbeExec::new(
            Arc::new(FirstOfEach),
            source,
            vec![0],
        ));
        let pool = Arc::new(GreedyMemoryPool::new(pool_bytes));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(pool)
            .build_arc()
            .unwrap();
        let context = Arc::new(TaskContext::default().with_runtime(runtime));
        let output = collect(sieve, context).await.unwrap();
        output.iter().map(RecordBatch::num_rows).sum()
    }

    #[tokio::test]
    async fn sifting_stops_where_it_does_not_pay() {
        let chunk = |from: i64| (from..from + 8192).collect::<Vec<_>>();
        let repeating = || (0..8192).map(|value| value % 1000).collect::<Vec<_>>();
        let plenty = 1 << 30;
        // Values that repeat are kept once, whatever the batch.
        assert_eq!(kept(vec![repeating(); 6], plenty).await, 1000);
        // A batch's values met twice in it are kept once.
        assert_eq!(kept(vec![vec![5, 3, 5, 3, 9, 3]], plenty).await, 3);
        // A first batch with no repeats: it passes the rest on, repeats too.
        let unique = vec![chunk(0), repeating(), chunk(0)];
        assert_eq!(kept(unique, plenty).await, 3 * 8192);
        // Three new in four, as many batches: past 32,768 rows it passes rows on.
        let mostly_new = |i: i64| {
            let mut values = chunk(i * 8192);
            values[..2048].fill(-1);
            values
        };
        let batches = (0..5).map(mostly_new).chain([chunk(0)]).collect();
        assert_eq!(kept(batches, plenty).await, 1 + 4 * 6144 + 2 * 8192);
        // A third new, the rest repeating: it keeps sifting, and the repeats are dropped.
        let mixed = (0..6)
            .flat_map(|i| [repeating(), repeating(), chunk(10_000 + i * 8192)])
            .collect();
        assert_eq!(kept(mixed, plenty).await, 1000 + 6 * 8192);
        // A pool that refuses its table: the first batch is sifted, the rest pass.
        assert_eq!(kept(vec![repeating(); 3], 64).await, 1000 + 2 * 8192);
    }
}
