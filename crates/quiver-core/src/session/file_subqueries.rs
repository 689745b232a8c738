//! `_path IN (SELECT …)` and `_file IN (SELECT …)`: the subquery runs first and its answer
//! replaces it as a list of values, so the listing drops the files it rules out before any
//! footer is read. Planned as DataFusion plans it (a semi join), the outer scan would read
//! every file's footer first. An uncorrelated `x IN (subquery)` and `x IN (its values)` are
//! the same predicate, NULLs included, so the rewrite never changes an answer.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, Expr, Query, Statement, Value,
};

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
