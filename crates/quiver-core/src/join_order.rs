//! Plain dimensions join last. DataFusion joins comma-listed tables in the order the query
//! lists them, so `FROM customer, store_sales, date_dim WHERE ... AND d_year = 2001`
//! (TPC-DS's `year_total` of q04, q11 and q74) probes every store_sales row against
//! customer, taking each row's seven customer strings along, and only then drops the four
//! fifths of the rows outside 2001. Joined after the date, customer is probed by the fifth
//! that is left.
//!
//! The rule moves only a table read whole (no filter) that hangs off the rest by one
//! relation, which itself joins others (a hub: the fact table), and that comes before a
//! relation with a filter. In a star schema that is a dimension looked up by its key,
//! which keeps the hub's rows as they are, so it can go last and the filtered relations,
//! which drop rows, first. Everything else keeps its order, and the plan keeps its columns
//! in theirs (a projection on top). Explicit `JOIN ... ON` chains are inner joins too:
//! TPC-DS q72's warehouse and item now join after its filtered demographics and dates.
//! `SET quiver.plain_dimensions_last = false` keeps the order as listed.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, NullEquality, Result, ScalarValue};
use datafusion::logical_expr::{Expr, Join, JoinConstraint, JoinType, LogicalPlan, Projection};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::options::QuiverOptions;

/// The rule, after DataFusion's own (its filters pushed down, its cross joins made inner).
#[derive(Debug, Default)]
pub struct PlainDimensionsLast;

impl OptimizerRule for PlainDimensionsLast {
    fn name(&self) -> &str {
        "quiver_plain_dimensions_last"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !QuiverOptions::of(&config.options()).plain_dimensions_last {
            return Ok(Transformed::no(plan));
        }
        reordered(plan)
    }
}

/// `plan` with every tree of inner joins in it reordered where `Graph::plain_last` says.
fn reordered(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    if !is_inner_equi_join(&plan) {
        return plan
            .map_subqueries(reordered)?
            .transform_data(|plan| plan.map_children(reordered));
    }
    let mut leaves = Vec::new();
    let mut pairs = Vec::new();
    flatten(&plan, &mut leaves, &mut pairs);
    let graph = Graph::new(&leaves, &pairs);
    let Some((graph, order)) = graph.and_then(|g| g.plain_last().map(|order| (g, order))) else {
        return with_leaves_reordered(plan);
    };
    let leaves = leaves
        .into_iter()
        .map(|leaf| Ok(reordered(leaf)?.data))
        .collect::<Result<Vec<_>>>()?;
    Ok(match joined(&leaves, &pairs, &graph, &order, &plan)? {
        Some(rebuilt) => Transformed::yes(rebuilt),
        None => with_leaves_reordered(plan)?,
    })
}

/// A tree of inner joins as it stands, the trees inside its relations reordered.
fn with_leaves_reordered(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    if in_join_tree(&plan) {
        plan.map_children(with_leaves_reordered)
    } else {
        reordered(plan)
    }
}

/// An inner join on equalities alone, nulls never equal: one that commutes with others.
fn is_inner_equi_join(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Join(join) if join.join_type == JoinType::Inner
        && join.filter.is_none()
        && !join.on.is_empty()
        && join.null_equality == NullEquality::NullEqualsNothing
        && !join.null_aware)
}

/// Such a join, or a projection that drops columns between two of them (DataFusion puts
/// one wherever a join's key is not needed above it).
fn in_join_tree(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Projection(projection) => {
            only_columns(projection) && in_join_tree(&projection.input)
        }
        _ => is_inner_equi_join(plan),
    }
}

/// The relations under a tree of such joins, left to right, and all their equalities.
/// The projections between the joins go: the tree is rebuilt with every column, and
/// DataFusion drops again those that no join above needs.
fn flatten(plan: &LogicalPlan, leaves: &mut Vec<LogicalPlan>, pairs: &mut Vec<(Expr, Expr)>) {
    match plan {
        LogicalPlan::Join(join) if is_inner_equi_join(plan) => {
            flatten(&join.left, leaves, pairs);
            flatten(&join.right, leaves, pairs);
            pairs.extend(join.on.iter().cloned());
        }
        LogicalPlan::Projection(projection) if in_join_tree(plan) => {
            flatten(&projection.input, leaves, pairs)
        }
        _ => leaves.push(plan.clone()),
    }
}

/// The relations of a tree of joins and the equalities between them.
struct Graph {
    /// For each equality, the relations of its two sides (each side names one relation).
    ends: Vec<(usize, usize)>,
    plain: Vec<bool>,
    filtered: Vec<bool>,
}

