//! DuckDB's arithmetic where DataFusion's differs, planned from the SQL operator itself so
//! that every face (and every plan that travels to a worker) computes the same:
//!
//! - `/` divides exactly-stored numbers (integers, decimals) as DOUBLE: `7 / 2` is 3.5 and
//!   `1 / 3` 0.333…, where DataFusion gives 3 and 0;
//! - `//` is integer division (`7 // 2` is 3), which DataFusion parses but cannot run;
//! - `^` is power (`2 ^ 3` is 8); DataFusion's generic dialect reads it as XOR, which
//!   DuckDB spells `xor(a, b)`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{binary_expr, cast, Expr, ExprSchemable, Operator};
use datafusion::sql::sqlparser::ast::BinaryOperator;

#[derive(Debug)]
pub struct DuckDbOperators;

impl ExprPlanner for DuckDbOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let RawBinaryExpr { op, left, right } = expr;
        let planned = match op {
            BinaryOperator::Divide if exact_numbers(&left, &right, schema) => binary_expr(
                cast(left, DataType::Float64),
                Operator::Divide,
                cast(right, DataType::Float64),
            ),
            // On integers DataFusion's `/` truncates towards zero, as DuckDB's `//` does;
            // on other numbers DuckDB's `//` divides as `/`.
            BinaryOperator::DuckIntegerDivide | BinaryOperator::MyIntegerDivide => {
                binary_expr(left, Operator::Divide, right)
            }
            BinaryOperator::BitwiseXor => Expr::ScalarFunction(ScalarFunction::new_udf(
                datafusion::functions::math::power(),
                vec![left, right],
            )),
            op => return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right })),
        };
        Ok(PlannerResult::Planned(planned))
    }
}

/// Whether both sides are integers, decimals or NULL (and not both NULL). A side whose type
/// cannot be told is left to DataFusion's own planning and errors.
fn exact_numbers(left: &Expr, right: &Expr, schema: &DFSchema) -> bool {
    let (Ok(left), Ok(right)) = (left.get_type(schema), right.get_type(schema)) else {
        return false;
    };
    let exact = |t: &DataType| t.is_integer() || t.is_decimal() || t.is_null();
    exact(&left) && exact(&right) && !(left.is_null() && right.is_null())
}
