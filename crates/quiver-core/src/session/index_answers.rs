//! `count(*)`, `min` and `max` of a whole table, answered from its persistent index with no
//! request to a data file. An aggregate without GROUP BY whose every function is one of
//! those, over a scan without filters of a table whose index describes every listed file as
//! it is, becomes one row of literals. Anything else is left alone.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Aggregate, EmptyRelation, Expr, LogicalPlan, Projection};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::table::{as_quiver_table, QuiverTable};

#[derive(Debug, Default)]
pub struct IndexAnswersRule;

impl OptimizerRule for IndexAnswersRule {
    fn name(&self) -> &str {
        "quiver_index_answers"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        plan.transform_down(|node| {
            let LogicalPlan::Aggregate(aggregate) = &node else {
                return Ok(Transformed::no(node));
            };
            match answer(aggregate)? {
                Some(answered) => Ok(Transformed::yes(answered)),
                None => Ok(Transformed::no(node)),
            }
        })
    }
}

fn answer(aggregate: &Aggregate) -> Result<Option<LogicalPlan>> {
    if !aggregate.group_expr.is_empty() {
        return Ok(None);
    }
    let Some(provider) = unfiltered_table(&aggregate.input) else {
        return Ok(None);
    };
    let Some(table) = as_quiver_table(provider.as_ref()) else {
        return Ok(None);
    };
    let mut values = vec![];
    for (expr, field) in aggregate.aggr_expr.iter().zip(aggregate.schema.fields()) {
        let Some(value) = value_of(unalias(expr), table) else {
            return Ok(None);
        };
        // A column read as another type (`schema => …`) that the value does not cast to is
        // left to the files.
        let Ok(value) = value.cast_to(field.data_type()) else {
            return Ok(None);
        };
        values.push(Expr::Literal(value, None).alias(field.name()));
    }
    let one_row = LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: true,
        schema: Arc::new(datafusion::common::DFSchema::empty()),
    });
    let projection = Projection::try_new(values, Arc::new(one_row))?;
    // The aggregate's own schema (its qualifiers), so the plan above still finds its columns.
    Ok(Some(LogicalPlan::Projection(
        Projection::try_new_with_schema(
            projection.expr,
            projection.input,
            Arc::clone(&aggregate.schema),
        )?,
    )))
}

fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// The answer of one aggregate function from the index, if it has one.
fn value_of(expr: &Expr, table: &QuiverTable) -> Option<ScalarValue> {
    let Expr::AggregateFunction(function) = expr else {
        return None;
    };
    let params = &function.params;
    if params.distinct || params.filter.is_some() || !params.order_by.is_empty() {
        return None;
    }
    match (function.func.name(), params.args.as_slice()) {
        // count(*) is count(1) once planned
        ("count", [Expr::Literal(value, _)]) if !value.is_null() => table
            .rows_from_index()
            .map(|rows| ScalarValue::Int64(Some(rows))),
        ("count", []) => table
            .rows_from_index()
            .map(|rows| ScalarValue::Int64(Some(rows))),
        (name @ ("min" | "max"), [Expr::Column(column)]) => {
            let (min, max) = table.min_max_from_index(&column.name)?;
            Some(if name == "min" { min } else { max })
        }
        _ => None,
    }
}

/// The table an aggregate reads through nothing but renames, if its scan has no filter.
fn unfiltered_table(plan: &LogicalPlan) -> Option<Arc<dyn TableProvider>> {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => unfiltered_table(&alias.input),
        LogicalPlan::TableScan(scan) if scan.filters.is_empty() && scan.fetch.is_none() => {
            source_as_provider(&scan.source).ok()
        }
        _ => None,
    }
}