impl Graph {
    /// None where a side names columns of no relation or of two.
    fn new(leaves: &[LogicalPlan], pairs: &[(Expr, Expr)]) -> Option<Self> {
        let owner = |expr: &Expr| -> Option<usize> {
            let columns = expr.column_refs();
            let mut found = None;
            for column in columns {
                let mut holders =
                    (0..leaves.len()).filter(|&i| leaves[i].schema().has_column(column));
                let at = holders.next()?;
                if holders.next().is_some() {
                    return None;
                }
                if found.is_some_and(|f| f != at) {
                    return None;
                }
                found = Some(at);
            }
            found
        };
        let ends = pairs
            .iter()
            .map(|(a, b)| Some((owner(a)?, owner(b)?)))
            .collect::<Option<Vec<_>>>()?;
        if ends.iter().any(|(a, b)| a == b) {
            return None;
        }
        Some(Self {
            ends,
            plain: leaves.iter().map(is_plain).collect(),
            filtered: leaves.iter().map(has_filter).collect(),
        })
    }

    fn neighbours(&self, leaf: usize) -> HashSet<usize> {
        self.ends
            .iter()
            .filter_map(|&(a, b)| match (a == leaf, b == leaf) {
                (true, _) => Some(b),
                (_, true) => Some(a),
                _ => None,
            })
            .collect()
    }

    /// The new order, if a plain dimension stands before a filtered relation and the
    /// relations stay connected with it moved last.
    fn plain_last(&self) -> Option<Vec<usize>> {
        let count = self.plain.len();
        let last_filtered = (0..count).rev().find(|&i| self.filtered[i])?;
        let moved: Vec<usize> = (0..last_filtered)
            .filter(|&i| {
                let around = self.neighbours(i);
                self.plain[i]
                    && around.len() == 1
                    && around.iter().all(|&hub| self.neighbours(hub).len() >= 2)
            })
            .collect();
        if moved.is_empty() {
            return None;
        }
        let order: Vec<usize> = (0..count)
            .filter(|i| !moved.contains(i))
            .chain(moved.iter().copied())
            .collect();
        let connected = (1..count).all(|step| {
            let before = &order[..step];
            self.neighbours(order[step])
                .iter()
                .any(|n| before.contains(n))
        });
        connected.then_some(order)
    }
}

/// A projection that only keeps or drops columns.
fn only_columns(projection: &Projection) -> bool {
    projection.expr.iter().all(|e| matches!(e, Expr::Column(_)))
}

/// A table read whole: a scan with no filter and no limit, maybe renamed or projected.
fn is_plain(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => is_plain(&alias.input),
        LogicalPlan::Projection(projection) => {
            only_columns(projection) && is_plain(&projection.input)
        }
        LogicalPlan::TableScan(scan) => !drops_rows(&scan.filters) && scan.fetch.is_none(),
        _ => false,
    }
}

/// Whether rows are dropped somewhere in `plan` by a filter.
fn has_filter(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        Ok(match node {
            LogicalPlan::Filter(filter) => drops_rows(std::slice::from_ref(&filter.predicate)),
            LogicalPlan::TableScan(scan) => drops_rows(&scan.filters),
            _ => false,
        })
    })
    .unwrap_or(false)
}

/// Whether `filters` hold more than `true` (what a union's branch filter, `sale_type =
/// 's'` in TPC-DS's year_total, leaves on the branch it selects).
fn drops_rows(filters: &[Expr]) -> bool {
    filters
        .iter()
        .any(|f| !matches!(f, Expr::Literal(ScalarValue::Boolean(Some(true)), _)))
}

