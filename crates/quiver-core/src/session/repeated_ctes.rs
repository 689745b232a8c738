//! A CTE that a statement names more than once is computed once (`quiver.materialize_ctes`).
//!
//! DataFusion plans a CTE again at every reference: TPC-DS q47 names `v1` three times, and
//! its joins, aggregate and windows ran three times. DuckDB computes such a CTE once and
//! reads its rows at each reference. So here, before the plan runs, a subplan that appears
//! more than once and summarises what it reads (an aggregate or DISTINCT, or a UNION of
//! them: its rows are few against its input) runs on its own first; its rows are kept in
//! memory, counted against the memory limit while the statement lasts, and each reference
//! reads them. Where they would pass the limit, the subplan stays inline, as before.
//!
//! What a reference would lose is the filters the optimizer pushes into its copy. So a
//! subplan is computed once only where no copy, optimised within the whole plan, filters
//! more than the subplan alone does: q47's `d_year = 1999` stays above its windows, and its
//! three copies are alike; q04's `sale_type = 's'` reaches into each copy of its UNION and
//! keeps one branch there, so each copy computes a part, and they stay. Nor where a join
//! holds a copy beside a scan filtered by the query (q02's copies beside one year of
//! `date_dim`): its dynamic filters prune the copy as it runs. Deciding optimises the
//! whole plan, and a plan left as it was goes on to its physical plan from that (q64's
//! optimiser takes 88 ms). Only plans DataFusion's threads run here: a fragment cannot
//! carry rows kept on the coordinator.
//! EXPLAIN and `EXPLAIN COST` show and price the plan with every reference inline.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinType, TableReference};
use datafusion::datasource::{provider_as_source, MemTable};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, SessionState};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, TableScan};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::ExecutionPlanProperties;
use futures::StreamExt;

use super::QuiverSession;

/// The memory the kept rows of a statement's computed-once subplans hold, counted in the
/// memory pool until the statement's answer is read or dropped.
#[derive(Debug, Default)]
pub(super) struct KeptRows(Vec<MemoryReservation>);

impl KeptRows {
    /// `batches`, holding the kept rows' reservations until the stream ends or is dropped.
    pub fn held_by(self, batches: SendableRecordBatchStream) -> SendableRecordBatchStream {
        if self.0.is_empty() {
            return batches;
        }
        let schema = batches.schema();
        let held = batches.map(move |batch| {
            let _ = &self;
            batch
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, held))
    }
}

/// A statement's plan once its repeated subplans were decided on.
pub(super) struct Decided {
    /// The plan, with the subplans computed once replaced by scans of their rows.
    pub plan: LogicalPlan,
    /// `plan` optimised, where deciding optimised it (planning it again would cost as
    /// much: 88 ms for TPC-DS q64).
    pub optimized: Option<LogicalPlan>,
    /// The memory the rows computed once hold.
    pub kept: KeptRows,
}

impl Decided {
    /// `plan` as planned: nothing computed once.
    pub fn as_planned(plan: LogicalPlan) -> Self {
        let (optimized, kept) = (None, KeptRows::default());
        Decided {
            plan,
            optimized,
            kept,
        }
    }
}

