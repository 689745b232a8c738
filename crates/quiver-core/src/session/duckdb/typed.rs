//! DuckDB's meaning where it depends on the arguments' types, as an analyzer rule that runs
//! before DataFusion's type coercion (so it sees the SQL's own casts and arguments, not what
//! coercion makes of them):
//!
//! - a number cast to an integer rounds: `CAST(3.7 AS INTEGER)` is 4, where Arrow's cast
//!   truncates to 3; a DOUBLE's halves go to even (`CAST(2.5::DOUBLE AS INT)` is 2), a
//!   DECIMAL's away from zero (`CAST(2.5 AS INT)` is 3);
//! - `length(list)` (and `len`) counts its elements, where DataFusion measures the list's text;
//! - `concat` of lists is a list, where DataFusion makes a string of them;
//! - `avg` of a DECIMAL is a DOUBLE (also over a window), where DataFusion's is a truncated
//!   DECIMAL.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::functions::math::expr_fn::{abs, round, trunc};
use datafusion::functions_nested::expr_fn::{array_concat, array_length};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    cast, lit, when, Expr, ExprSchemable, LogicalPlan, WindowFunctionDefinition,
};
use datafusion::optimizer::AnalyzerRule;

use super::decimal_avg;

#[derive(Debug)]
pub struct DuckDbTypedMeanings;

impl AnalyzerRule for DuckDbTypedMeanings {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let schema = merge_schema(&plan.inputs());
            plan.map_expressions(|expr| {
                expr.transform_up(|e| match e {
                    Expr::ScalarFunction(_) => of_lists(e, &schema),
                    Expr::AggregateFunction(_) | Expr::WindowFunction(_) => {
                        average_as_double(e, &schema)
                    }
                    e => rounded(e, &schema),
                })
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "duckdb_typed_meanings"
    }
}

/// `avg` of a DECIMAL as a DOUBLE, as DuckDB's is, in a GROUP BY and over a window alike:
/// DataFusion's keeps a decimal of four more digits, truncated (`avg` of 1.5, 2.0 and 3.5 is
/// 2.33333, not 2.333333333333333). The exact sum divided at the end where it fits 128
/// bits, else the average of DOUBLEs.
fn average_as_double(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (func, args, distinct) = match &expr {
        Expr::AggregateFunction(call) => (&call.func, &call.params.args, call.params.distinct),
        Expr::WindowFunction(window) => match &window.fun {
            WindowFunctionDefinition::AggregateUDF(func) => {
                (func, &window.params.args, window.params.distinct)
            }
            WindowFunctionDefinition::WindowUDF(_) => return Ok(Transformed::no(expr)),
        },
        _ => return Ok(Transformed::no(expr)),
    };
    if func.name() != "avg" || args.len() != 1 || !typed_as(&args[0], schema, DataType::is_decimal)
    {
        return Ok(Transformed::no(expr));
    }
    let exact = !distinct && typed_as(&args[0], schema, decimal_avg::averages);
    let (func, args) = if exact {
        (Arc::new(decimal_avg::udaf()), args.clone())
    } else {
        (
            Arc::clone(func),
            vec![cast(args[0].clone(), DataType::Float64)],
        )
    };
    Ok(Transformed::yes(match expr {
        Expr::AggregateFunction(mut call) => {
            (call.func, call.params.args) = (func, args);
            Expr::AggregateFunction(call)
        }
        Expr::WindowFunction(mut window) => {
            (window.fun, window.params.args) = (WindowFunctionDefinition::AggregateUDF(func), args);
            Expr::WindowFunction(window)
        }
        _ => unreachable!("matched above"),
    }))
}

/// Whether `expr`'s type, when it can be told, is of the `kind` asked.
fn typed_as(expr: &Expr, schema: &DFSchema, kind: fn(&DataType) -> bool) -> bool {
    expr.get_type(schema).is_ok_and(|t| kind(&t))
}

/// `length` and `concat` over lists, as list functions.
fn of_lists(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::ScalarFunction(call) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let is_list = |e: &Expr| typed_as(e, schema, DataType::is_list);
    let is_null = |e: &Expr| typed_as(e, schema, DataType::is_null);
    let args = &call.args;
    let rewritten = match call.func.name() {
        "character_length" if args.len() == 1 && is_list(&args[0]) => {
            cast(array_length(args[0].clone()), DataType::Int64)
        }
        // DuckDB skips NULL arguments, as `concat` of strings does.
        "concat" if args.iter().any(is_list) && args.iter().all(|a| is_list(a) || is_null(a)) => {
            array_concat(args.iter().filter(|a| is_list(a)).cloned().collect())
        }
        _ => return Ok(Transformed::no(expr)),
    };
    Ok(Transformed::yes(rewritten))
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
        Ok(t) if t.is_floating() => {
            let x = inner.clone();
            let is_half = abs(x.clone() - trunc(vec![x.clone()])).eq(lit(0.5));
            when(is_half, lit(2.0) * round(vec![x.clone() / lit(2.0)])).otherwise(round(vec![x]))?
        }
        Ok(t) if t.is_decimal() => round(vec![inner.clone()]),
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