/// The relations joined left-deep in `order`, each with all its equalities to those before
/// it, and projected to `original`'s columns in their order; None if a column of
/// `original` has no table name to tell it apart.
fn joined(
    leaves: &[LogicalPlan],
    pairs: &[(Expr, Expr)],
    graph: &Graph,
    order: &[usize],
    original: &LogicalPlan,
) -> Result<Option<LogicalPlan>> {
    if original
        .schema()
        .iter()
        .any(|(qualifier, _)| qualifier.is_none())
    {
        return Ok(None);
    }
    let mut plan = leaves[order[0]].clone();
    for step in 1..order.len() {
        let (before, next) = (&order[..step], order[step]);
        let on = pairs
            .iter()
            .zip(&graph.ends)
            .filter_map(|((a, b), &(of_a, of_b))| {
                if of_b == next && before.contains(&of_a) {
                    Some((a.clone(), b.clone()))
                } else if of_a == next && before.contains(&of_b) {
                    Some((b.clone(), a.clone()))
                } else {
                    None
                }
            })
            .collect();
        plan = LogicalPlan::Join(Join::try_new(
            Arc::new(plan),
            Arc::new(leaves[next].clone()),
            on,
            None,
            JoinType::Inner,
            JoinConstraint::On,
            NullEquality::NullEqualsNothing,
            false,
        )?);
    }
    let columns = original
        .schema()
        .iter()
        .map(|(qualifier, field)| Expr::Column(Column::new(qualifier.cloned(), field.name())))
        .collect();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        columns,
        Arc::new(plan),
    )?)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::catalog::MemTable;
    use datafusion::prelude::SessionContext;

    use super::PlainDimensionsLast;

    /// customer (plain), sales (the hub) and dates (filtered), as TPC-DS's year_total.
    fn context(with_rule: bool) -> SessionContext {
        let context = SessionContext::new();
        if with_rule {
            context.add_optimizer_rule(Arc::new(PlainDimensionsLast));
        }
        let table = |columns: &[(&str, Vec<i64>)]| {
            let schema = Arc::new(Schema::new(
                columns
                    .iter()
                    .map(|(name, _)| Field::new(*name, DataType::Int64, true))
                    .collect::<Vec<_>>(),
            ));
            let arrays = columns
                .iter()
                .map(|(_, values)| Arc::new(Int64Array::from(values.clone())) as _)
                .collect();
            let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).unwrap();
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap())
        };
        let tables = [
            (
                "customer",
                table(&[("c_sk", vec![1, 2, 3]), ("c_age", vec![30, 40, 50])]),
            ),
            (
                "sales",
                table(&[
                    ("s_customer", vec![1, 2, 3, 1, 2, 3]),
                    ("s_date", vec![10, 10, 11, 11, 12, 12]),
                    ("s_amount", vec![1, 2, 3, 4, 5, 6]),
                ]),
            ),
            (
                "dates",
                table(&[
                    ("d_sk", vec![10, 11, 12]),
                    ("d_year", vec![2000, 2001, 2001]),
                ]),
            ),
        ];
        for (name, table) in tables {
            context.register_table(name, table).unwrap();
        }
        context
    }

    async fn plan_and_answer(with_rule: bool, sql: &str) -> (String, String) {
        let frame = context(with_rule).sql(sql).await.unwrap();
        let plan = frame.clone().into_optimized_plan().unwrap();
        let answer = pretty_format_batches(&frame.collect().await.unwrap()).unwrap();
        let plan = plan.display_indent().to_string();
        (plan, answer.to_string())
    }

    /// The tables in the order the plan scans them.
    fn scans(plan: &str) -> Vec<&str> {
        plan.lines()
            .filter_map(|line| line.trim().strip_prefix("TableScan: "))
            .map(|rest| rest.split([' ', ',']).next().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_plain_dimension_listed_before_a_filtered_one_is_joined_last() {
        let sql = "SELECT c_age, sum(s_amount) AS total FROM customer, sales, dates \
                   WHERE c_sk = s_customer AND s_date = d_sk AND d_year = 2001 \
                   GROUP BY c_age ORDER BY c_age";
        let (before, answer_before) = plan_and_answer(false, sql).await;
        let (after, answer_after) = plan_and_answer(true, sql).await;
        assert_eq!(scans(&before), ["customer", "sales", "dates"]);
        assert_eq!(scans(&after), ["sales", "dates", "customer"]);
        assert_eq!(answer_after, answer_before);
        assert!(answer_after.contains("| 30    | 4     |"), "{answer_after}");
    }

    #[tokio::test]
    async fn joins_stay_as_listed_where_no_plain_dimension_stands_early() {
        for sql in [
            // The filtered relation comes first already.
            "SELECT c_age FROM dates, sales, customer \
             WHERE c_sk = s_customer AND s_date = d_sk AND d_year = 2001",
            // Nothing is filtered.
            "SELECT c_age FROM customer, sales, dates WHERE c_sk = s_customer AND s_date = d_sk",
            // customer is filtered too.
            "SELECT c_age FROM customer, sales, dates \
             WHERE c_sk = s_customer AND s_date = d_sk AND d_year = 2001 AND c_age > 35",
        ] {
            let (before, _) = plan_and_answer(false, sql).await;
            let (after, _) = plan_and_answer(true, sql).await;
            assert_eq!(scans(&after), scans(&before), "{sql}");
        }
    }
}
