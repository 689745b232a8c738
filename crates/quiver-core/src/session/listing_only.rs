//! Listing-only queries read no file. When an aggregate that ignores duplicate rows
//! (`SELECT DISTINCT _file`, `min(_size)`, `count(DISTINCT _path)`) sits over a scan that
//! needs only listing columns, one row per file gives the same answer as one row per
//! Parquet row, so the scan is switched to answer from the listing.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::Result;
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::table::as_quiver_table;

#[derive(Debug, Default)]
pub struct ListingOnlyRule;

impl OptimizerRule for ListingOnlyRule {
    fn name(&self) -> &str {
        "quiver_listing_only"
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
            if !aggregate.aggr_expr.iter().all(ignores_duplicates) {
                return Ok(Transformed::no(node));
            }
            match listing_only_input(&aggregate.input)? {
                Some(input) => {
                    let rewritten = Aggregate::try_new(
                        Arc::new(input),
                        aggregate.group_expr.clone(),
                        aggregate.aggr_expr.clone(),
                    )?;
                    Ok(Transformed::yes(LogicalPlan::Aggregate(rewritten)))
                }
                None => Ok(Transformed::no(node)),
            }
        })
    }
}

/// Whether every table in `plan` that was made from its listing alone is read in
/// listing-only mode (so the plan runs without the files' schema).
pub fn answers_from_listing(plan: &LogicalPlan) -> bool {
    let mut ok = true;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if let Ok(provider) = source_as_provider(&scan.source) {
                if let Some(table) = as_quiver_table(provider.as_ref()) {
                    ok &= !table.is_deferred() || table.is_listing_only();
                }
            }
        }
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    ok
}

fn ignores_duplicates(expr: &Expr) -> bool {
    match expr {
        Expr::Alias(alias) => ignores_duplicates(&alias.expr),
        Expr::AggregateFunction(function) => {
            function.params.distinct
                || matches!(function.func.name(), "min" | "max" | "bool_and" | "bool_or")
        }
        _ => false,
    }
}

/// The same input reading the listing only, if every column it needs comes from there.
fn listing_only_input(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    match plan {
        LogicalPlan::Projection(_) | LogicalPlan::Filter(_) | LogicalPlan::SubqueryAlias(_) => {
            let Some(input) = listing_only_input(plan.inputs()[0])? else {
                return Ok(None);
            };
            Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
        }
        LogicalPlan::TableScan(scan) => {
            let Ok(provider) = source_as_provider(&scan.source) else {
                return Ok(None);
            };
            let Some(table) = as_quiver_table(provider.as_ref()) else {
                return Ok(None);
            };
            let schema = scan.source.schema();
            let columns: Vec<&str> = match &scan.projection {
                Some(indices) => indices
                    .iter()
                    .map(|&i| schema.field(i).name().as_str())
                    .collect(),
                None => return Ok(None),
            };
            let filters_ok = scan.filters.iter().all(|f| {
                f.column_refs()
                    .iter()
                    .all(|c| table.is_listing_column(&c.name))
            });
            if columns.is_empty()
                || !filters_ok
                || !columns.iter().all(|c| table.is_listing_column(c))
            {
                return Ok(None);
            }
            let mut listing = scan.clone();
            listing.source = provider_as_source(Arc::new(table.listing_only()));
            Ok(Some(LogicalPlan::TableScan(listing)))
        }
        _ => Ok(None),
    }
}