impl QuiverSession {
    /// `plan` with each repeated, summarising subplan (see the module's comment) replaced by
    /// a scan of its rows, computed now.
    pub(super) async fn computed_once(&self, plan: LogicalPlan) -> Result<Decided> {
        let none = HashSet::new();
        if !is_query(&plan) || has_recursion(&plan)? || first_repeated(&plan, &none)?.is_none() {
            return Ok(Decided::as_planned(plan));
        }
        let original = plan.clone();
        let mut kept = KeptRows::default();
        let state = self.context.state();
        // The types the rows will have: analyzer rules change some (`avg` of a DECIMAL is
        // a DOUBLE, see `duckdb::typed`).
        let mut plan =
            (state.analyzer()).execute_and_check(plan, state.config_options(), |_, _| {})?;
        let mut left_inline = HashSet::new();
        // Optimising a plan of TPC-DS's size takes tens of milliseconds: once, and again
        // only once a copy is replaced. `optimized`, where there is one, is `plan`'s (the
        // original's, as DataFusion would optimise it, until a copy is replaced).
        let mut optimized = None;
        while let Some(repeated) = first_repeated(&plan, &left_inline)? {
            let whole = match optimized.take() {
                Some(whole) => whole,
                None if kept.0.is_empty() => state.optimize(&original)?,
                None => state.optimize(&plan)?,
            };
            let alike = filtered_alike(&state, &whole, &repeated)?;
            optimized = Some(whole);
            if !alike {
                left_inline.insert(repeated);
                continue;
            }
            let Some((scan, reservations)) = self.rows_of(&repeated).await? else {
                left_inline.insert(repeated);
                continue;
            };
            let replaced = replaced(plan, &repeated, scan)?;
            kept.0.extend(reservations);
            plan = replaced.data;
            optimized = None;
            if !replaced.transformed {
                // Found and not replaced would be found again: never loop on it.
                left_inline.insert(repeated);
            }
        }
        // A plan with nothing replaced goes on as it came: only a replaced one is analysed
        // twice (again on its way to a physical plan).
        let plan = if kept.0.is_empty() { original } else { plan };
        Ok(Decided {
            plan,
            optimized,
            kept,
        })
    }

    /// `subplan` run to the end, its rows as a scan of them under its own name, or `None`
    /// where they did not fit in the memory pool.
    async fn rows_of(
        &self,
        subplan: &LogicalPlan,
    ) -> Result<Option<(LogicalPlan, Vec<MemoryReservation>)>> {
        let LogicalPlan::SubqueryAlias(alias) = subplan else {
            return Ok(None);
        };
        let physical = self.physical(subplan.clone()).await?;
        // The rows keep the names the plan above them was planned with.
        let Some(schema) = kept_schema(subplan.schema().as_arrow(), &physical.schema()) else {
            return Ok(None);
        };
        let task = self.context.task_ctx();
        let partitions = (0..physical.output_partitioning().partition_count())
            .map(|partition| {
                let stream = physical.execute(partition, Arc::clone(&task))?;
                let pool = Arc::clone(task.memory_pool());
                Ok(SpawnedTask::spawn(kept(stream, pool)))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut batches = Vec::with_capacity(partitions.len());
        let mut reservations = Vec::with_capacity(partitions.len());
        let mut fits = true;
        for partition in partitions {
            let joined = partition
                .join_unwind()
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))??;
            let Some((rows, reservation)) = joined else {
                fits = false;
                continue;
            };
            let rows = rows
                .iter()
                .map(|batch| RecordBatch::try_new(Arc::clone(&schema), batch.columns().to_vec()))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            batches.push(rows);
            reservations.push(reservation);
        }
        if !fits {
            return Ok(None);
        }
        let table = MemTable::try_new(schema, batches)?;
        let scan = LogicalPlanBuilder::scan(
            alias.alias.clone(),
            provider_as_source(Arc::new(table)),
            None,
        )?
        .build()?;
        Ok(Some((scan, reservations)))
    }
}

