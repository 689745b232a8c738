//! DuckDB's clauses that DataFusion reads otherwise: `SEMI JOIN` and `ANTI JOIN` are
//! DataFusion's `LEFT SEMI` and `LEFT ANTI` joins (which it plans, where the bare forms are
//! "not implemented"), and `ORDER BY ALL` orders by every select item in turn (DataFusion
//! looks for a column named `all`). A select list with `*` keeps `ORDER BY ALL` as written:
//! its items are known only once the tables are.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Join, JoinConstraint, JoinOperator, OrderByExpr, OrderByKind, Query, SelectItem, SetExpr,
    Value, VisitMut, VisitorMut,
};

/// Rewrites `statement`'s SEMI and ANTI joins and its `ORDER BY ALL` (see the module's
/// comment).
pub fn duckdb_clauses<V: VisitMut>(statement: &mut V) {
    struct Clauses;
    impl VisitorMut for Clauses {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            order_by_all(query);
            if let SetExpr::Select(select) = query.body.as_mut() {
                for table in &mut select.from {
                    table.joins.iter_mut().for_each(left_join);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Clauses);
}

fn left_join(join: &mut Join) {
    let operator = &mut join.join_operator;
    *operator = match std::mem::replace(operator, JoinOperator::CrossJoin(JoinConstraint::None)) {
        JoinOperator::Semi(constraint) => JoinOperator::LeftSemi(constraint),
        JoinOperator::Anti(constraint) => JoinOperator::LeftAnti(constraint),
        other => other,
    };
}

/// `ORDER BY ALL [ASC|DESC]` as `ORDER BY 1, 2, …` with the same direction, where the
/// select list is written out.
fn order_by_all(query: &mut Query) {
    let Some(order_by) = query.order_by.as_mut() else {
        return;
    };
    let OrderByKind::Expressions(items) = &order_by.kind else {
        return;
    };
    let [OrderByExpr {
        expr: Expr::Identifier(word),
        options,
        ..
    }] = items.as_slice()
    else {
        return;
    };
    if word.quote_style.is_some() || !word.value.eq_ignore_ascii_case("all") {
        return;
    }
    let Some(count) = select_items(&query.body) else {
        return;
    };
    let options = *options;
    order_by.kind = OrderByKind::Expressions(
        (1..=count)
            .map(|position| OrderByExpr {
                expr: Expr::value(Value::Number(position.to_string(), false)),
                options,
                with_fill: None,
            })
            .collect(),
    );
}

/// How many items a query's select list has, if none is a `*`.
fn select_items(body: &SetExpr) -> Option<usize> {
    match body {
        SetExpr::Select(select) => {
            let starred = select.projection.iter().any(|item| {
                matches!(
                    item,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            });
            (!starred).then_some(select.projection.len())
        }
        SetExpr::SetOperation { left, .. } => select_items(left),
        SetExpr::Query(query) => select_items(&query.body),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn semi_anti_and_order_by_all_become_datafusion_s() {
        for (sql, expected) in [
            (
                "SELECT a, b FROM t ORDER BY ALL DESC",
                "SELECT a, b FROM t ORDER BY 1 DESC, 2 DESC",
            ),
            (
                "SELECT * FROM t ORDER BY ALL",
                "SELECT * FROM t ORDER BY ALL",
            ),
            (
                "SELECT a FROM t ORDER BY \"all\"",
                "SELECT a FROM t ORDER BY \"all\"",
            ),
            (
                "SELECT * FROM t SEMI JOIN u ON t.a = u.a ANTI JOIN v USING (a)",
                "SELECT * FROM t LEFT SEMI JOIN u ON t.a = u.a LEFT ANTI JOIN v USING(a)",
            ),
        ] {
            let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            duckdb_clauses(&mut statement);
            assert_eq!(statement.to_string(), expected);
        }
    }
}
