//! DuckDB rounds a number cast to an integer: `CAST(3.7 AS INTEGER)` is 4, where Arrow's
//! cast truncates to 3. A DOUBLE's halves go to even (`CAST(2.5::DOUBLE AS INT)` is 2), a
//! DECIMAL's away from zero (`CAST(2.5 AS INT)` is 3), as in DuckDB. The rule runs before
//! DataFusion's type coercion, so it sees the casts the SQL wrote, not the ones coercion adds.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::functions::math::expr_fn::{abs, round, trunc};
use datafusion::logical_expr::{lit, when, Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

#[derive(Debug)]
pub struct RoundingCasts;

impl AnalyzerRule for RoundingCasts {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let schema = merge_schema(&plan.inputs());
            plan.map_expressions(|expr| expr.transform_up(|e| rounded(e, &schema)))
        })
        .data()
    }

    fn name(&self) -> &str {
        "duckdb_rounding_casts"
    }
}

fn rounded(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (inner, to) = match &expr {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            (expr.as_ref(), field.data_type())
        }
        _ => return Ok(Transformed::no(expr)),
    };
    if !to.is_integer() {
        return Ok(Transformed::no(expr));
    }
    let rounded = match inner.get_type(schema) {
        Ok(DataType::Float16 | DataType::Float32 | DataType::Float64) => {
            let x = inner.clone();
            let is_half = abs(x.clone() - trunc(vec![x.clone()])).eq(lit(0.5));
            when(is_half, lit(2.0) * round(vec![x.clone() / lit(2.0)])).otherwise(round(vec![x]))?
        }
        Ok(
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..),
        ) => round(vec![inner.clone()]),
        _ => return Ok(Transformed::no(expr)),
    };
    let recast = match expr {
        Expr::Cast(cast) => Expr::Cast(Cast::new_from_field(Box::new(rounded), cast.field)),
        Expr::TryCast(cast) => {
            Expr::TryCast(TryCast::new_from_field(Box::new(rounded), cast.field))
        }
        _ => unreachable!("matched above"),
    };
    Ok(Transformed::yes(recast))
}
