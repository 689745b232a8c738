//! `^` (power, see `operators`) binds tighter than `*`, `/`, `+` and `-` in DuckDB: `x^2 / n`
//! is `(x^2) / n`. DataFusion's generic dialect parses `^` as XOR, below them, giving
//! `x ^ (2 / n)`. The parentheses the SQL wrote stay in the tree (`Expr::Nested`), so a chain
//! of bare arithmetic around a `^` is still the operands and operators in the order written:
//! it is read off in that order and grouped again by DuckDB's precedence.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Value, VisitMut, VisitorMut};

/// Groups every arithmetic chain of `statement` that holds a `^` as DuckDB's precedence says.
pub fn power_binds_tightest<V: VisitMut>(statement: &mut V) {
    struct Fix;
    impl VisitorMut for Fix {
        type Break = ();
        // Innermost chains first; grouping keeps the order, so an outer chain reads the same
        // operands and operators through them.
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if matches!(expr, Expr::BinaryOp { op, .. } if rank(op).is_some()) {
                let (mut operands, mut operators) = (vec![], vec![]);
                let taken = std::mem::replace(expr, Expr::value(Value::Null));
                flatten(taken, &mut operands, &mut operators);
                *expr = grouped(operands, operators);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Fix);
}

/// DuckDB's precedence of the arithmetic operators, `^` highest; `None` for the others.
fn rank(op: &BinaryOperator) -> Option<u8> {
    use BinaryOperator::*;
    match op {
        BitwiseXor => Some(3),
        Multiply | Divide | Modulo | DuckIntegerDivide | MyIntegerDivide => Some(2),
        Plus | Minus => Some(1),
        _ => None,
    }
}

/// The operands and operators of a chain of bare arithmetic, in the order written.
fn flatten(expr: Expr, operands: &mut Vec<Expr>, operators: &mut Vec<BinaryOperator>) {
    match expr {
        Expr::BinaryOp { left, op, right } if rank(&op).is_some() => {
            flatten(*left, operands, operators);
            operators.push(op);
            flatten(*right, operands, operators);
        }
        other => operands.push(other),
    }
}

/// The chain grouped by precedence, each level from the left (operator precedence parsing).
/// A chain without `^` parses the same either way and comes out as it went in.
fn grouped(operands: Vec<Expr>, operators: Vec<BinaryOperator>) -> Expr {
    fn reduce(out: &mut Vec<Expr>, op: BinaryOperator) {
        let right = out.pop().expect("an operand per operator");
        let left = out.pop().expect("an operand per operator");
        out.push(Expr::BinaryOp {
            left: Box::new(left),
            op,
            right: Box::new(right),
        });
    }
    let mut operands = operands.into_iter();
    let mut out: Vec<Expr> = operands.next().into_iter().collect();
    let mut pending: Vec<BinaryOperator> = vec![];
    for op in operators {
        while pending.last().is_some_and(|top| rank(top) >= rank(&op)) {
            reduce(&mut out, pending.pop().expect("checked"));
        }
        pending.push(op);
        out.extend(operands.next());
    }
    while let Some(op) = pending.pop() {
        reduce(&mut out, op);
    }
    out.pop().expect("a chain has an operand")
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn parsed(sql: &str) -> Statement {
        Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0)
    }

    /// The tree of `sql` with the parentheses it was written with taken out: the grouping
    /// stays in the tree's shape.
    fn grouped(sql: &str) -> Statement {
        struct Unnest;
        impl VisitorMut for Unnest {
            type Break = ();
            fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
                if let Expr::Nested(inner) = expr {
                    *expr = (**inner).clone();
                }
                ControlFlow::Continue(())
            }
        }
        let mut statement = parsed(sql);
        let _ = statement.visit(&mut Unnest);
        statement
    }

    #[test]
    fn power_binds_tighter_than_arithmetic_unless_parenthesised() {
        for (sql, intended) in [
            (
                "SELECT SUM(x) ^ 2 / COUNT(x)",
                "SELECT (SUM(x) ^ 2) / COUNT(x)",
            ),
            ("SELECT a * b ^ c / d", "SELECT (a * (b ^ c)) / d"),
            ("SELECT a + b ^ 2 - 1", "SELECT (a + (b ^ 2)) - 1"),
            (
                "SELECT SUM(x ^ 2) - SUM(x) ^ 2 / COUNT(x)",
                "SELECT SUM(x ^ 2) - ((SUM(x) ^ 2) / COUNT(x))",
            ),
        ] {
            let mut statement = parsed(sql);
            assert_ne!(
                statement,
                grouped(intended),
                "{sql} parses as intended already"
            );
            power_binds_tightest(&mut statement);
            assert_eq!(statement, grouped(intended), "{sql}");
        }
        // Parentheses written are kept.
        let mut statement = parsed("SELECT x ^ (2 / n)");
        power_binds_tightest(&mut statement);
        assert_eq!(statement, parsed("SELECT x ^ (2 / n)"));
    }
}
