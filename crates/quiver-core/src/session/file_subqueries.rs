//! `_path IN (SELECT …)` and `_file IN (SELECT …)`: the subquery runs first and its answer
//! replaces it as a list of values, so the listing drops the files it rules out before any
//! footer is read. Planned as DataFusion plans it (a semi join), the outer scan would read
//! every file's footer first. An uncorrelated `x IN (subquery)` and `x IN (its values)` are
//! the same predicate, NULLs included, so the rewrite never changes an answer. An inner
//! join `ON t._path = r.c` implies `t._path IN (SELECT r.c FROM r)`, which is added to the
//! WHERE first, so joins on file columns prune files the same way.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, BinaryOperator, Expr, JoinConstraint, JoinOperator,
    Query, Select, SetExpr, Statement, TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Columns whose IN subqueries are worth running first: they prune files.
const FILE_COLUMNS: [&str; 2] = ["_path", "_file"];

/// A subquery answer larger than this stays a subquery (a join handles it better).
pub const MAX_VALUES: usize = 100_000;

/// The subqueries of `column IN (subquery)` over a file column, each once, outermost first.
pub fn file_subqueries(statement: &Statement) -> Vec<Query> {
    let mut found: Vec<Query> = vec![];
    let _ = visit_expressions(statement, |expr| {
        if let Some(query) = file_subquery(expr) {
            if !found.contains(query) {
                found.push(query.clone());
            }
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// Replaces each subquery that has an answer with the list of its values.
pub fn substitute(statement: &mut Statement, answers: &[(Query, Vec<Option<String>>)]) {
    let _ = visit_expressions_mut(statement, |expr| {
        let answer = file_subquery(expr)
            .and_then(|query| answers.iter().find(|(q, _)| q == query))
            .map(|(_, values)| values.clone());
        if let (
            Some(values),
            Expr::InSubquery {
                expr: column,
                negated,
                ..
            },
        ) = (answer, &*expr)
        {
            // Nothing is IN an empty answer; everything is NOT IN it, NULL too.
            if values.is_empty() {
                *expr = Expr::value(Value::Boolean(*negated));
                return ControlFlow::Continue(());
            }
            let list = values
                .into_iter()
                .map(|value| {
                    Expr::value(match value {
                        Some(text) => Value::SingleQuotedString(text),
                        None => Value::Null,
                    })
                })
                .collect();
            *expr = Expr::InList {
                expr: column.clone(),
                list,
                negated: *negated,
            };
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Adds to each SELECT, for every inner join on a file column (`ON t._path = r.c`), the
/// predicate it implies: `t._path IN (SELECT r.c FROM r)`.
pub fn add_join_subqueries(statement: &mut Statement) {
    struct Adder;
    impl VisitorMut for Adder {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if let SetExpr::Select(select) = query.body.as_mut() {
                add_to_select(select);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Adder);
}

fn add_to_select(select: &mut Select) {
    let mut implied = vec![];
    for from in &select.from {
        for join in &from.joins {
            let (JoinOperator::Join(JoinConstraint::On(on))
            | JoinOperator::Inner(JoinConstraint::On(on))) = &join.join_operator
            else {
                continue;
            };
            let Some(alias) = joined_name(&join.relation) else {
                continue;
            };
            for (left, right) in equalities(on) {
                for (file_side, other) in [(left, right), (right, left)] {
                    let pair_fits = is_file_column(file_side)
                        && qualifier(file_side) != Some(alias.as_str())
                        && qualifier(other) == Some(alias.as_str());
                    if !pair_fits {
                        continue;
                    }
                    // What the WHERE and the ON say of the joined relation alone holds
                    // inside the subquery too (an inner join keeps only such rows).
                    let own: Vec<String> = conjuncts(on)
                        .into_iter()
                        .chain(select.selection.iter().flat_map(conjuncts))
                        .filter(|c| only_of(c, &alias))
                        .map(|c| format!("({c})"))
                        .collect();
                    let filter = if own.is_empty() {
                        String::new()
                    } else {
                        format!(" WHERE {}", own.join(" AND "))
                    };
                    let sql = format!("SELECT {other} FROM {}{filter}", join.relation);
                    if let Ok(query) = Parser::new(&GenericDialect {})
                        .try_with_sql(&sql)
                        .and_then(|mut parser| parser.parse_query())
                    {
                        implied.push(Expr::InSubquery {
                            expr: Box::new(file_side.clone()),
                            subquery: query,
                            negated: false,
                        });
                    }
                }
            }
        }
    }
    for predicate in implied {
        select.selection = Some(match select.selection.take() {
            Some(present) => Expr::BinaryOp {
                left: Box::new(present),
                op: BinaryOperator::And,
                right: Box::new(predicate),
            },
            None => predicate,
        });
    }
}

/// The name a joined relation goes by: its alias, or a plain table's name. None for a
/// LATERAL subquery (it may read the tables before it) and other factors.
fn joined_name(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table {
            alias: Some(alias), ..
        } => Some(alias.name.value.clone()),
        TableFactor::Table {
            name, args: None, ..
        } => Some(name.0.last()?.as_ident()?.value.clone()),
        TableFactor::Derived {
            lateral: false,
            alias: Some(alias),
            ..
        } => Some(alias.name.value.clone()),
        _ => None,
    }
}

/// The terms of a conjunction.
fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut found = conjuncts(left);
            found.extend(conjuncts(right));
            found
        }
        Expr::Nested(inner) => conjuncts(inner),
        other => vec![other],
    }
}

/// Whether `expr` reads columns of `alias` only, each qualified, and no subquery.
fn only_of(expr: &Expr, alias: &str) -> bool {
    let mut columns = 0;
    let outside = visit_expressions(expr, |e| {
        let fits = match e {
            Expr::Identifier(_) => false,
            Expr::CompoundIdentifier(_) => {
                columns += 1;
                qualifier(e) == Some(alias)
            }
            Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. } => false,
            _ => true,
        };
        if fits {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    });
    outside.is_continue() && columns > 0
}

/// The `a = b` terms of a conjunction.
fn equalities(expr: &Expr) -> Vec<(&Expr, &Expr)> {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut found = equalities(left);
            found.extend(equalities(right));
            found
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => vec![(left.as_ref(), right.as_ref())],
        Expr::Nested(inner) => equalities(inner),
        _ => vec![],
    }
}

fn qualifier(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            Some(parts[parts.len() - 2].value.as_str())
        }
        _ => None,
    }
}

fn is_file_column(expr: &Expr) -> bool {
    let name = match expr {
        Expr::Identifier(ident) => &ident.value,
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(last) => &last.value,
            None => return false,
        },
        _ => return false,
    };
    FILE_COLUMNS.iter().any(|c| c.eq_ignore_ascii_case(name))
}

fn file_subquery(expr: &Expr) -> Option<&Query> {
    let Expr::InSubquery { expr, subquery, .. } = expr else {
        return None;
    };
    let name = match expr.as_ref() {
        Expr::Identifier(ident) => &ident.value,
        Expr::CompoundIdentifier(parts) => &parts.last()?.value,
        _ => return None,
    };
    FILE_COLUMNS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
        .then_some(subquery.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn parse(sql: &str) -> Statement {
        Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0)
    }

    #[test]
    fn inner_joins_on_file_columns_imply_in_subqueries() {
        let mut statement = parse(
            "SELECT count(*) FROM 'd/*.parquet' t JOIN parquet_metadata('d/*.parquet') m \
             ON t._path = m.file_name AND m.path_in_schema = 'x' \
             LEFT JOIN 'e.parquet' e ON e.file_name = t._path WHERE t.a > 1",
        );
        add_join_subqueries(&mut statement);
        let sql = statement.to_string();
        assert!(
            sql.contains(
                "WHERE t.a > 1 AND t._path IN (SELECT m.file_name FROM parquet_metadata('d/*.parquet') m \
                 WHERE (m.path_in_schema = 'x'))"
            ),
            "{sql}"
        );
        assert_eq!(
            file_subqueries(&statement).len(),
            1,
            "not the LEFT JOIN: {sql}"
        );
    }

    #[test]
    fn in_subqueries_on_file_columns_become_lists() {
        let mut statement = parse(
            "SELECT count(*) FROM 'd/*.parquet' t WHERE t._path IN (SELECT file_name FROM x) \
             AND k NOT IN (SELECT k FROM y) AND _file NOT IN (SELECT f FROM z)",
        );
        let found = file_subqueries(&statement);
        assert_eq!(found.len(), 2, "only _path and _file subqueries: {found:?}");
        let answers = vec![
            (found[0].clone(), vec![Some("a'b".to_string()), None]),
            (found[1].clone(), vec![]),
        ];
        substitute(&mut statement, &answers);
        let sql = statement.to_string();
        assert!(sql.contains("t._path IN ('a''b', NULL)"), "{sql}");
        assert!(sql.contains("AND true"), "an empty NOT IN is true: {sql}");
        assert!(sql.contains("k NOT IN (SELECT k FROM y)"), "{sql}");
    }
}
