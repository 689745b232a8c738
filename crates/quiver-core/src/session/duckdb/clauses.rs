//! DuckDB's clauses that DataFusion reads otherwise: `SEMI JOIN` and `ANTI JOIN` are
//! DataFusion's `LEFT SEMI` and `LEFT ANTI` joins (which it plans, where the bare forms are
//! "not implemented"), and `ORDER BY ALL` orders by every select item in turn (DataFusion
//! looks for a column named `all`). A top-level select list with `*`, whose items are
//! known only once the tables are, has its `ORDER BY ALL` (and the LIMIT after it) taken
//! out before planning and put back on the plan, over every column it outputs
//! (`take_order_by_all`). `CREATE TEMP TABLE` and `CREATE TEMP VIEW`, which DataFusion
//! refuses, are the plain ones (`session_scoped`): every table and view of a session lives
//! in its memory and ends with it, as DuckDB's temporary ones do.

use std::ops::ControlFlow;

use datafusion::error::Result;
use datafusion::logical_expr::{Expr as PlanExpr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::{
    Expr, Join, JoinConstraint, JoinOperator, LimitClause, OrderByExpr, OrderByKind, Query,
    SelectItem, SetExpr, Statement, Value, VisitMut, VisitorMut,
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

/// A temporary table or view as a plain one (see the module's comment).
pub fn session_scoped(statement: &mut Statement) {
    match statement {
        Statement::CreateTable(table) => table.temporary = false,
        Statement::CreateView(view) => view.temporary = false,
        _ => {}
    }
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

/// An `ORDER BY ALL` (and its LIMIT) taken out of a statement, to be put on its plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderAll {
    asc: bool,
    nulls_first: bool,
    skip: usize,
    fetch: Option<usize>,
}

/// Takes a top-level query's `ORDER BY ALL` that is still written so (its select list has
/// a `*`), with its LIMIT and OFFSET if they are numbers; `None` (and nothing taken) else.
pub fn take_order_by_all(statement: &mut Statement) -> Option<OrderAll> {
    let Statement::Query(query) = statement else {
        return None;
    };
    let OrderByKind::Expressions(items) = &query.order_by.as_ref()?.kind else {
        return None;
    };
    let [OrderByExpr {
        expr: Expr::Identifier(word),
        options,
        ..
    }] = items.as_slice()
    else {
        return None;
    };
    if word.quote_style.is_some() || !word.value.eq_ignore_ascii_case("all") {
        return None;
    }
    let number = |expr: &Expr| match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<usize>().ok(),
            _ => None,
        },
        _ => None,
    };
    let (skip, fetch) = match &query.limit_clause {
        None => (0, None),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) if limit_by.is_empty() => {
            let skip = match offset {
                Some(offset) => number(&offset.value)?,
                None => 0,
            };
            let fetch = match limit {
                Some(limit) => Some(number(limit)?),
                None => None,
            };
            (skip, fetch)
        }
        Some(_) => return None,
    };
    // NULLs last whichever the direction, as in DuckDB (and the session's default order).
    let order = OrderAll {
        asc: options.asc.unwrap_or(true),
        nulls_first: options.nulls_first.unwrap_or(false),
        skip,
        fetch,
    };
    query.order_by = None;
    query.limit_clause = None;
    Some(order)
}

impl OrderAll {
    /// `plan` sorted by every column it outputs, in turn, then limited.
    pub fn apply(&self, plan: LogicalPlan) -> Result<LogicalPlan> {
        let columns = plan.schema().columns();
        let sort = columns
            .into_iter()
            .map(|column| PlanExpr::Column(column).sort(self.asc, self.nulls_first))
            .collect::<Vec<_>>();
        let sorted = LogicalPlanBuilder::from(plan).sort(sort)?;
        match (self.skip, self.fetch) {
            (0, None) => sorted.build(),
            (skip, fetch) => sorted.limit(skip, fetch)?.build(),
        }
    }
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

    #[test]
    fn temporary_tables_and_views_are_the_sessions_own() {
        for (sql, expected) in [
            (
                "CREATE TEMP TABLE t AS SELECT 1 AS a",
                "CREATE TABLE t AS SELECT 1 AS a",
            ),
            (
                "CREATE OR REPLACE TEMPORARY VIEW v AS SELECT a FROM t",
                "CREATE OR REPLACE VIEW v AS SELECT a FROM t",
            ),
            ("SELECT 1", "SELECT 1"),
        ] {
            let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            session_scoped(&mut statement);
            assert_eq!(statement.to_string(), expected);
        }
    }
}