/// The logical schema's fields, nullable where the rows' are; `None` where their types
/// differ (the rows could not stand for the subplan).
fn kept_schema(logical: &Schema, rows: &Schema) -> Option<SchemaRef> {
    if logical.fields().len() != rows.fields().len() {
        return None;
    }
    let fields = (logical.fields().iter().zip(rows.fields()))
        .map(|(named, row)| {
            (named.data_type() == row.data_type()).then(|| {
                let nullable = named.is_nullable() || row.is_nullable();
                Arc::new(named.as_ref().clone().with_nullable(nullable))
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Arc::new(Schema::new(fields)))
}

/// The rows of one partition, each batch counted in `pool` as it comes; `None` once the
/// pool refuses one.
async fn kept(
    mut stream: SendableRecordBatchStream,
    pool: Arc<dyn MemoryPool>,
) -> Result<Option<(Vec<RecordBatch>, MemoryReservation)>> {
    let reservation = MemoryConsumer::new("rows of a CTE named more than once").register(&pool);
    let mut batches = vec![];
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if reservation.try_grow(bytes_of(&batch)).is_err() {
            return Ok(None);
        }
        batches.push(batch);
    }
    Ok(Some((batches, reservation)))
}

/// The bytes `batch`'s rows hold: an aggregate's output batches are slices of one set of
/// buffers, which `get_array_memory_size` would count whole in every slice.
fn bytes_of(batch: &RecordBatch) -> usize {
    (batch.columns().iter())
        .map(|column| {
            let data = column.to_data();
            data.get_slice_memory_size()
                .unwrap_or_else(|_| column.get_array_memory_size())
        })
        .sum()
}

/// Whether `plan` answers a query (not a view's definition, EXPLAIN, DDL or DML).
fn is_query(plan: &LogicalPlan) -> bool {
    !matches!(
        plan,
        LogicalPlan::Statement(_)
            | LogicalPlan::Explain(_)
            | LogicalPlan::Analyze(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Ddl(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::DescribeTable(_)
    )
}

/// Whether `plan` holds a recursive CTE, whose work table only its own loop can read.
fn has_recursion(plan: &LogicalPlan) -> Result<bool> {
    any_node(plan, |node| matches!(node, LogicalPlan::RecursiveQuery(_)))
}

/// Whether some node of `plan`, or of its subqueries, is `found`.
fn any_node(plan: &LogicalPlan, found: impl Fn(&LogicalPlan) -> bool) -> Result<bool> {
    let mut any = false;
    plan.apply_with_subqueries(|node| {
        any = found(node);
        Ok(match any {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    })?;
    Ok(any)
}

/// The first subplan, in plan order, that appears more than once and is worth computing
/// once (`worth_keeping`), but for those `left_inline` (their rows did not fit).
fn first_repeated(
    plan: &LogicalPlan,
    left_inline: &HashSet<LogicalPlan>,
) -> Result<Option<LogicalPlan>> {
    let mut seen: HashMap<LogicalPlan, usize> = HashMap::new();
    let mut order = vec![];
    plan.apply_with_subqueries(|node| {
        if worth_keeping(node) && !left_inline.contains(node) {
            let count = seen.entry(node.clone()).or_insert(0);
            if *count == 0 {
                order.push(node.clone());
            }
            *count += 1;
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(order.into_iter().find(|node| seen[node] > 1))
}

/// A named subplan (a CTE, or a derived table) that summarises what it reads and refers
/// to no column of an outer query.
fn worth_keeping(node: &LogicalPlan) -> bool {
    let LogicalPlan::SubqueryAlias(alias) = node else {
        return false;
    };
    summarises(&alias.input) && !refers_outside(node)
}

/// Whether `plan`'s rows come from an aggregate or DISTINCT (through projections, filters,
/// windows, sorts and limits), or from a UNION of such.
fn summarises(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => true,
        LogicalPlan::Union(union) => union.inputs.iter().all(|input| summarises(input)),
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::SubqueryAlias(_) => plan.inputs().first().is_some_and(|i| summarises(i)),
        _ => false,
    }
}

/// Whether each copy of `repeated` in the optimised whole plan, `optimized`, reads what
/// `repeated` alone reads: the same scans under the same filters. Where the query's filters reach into its
/// copies (q75's `d_year = 2002` passes the aggregate down to the scans; q04's `sale_type =
/// 's'` keeps one branch of a UNION, the others' scans gone), each copy computes a part, and
/// the whole computed once is more work, not less. Filters that stop above an aggregate (a
/// HAVING) change nothing it reads. The checks that need nothing more come first.
fn filtered_alike(
    state: &SessionState,
    optimized: &LogicalPlan,
    repeated: &LogicalPlan,
) -> Result<bool> {
    let LogicalPlan::SubqueryAlias(named) = repeated else {
        return Ok(false);
    };
    // A copy may hold another: TPC-H Q15's `revenue0` filtered by `(SELECT max(..) FROM
    // revenue0)`, the filter pushed into the outer copy.
    let mut copies = vec![];
    optimized.apply_with_subqueries(|node| {
        if let LogicalPlan::SubqueryAlias(copy) = node {
            if copy.alias == named.alias {
                copies.push(scans_in(node, &named.alias)?);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if copies.len() < 2 || copies.iter().any(|scans| *scans != copies[0]) {
        return Ok(false);
    }
    if pruned_at_run_time(optimized, &named.alias)? {
        return Ok(false);
    }
    Ok(scans_in(&state.optimize(repeated)?, &named.alias)? == copies[0])
}

/// Whether a join may prune a copy of the subplan `named` as it runs: one side holds a
/// copy and the other filters a scan of its own (q02: `wswscs` joined with the `date_dim`
/// of one year, whose weeks a dynamic filter carries down to the copy's scans). A semi or
/// anti join's subquery side (q23's `IN (SELECT item_sk FROM frequent_ss_items)`) is
/// built, not pruned.
fn pruned_at_run_time(plan: &LogicalPlan, named: &TableReference) -> Result<bool> {
    let mut pruned = false;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Join(join) = node {
            let (left, right) = (join.left.as_ref(), join.right.as_ref());
            let built_right = matches!(
                join.join_type,
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
            );
            let built_left = matches!(join.join_type, JoinType::RightSemi | JoinType::RightAnti);
            pruned = (!built_left && holds_copy(left, named)? && filters_own_scan(right, named)?)
                || (!built_right && holds_copy(right, named)? && filters_own_scan(left, named)?);
        }
        Ok(match pruned {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    })?;
    Ok(pruned)
}

/// Whether `plan` holds a copy of the subplan `named`.
fn holds_copy(plan: &LogicalPlan, named: &TableReference) -> Result<bool> {
    plan.exists(|node| Ok(matches!(node, LogicalPlan::SubqueryAlias(copy) if copy.alias == *named)))
}

/// Whether `plan` filters a scan outside the copies of the subplan `named`.
fn filters_own_scan(plan: &LogicalPlan, named: &TableReference) -> Result<bool> {
    let mut filters = false;
    plan.apply_with_subqueries(|node| {
        Ok(match node {
            LogicalPlan::SubqueryAlias(copy) if copy.alias == *named => TreeNodeRecursion::Jump,
            LogicalPlan::Filter(filter)
                if matches!(filter.input.as_ref(), LogicalPlan::TableScan(_)) =>
            {
                filters = true;
                TreeNodeRecursion::Stop
            }
            LogicalPlan::TableScan(scan) if !scan.filters.is_empty() => {
                filters = true;
                TreeNodeRecursion::Stop
            }
            _ => TreeNodeRecursion::Continue,
        })
    })?;
    Ok(filters)
}

/// Each scan of `plan` with the filters on its rows (its own and a Filter right above
/// it), as text, in order; but for the scans of copies of the subplan `named` inside it.
fn scans_in(plan: &LogicalPlan, named: &TableReference) -> Result<Vec<String>> {
    let mut scans = vec![];
    let mut add = |scan: &TableScan, above: Option<&Expr>| {
        let mut filters: Vec<String> = (scan.filters.iter().chain(above))
            .flat_map(split_conjunction)
            .map(ToString::to_string)
            .collect();
        filters.sort();
        scans.push(format!("{} [{}]", scan.table_name, filters.join(", ")));
    };
    plan.apply_with_subqueries(|node| {
        Ok(match node {
            LogicalPlan::Filter(filter) => match filter.input.as_ref() {
                LogicalPlan::TableScan(scan) => {
                    add(scan, Some(&filter.predicate));
                    TreeNodeRecursion::Jump
                }
                _ => TreeNodeRecursion::Continue,
            },
            LogicalPlan::TableScan(scan) => {
                add(scan, None);
                TreeNodeRecursion::Continue
            }
            LogicalPlan::SubqueryAlias(copy)
                if copy.alias == *named && !std::ptr::eq(node, plan) =>
            {
                TreeNodeRecursion::Jump
            }
            _ => TreeNodeRecursion::Continue,
        })
    })?;
    scans.sort();
    Ok(scans)
}

/// Whether some node of `plan` refers to a column of a query around it (a correlated
/// subquery's body), which it cannot be run without.
fn refers_outside(plan: &LogicalPlan) -> bool {
    any_node(plan, LogicalPlan::contains_outer_reference).unwrap_or(true)
}

/// `plan` with every copy of `repeated` replaced by `scan`.
fn replaced(
    plan: LogicalPlan,
    repeated: &LogicalPlan,
    scan: LogicalPlan,
) -> Result<Transformed<LogicalPlan>> {
    plan.transform_down_with_subqueries(|node| {
        Ok(match node == *repeated {
            true => Transformed::new(scan.clone(), true, TreeNodeRecursion::Jump),
            false => Transformed::no(node),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool};
    use datafusion::execution::SendableRecordBatchStream;
    use datafusion::physical_plan::memory::MemoryStream;

    use crate::QuiverSession;

    /// A session over `t` (k: 7 keys, v: 1000 values) in a Parquet file in `dir`.
    async fn session_over_t(dir: &std::path::Path) -> QuiverSession {
        let session = QuiverSession::local_two_threads();
        let file = dir.join("t.parquet");
        let copy = format!(
            "COPY (SELECT value % 7 AS k, value AS v FROM range(1000)) TO '{}'",
            file.display()
        );
        session.run(&copy).await.unwrap();
        let view = format!("CREATE VIEW t AS SELECT * FROM '{}'", file.display());
        session.run(&view).await.unwrap();
        session
    }

    /// The answer to `sql` as text, and the buckets of `t` its plan read.
    async fn answer(session: &QuiverSession, sql: &str) -> (String, u64) {
        let output = session.run(sql).await.unwrap();
        let text = pretty_format_batches(&output.batches).unwrap().to_string();
        (text, output.metrics.snapshot().buckets_done)
    }

    #[tokio::test]
    async fn a_summarising_cte_named_twice_is_read_once_with_the_same_answer() {
        let dir = tempfile::tempdir().unwrap();
        let session = session_over_t(dir.path()).await;
        // (query, whether its repeated CTE is computed once)
        let cases = [
            // q47's shape: an aggregate joined with itself, one reference filtered.
            (
                "WITH s AS (SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k) \
                 SELECT a.k, a.total, b.total FROM s a JOIN s b ON a.k = b.k + 1 \
                 WHERE a.n > 100 ORDER BY a.k",
                true,
            ),
            // A UNION of aggregates, read whole twice.
            (
                "WITH y AS (SELECT k, 'low' AS half, sum(v) AS total FROM t WHERE v < 500 \
                 GROUP BY k UNION ALL SELECT k, 'high', sum(v) FROM t WHERE v >= 500 GROUP BY k) \
                 SELECT l.half, h.half, sum(h.total - l.total) FROM y l, y h \
                 WHERE l.k = h.k GROUP BY 1, 2 ORDER BY 1, 2",
                true,
            ),
            // q04's: the same, each copy filtered to one branch, which is all it computes.
            (
                "WITH y AS (SELECT k, 'low' AS half, sum(v) AS total FROM t WHERE v < 500 \
                 GROUP BY k UNION ALL SELECT k, 'high', sum(v) FROM t WHERE v >= 500 GROUP BY k) \
                 SELECT l.k, h.total - l.total FROM y l, y h \
                 WHERE l.k = h.k AND l.half = 'low' AND h.half = 'high' ORDER BY 1",
                false,
            ),
            // q75's: a filter on a grouping key reaches each copy's scan.
            (
                "WITH s AS (SELECT k, sum(v) AS total FROM t GROUP BY k) \
                 SELECT a.total - b.total FROM s a, s b WHERE a.k = 1 AND b.k = 2",
                false,
            ),
            // q01's: named again inside a correlated subquery.
            (
                "WITH c AS (SELECT k, v % 3 AS m, sum(v) AS total FROM t GROUP BY k, v % 3) \
                 SELECT c1.k, c1.m FROM c c1 \
                 WHERE c1.total > (SELECT avg(total) FROM c c2 WHERE c1.k = c2.k) ORDER BY 1, 2",
                true,
            ),
            // TPC-H Q15's: one copy inside the other's filter, by a scalar subquery.
            (
                "WITH r (no, total) AS (SELECT k, sum(v) FROM t WHERE v < 900 GROUP BY k) \
                 SELECT no, total FROM r WHERE total = (SELECT max(total) FROM r)",
                true,
            ),
            // A CTE named twice by another CTE, itself named twice.
            (
                "WITH d AS (SELECT DISTINCT k FROM t), \
                 e AS (SELECT x.k FROM d x JOIN d y ON x.k = y.k + 1 GROUP BY x.k) \
                 SELECT count(*) FROM e a, e b WHERE a.k <= b.k",
                true,
            ),
            // q02's: each copy joined on its key with a filtered scan, which a dynamic
            // filter carries into the copy's scan as it runs.
            (
                "WITH s AS (SELECT k, sum(v) AS total FROM t GROUP BY k) \
                 SELECT a.total - b.total FROM s a JOIN t x ON a.k = x.k \
                 JOIN s b ON b.k = x.k WHERE x.v = 3",
                false,
            ),
            // q23's: the subquery sides of semi joins, which are built, not pruned.
            (
                "WITH s AS (SELECT k, sum(v) AS total FROM t GROUP BY k) \
                 SELECT count(*) FROM t WHERE v < 100 \
                 AND k IN (SELECT k FROM s WHERE total > 0) AND k + 1 IN (SELECT k FROM s)",
                true,
            ),
            // Rows as many as the table's: left inline.
            (
                "WITH w AS (SELECT k, v FROM t WHERE v % 2 = 0) \
                 SELECT count(*) FROM w a JOIN w b ON a.v = b.v",
                false,
            ),
            // Named once: nothing to share.
            (
                "WITH s AS (SELECT k, sum(v) AS total FROM t GROUP BY k) \
                 SELECT max(total) FROM s",
                false,
            ),
        ];
        for (sql, shared) in cases {
            session
                .run("SET quiver.materialize_ctes = true")
                .await
                .unwrap();
            let (once, read_once) = answer(&session, sql).await;
            session
                .run("SET quiver.materialize_ctes = false")
                .await
                .unwrap();
            let (inline, read_inline) = answer(&session, sql).await;
            assert_eq!(once, inline, "{sql}");
            assert!(read_once > 0, "{sql}");
            match shared {
                true => assert!(read_once < read_inline, "{sql}: {read_once} {read_inline}"),
                false => assert_eq!(read_once, read_inline, "{sql}"),
            }
        }
    }

    #[tokio::test]
    async fn explain_shows_a_repeated_cte_inline() {
        let dir = tempfile::tempdir().unwrap();
        let session = session_over_t(dir.path()).await;
        let sql = "EXPLAIN WITH s AS (SELECT k, sum(v) AS total FROM t GROUP BY k) \
                   SELECT count(*) FROM s a JOIN s b ON a.k = b.k";
        let (plan, _) = answer(&session, sql).await;
        assert_eq!(
            plan.matches("Aggregate: groupBy=[[t.k]]").count(),
            2,
            "{plan}"
        );
    }

    #[tokio::test]
    async fn rows_the_memory_pool_refuses_are_not_kept() {
        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int64Array::from_iter_values(0..1000)) as _,
        )])
        .unwrap();
        let rows = |batch: &RecordBatch| -> SendableRecordBatchStream {
            let stream = MemoryStream::try_new(vec![batch.clone()], batch.schema(), None);
            Box::pin(stream.unwrap())
        };
        let small: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(4000));
        assert!(super::kept(rows(&batch), small).await.unwrap().is_none());
        let large: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let (kept, reservation) = super::kept(rows(&batch), Arc::clone(&large))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(reservation.size(), 8000);
        assert_eq!(large.reserved(), 8000);
        drop(reservation);
        assert_eq!(large.reserved(), 0);
    }
}
