//! DuckDB's PIVOT and UNPIVOT, which DataFusion does not plan. Both of DuckDB's forms:
//! the statements (`PIVOT t ON c [IN (…)] USING sum(x) [GROUP BY g]`, `UNPIVOT t ON a, b
//! INTO NAME k VALUE v`) become the SQL standard's table operators in the text
//! (`simplified_to_standard`), and those become plain queries once the table's columns
//! (and, for a PIVOT without IN, the values of its column) are known from planning it
//! (`session::planning`):
//!
//! - `t PIVOT (agg(x) [AS a], … FOR c IN (v [AS n], …))`: grouped by every column of `t`
//!   that neither `c` nor an aggregate names, one column per value (and aggregate):
//!   `agg(x) FILTER (WHERE c = v)`, named `v` (`v_a` with an alias, `v_agg(x)` for one of
//!   several aggregates without one).
//! - `t UNPIVOT [INCLUDE NULLS] (v FOR k IN (a, b))`: one SELECT per column named, of the
//!   other columns, the column's name as `k` and its value as `v`, under UNION ALL; NULL
//!   values dropped unless INCLUDE NULLS.

use std::ops::ControlFlow;

use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, Expr, ExprWithAlias, Ident, NullInclusion, PivotValueSource, TableAlias,
    TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::DuckDbDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::columns::FromColumn;

/// What the planner must find out before the next PIVOT or UNPIVOT can be written out:
/// the columns of its `table` (SQL of a FROM item) and, for a PIVOT without IN, the
/// distinct values of its column `values_of` there.
pub struct Pending {
    pub table: String,
    pub values_of: Option<String>,
}

/// The first PIVOT or UNPIVOT whose table has none left, innermost first.
pub fn next_pending<V: VisitMut>(statement: &mut V) -> Option<Pending> {
    let mut pending = None;
    let _ = visit_pivots(statement, |factor| {
        pending = match factor {
            TableFactor::Pivot {
                table,
                value_column,
                value_source,
                ..
            } => Some(Pending {
                table: table.to_string(),
                values_of: matches!(value_source, PivotValueSource::Any(_))
                    .then(|| value_column.first().map(ToString::to_string))
                    .flatten(),
            }),
            TableFactor::Unpivot { table, .. } => Some(Pending {
                table: table.to_string(),
                values_of: None,
            }),
            _ => None,
        };
        ControlFlow::Break(())
    });
    pending
}

/// Writes out the first PIVOT or UNPIVOT (as `next_pending` found it) over its table's
/// `columns` and, for `IN (ANY)`, its column's `values` (as SQL literals).
pub fn write_out<V: VisitMut>(
    statement: &mut V,
    columns: &[FromColumn],
    values: Option<&[String]>,
) -> Result<()> {
    let mut outcome = Ok(());
    let _ = visit_pivots(statement, |factor| {
        let written = match factor {
            TableFactor::Pivot { .. } => pivot(factor, columns, values),
            TableFactor::Unpivot { .. } => unpivot(factor, columns),
            _ => return ControlFlow::Continue(()),
        };
        outcome = written.and_then(|sql| {
            let alias = match factor {
                TableFactor::Pivot { alias, .. } | TableFactor::Unpivot { alias, .. } => {
                    alias.clone()
                }
                _ => None,
            };
            let subquery = Parser::new(&DuckDbDialect {})
                .try_with_sql(&sql)
                .and_then(|mut parser| parser.parse_query())
                .map_err(|e| DataFusionError::Plan(format!("{sql}: {e}")))?;
            *factor = TableFactor::Derived {
                lateral: false,
                subquery,
                // A derived table needs a name.
                alias: alias.or_else(|| {
                    Some(TableAlias {
                        explicit: true,
                        name: Ident::new("pivoted"),
                        columns: vec![],
                        at: None,
                    })
                }),
                sample: None,
            };
            Ok(())
        });
        ControlFlow::Break(())
    });
    outcome
}

/// Calls `each` with the innermost PIVOT and UNPIVOT table factors first.
fn visit_pivots<V: VisitMut>(
    statement: &mut V,
    each: impl FnMut(&mut TableFactor) -> ControlFlow<()>,
) -> ControlFlow<()> {
    struct Pivots<F>(F);
    impl<F: FnMut(&mut TableFactor) -> ControlFlow<()>> VisitorMut for Pivots<F> {
        type Break = ();
        fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Pivot { .. } | TableFactor::Unpivot { .. } => (self.0)(factor),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    statement.visit(&mut Pivots(each))
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The plain query of a PIVOT (see the module's comment).
fn pivot(
    factor: &TableFactor,
    columns: &[FromColumn],
    values: Option<&[String]>,
) -> Result<String> {
    let TableFactor::Pivot {
        table,
        aggregate_functions,
        value_column,
        value_source,
        ..
    } = factor
    else {
        unreachable!("pivot of a PIVOT");
    };
    let [column] = value_column.as_slice() else {
        return Err(DataFusionError::NotImplemented(
            "PIVOT on more than one column".into(),
        ));
    };
    let values = pivot_values(value_source, values)?;
    let named = named_in(column, aggregate_functions);
    let keys: Vec<String> = (columns.iter())
        .filter(|c| !named.iter().any(|n| n.eq_ignore_ascii_case(&c.1)))
        .map(|c| quoted(&c.1))
        .collect();
    let mut items = keys.clone();
    for (value, alias) in &values {
        let label = alias.clone().unwrap_or_else(|| unquoted(value));
        for aggregate in aggregate_functions {
            let name = match (&aggregate.alias, aggregate_functions.len()) {
                (Some(alias), _) => format!("{label}_{}", alias.value),
                (None, 1) => label.clone(),
                (None, _) => format!("{label}_{}", aggregate.expr),
            };
            let Expr::Function(mut function) = aggregate.expr.clone() else {
                return Err(DataFusionError::Plan(format!(
                    "PIVOT: {} is not an aggregate call",
                    aggregate.expr
                )));
            };
            let condition = format!("{column} IS NOT DISTINCT FROM {value}");
            function.filter = Some(Box::new(parsed_expr(&condition)?));
            items.push(format!("{function} AS {}", quoted(&name)));
        }
    }
    let group = match keys.is_empty() {
        true => String::new(),
        false => format!(" GROUP BY {}", keys.join(", ")),
    };
    Ok(format!("SELECT {} FROM {table}{group}", items.join(", ")))
}

/// A PIVOT's values, each with its name if it has one: its IN list's, or those found.
fn pivot_values(
    source: &PivotValueSource,
    found: Option<&[String]>,
) -> Result<Vec<(String, Option<String>)>> {
    Ok(match (source, found) {
        (PivotValueSource::List(list), _) => (list.iter())
            .map(|v| {
                (
                    v.expr.to_string(),
                    v.alias.as_ref().map(|a| a.value.clone()),
                )
            })
            .collect(),
        (PivotValueSource::Any(_), Some(values)) => {
            values.iter().map(|v| (v.clone(), None)).collect()
        }
        _ => {
            return Err(DataFusionError::NotImplemented(
                "PIVOT … IN (a subquery): list the values, or leave IN out".into(),
            ))
        }
    })
}

/// The columns a PIVOT names (its column and its aggregates'), which are no group keys.
fn named_in(column: &Expr, aggregates: &[ExprWithAlias]) -> Vec<String> {
    let mut named = vec![];
    for aggregate in aggregates {
        let _ = visit_expressions(&aggregate.expr, |expr| {
            match expr {
                Expr::Identifier(ident) => named.push(ident.value.clone()),
                Expr::CompoundIdentifier(parts) => {
                    named.extend(parts.last().map(|p| p.value.clone()))
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
    }
    named.push(match column {
        Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string(),
    });
    named
}

/// The plain query of an UNPIVOT (see the module's comment).
fn unpivot(factor: &TableFactor, columns: &[FromColumn]) -> Result<String> {
    let TableFactor::Unpivot {
        table,
        value,
        name,
        columns: unpivoted,
        null_inclusion,
        ..
    } = factor
    else {
        unreachable!("unpivot of an UNPIVOT");
    };
    let names: Vec<String> = (unpivoted.iter())
        .map(|c| match &c.expr {
            Expr::Identifier(ident) => ident.value.clone(),
            other => other.to_string(),
        })
        .collect();
    let kept: Vec<String> = (columns.iter())
        .filter(|c| !names.iter().any(|n| n.eq_ignore_ascii_case(&c.1)))
        .map(|c| quoted(&c.1))
        .collect();
    let include_nulls = matches!(null_inclusion, Some(NullInclusion::IncludeNulls));
    let selects: Vec<String> = (unpivoted.iter().zip(&names))
        .map(|(c, column)| {
            let label = c
                .alias
                .as_ref()
                .map_or(column.as_str(), |a| a.value.as_str());
            let mut items = kept.clone();
            items.push(format!(
                "'{}' AS {}",
                label.replace('\'', "''"),
                quoted(&name.value)
            ));
            items.push(format!("{} AS {}", c.expr, quoted(&value.to_string())));
            let filter = match include_nulls {
                true => String::new(),
                false => format!(" WHERE {} IS NOT NULL", c.expr),
            };
            format!("SELECT {} FROM {table}{filter}", items.join(", "))
        })
        .collect();
    Ok(selects.join(" UNION ALL "))
}

fn unquoted(value: &str) -> String {
    value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .map_or_else(|| value.to_string(), |v| v.replace("''", "'"))
}

fn parsed_expr(sql: &str) -> Result<Expr> {
    Parser::new(&DuckDbDialect {})
        .try_with_sql(sql)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|e| DataFusionError::Plan(format!("{sql}: {e}")))
}

/// A value of a PIVOT's column as a literal for its IN list.
pub fn literal(value: &datafusion::common::ScalarValue) -> String {
    match value {
        v if v.is_null() => "NULL".into(),
        datafusion::common::ScalarValue::Utf8(Some(s))
        | datafusion::common::ScalarValue::Utf8View(Some(s))
        | datafusion::common::ScalarValue::LargeUtf8(Some(s)) => {
            format!("'{}'", s.replace('\'', "''"))
        }
        other => match other.data_type().is_numeric() || other.data_type().is_null() {
            true => other.to_string(),
            false => format!("'{}'", other.to_string().replace('\'', "''")),
        },
    }
}

/// DuckDB's PIVOT and UNPIVOT statements as SQL standard table operators in a query:
/// `PIVOT t ON c [IN (…)] USING aggs [GROUP BY g]` is `SELECT * FROM t' PIVOT (aggs FOR c
/// IN (… | ANY))`, where `t'` keeps only `g`, `c` and the aggregates' columns when GROUP
/// BY names the keys; `UNPIVOT t ON a, b [INTO NAME k VALUE v]` is `SELECT * FROM t
/// UNPIVOT (v FOR k IN (a, b))` (`name` and `value` by default).
pub fn simplified_to_standard(sql: &str) -> String {
    if !sql.to_ascii_lowercase().contains("pivot") {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    loop {
        let end = top_level(rest, ";").unwrap_or(rest.len());
        let text = &rest[..end];
        // Its leading space kept: `SET x = 1; PIVOT …` stays two statements as written.
        let body = text.trim_start();
        match standard(body) {
            Some(standard) => {
                out.push_str(&format!("{}{standard}", &text[..text.len() - body.len()]))
            }
            None => out.push_str(text),
        }
        if end == rest.len() {
            return out;
        }
        out.push(';');
        rest = &rest[end + 1..];
    }
}

/// One statement's standard form, if it is a PIVOT or UNPIVOT statement.
fn standard(statement: &str) -> Option<String> {
    let trimmed = statement.trim_start();
    let word = |text: &str, w: &str| {
        text.len() > w.len()
            && text[..w.len()].eq_ignore_ascii_case(w)
            && text[w.len()..].starts_with(char::is_whitespace)
    };
    // An ORDER BY or LIMIT after the statement orders or limits its answer.
    let lower = trimmed.to_ascii_lowercase();
    let tail_at = [" order by ", " limit "]
        .iter()
        .filter_map(|keyword| top_level(&lower, keyword))
        .min()
        .unwrap_or(trimmed.len());
    let (trimmed, tail) = trimmed.split_at(tail_at);
    let lower = &lower[..tail_at];
    // The top-level keywords, outside parentheses and quotes.
    let at = |keyword: &str| top_level(lower, keyword);
    if word(trimmed, "pivot") {
        let on = at(" on ")?;
        let using = at(" using ")?;
        let group = at(" group by ");
        let table = trimmed["pivot".len()..on].trim();
        let on_part = trimmed[on + 4..using].trim();
        let (column, values) = match top_level(&on_part.to_ascii_lowercase(), " in ") {
            Some(i) => (on_part[..i].trim(), on_part[i + 4..].trim().to_string()),
            None => (on_part, "(ANY)".to_string()),
        };
        let aggregates = trimmed[using + 7..group.unwrap_or(trimmed.len())].trim();
        let source = match group {
            None => table.to_string(),
            Some(g) => {
                let keys = trimmed[g + 10..].trim();
                let mut used = vec![column.to_string()];
                let parsed = Parser::new(&DuckDbDialect {})
                    .try_with_sql(&format!("SELECT {aggregates}"))
                    .and_then(|mut parser| parser.parse_query())
                    .ok()?;
                let _ = visit_expressions(&parsed, |expr| {
                    if let Expr::Identifier(ident) = expr {
                        used.push(ident.to_string());
                    }
                    ControlFlow::<()>::Continue(())
                });
                format!("(SELECT {keys}, {} FROM {table})", used.join(", "))
            }
        };
        return Some(format!(
            "SELECT * FROM {source} PIVOT ({aggregates} FOR {column} IN {values}){tail}"
        ));
    }
    if word(trimmed, "unpivot") {
        let on = at(" on ")?;
        let into = at(" into ");
        let table = trimmed["unpivot".len()..on].trim();
        let columns = trimmed[on + 4..into.unwrap_or(trimmed.len())].trim();
        let (name, value) = match into {
            None => ("name".to_string(), "value".to_string()),
            Some(i) => {
                let words: Vec<&str> = trimmed[i + 6..].split_whitespace().collect();
                match words.as_slice() {
                    [n, name, v, value]
                        if n.eq_ignore_ascii_case("name") && v.eq_ignore_ascii_case("value") =>
                    {
                        (name.to_string(), value.to_string())
                    }
                    _ => return None,
                }
            }
        };
        return Some(format!(
            "SELECT * FROM {table} UNPIVOT ({value} FOR {name} IN ({columns})){tail}"
        ));
    }
    None
}

/// Where `keyword` (lower case, with its spaces) first stands outside parentheses and
/// quotes in `text` (lower case where it matters).
fn top_level(text: &str, keyword: &str) -> Option<usize> {
    let (mut depth, mut quote) = (0i32, None);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, _) if depth == 0 && text[i..].starts_with(keyword) => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckdb_s_statements_become_the_standard_s_operators() {
        assert_eq!(
            simplified_to_standard("PIVOT cities ON year USING sum(population)"),
            "SELECT * FROM cities PIVOT (sum(population) FOR year IN (ANY))"
        );
        assert_eq!(
            simplified_to_standard(
                "SET x = 1; PIVOT 'c.parquet' ON year IN (2000, 2010) USING sum(population) AS p GROUP BY country"
            ),
            "SET x = 1; SELECT * FROM (SELECT country, year, population FROM 'c.parquet') \
             PIVOT (sum(population) AS p FOR year IN (2000, 2010))"
        );
        assert_eq!(
            simplified_to_standard("PIVOT t ON y USING count(*) GROUP BY g ORDER BY g LIMIT 2"),
            "SELECT * FROM (SELECT g, y FROM t) PIVOT (count(*) FOR y IN (ANY)) ORDER BY g LIMIT 2"
        );
        assert_eq!(
            simplified_to_standard("UNPIVOT m ON jan, feb INTO NAME month VALUE sales"),
            "SELECT * FROM m UNPIVOT (sales FOR month IN (jan, feb))"
        );
        let plain = "SELECT pivot FROM t; CALL f('''a/*.parquet'''); SELECT ';pivot x on y'";
        assert_eq!(simplified_to_standard(plain), plain);
    }

    fn written(sql: &str, columns: &[&str], values: Option<&[String]>) -> String {
        let mut statement = crate::session::duckdb::parsed(sql);
        let columns: Vec<FromColumn> = columns.iter().map(|c| (None, c.to_string())).collect();
        assert!(next_pending(&mut statement).is_some());
        write_out(&mut statement, &columns, values).unwrap();
        statement.to_string()
    }

    #[test]
    fn a_pivot_groups_by_the_other_columns_and_filters_each_value() {
        let got = written(
            "SELECT * FROM t PIVOT (sum(p) FOR y IN (2000, 2010 AS later))",
            &["country", "y", "p"],
            None,
        );
        assert_eq!(
            got,
            "SELECT * FROM (SELECT \"country\", sum(p) FILTER (WHERE y IS NOT DISTINCT FROM 2000) \
             AS \"2000\", sum(p) FILTER (WHERE y IS NOT DISTINCT FROM 2010) AS \"later\" FROM t \
             GROUP BY \"country\") AS pivoted"
        );
        let values = ["'a'".to_string(), "NULL".to_string()];
        let got = written(
            "SELECT * FROM t PIVOT (count(*) FOR k IN (ANY)) AS x",
            &["k"],
            Some(&values),
        );
        assert_eq!(
            got,
            "SELECT * FROM (SELECT count(*) FILTER (WHERE k IS NOT DISTINCT FROM 'a') AS \"a\", \
             count(*) FILTER (WHERE k IS NOT DISTINCT FROM NULL) AS \"NULL\" FROM t) AS x"
        );
    }

    #[test]
    fn an_unpivot_is_a_union_of_one_select_per_column_without_nulls() {
        let got = written(
            "SELECT * FROM m UNPIVOT (sales FOR month IN (jan, feb))",
            &["id", "jan", "feb"],
            None,
        );
        assert_eq!(
            got,
            "SELECT * FROM (SELECT \"id\", 'jan' AS \"month\", jan AS \"sales\" FROM m WHERE jan \
             IS NOT NULL UNION ALL SELECT \"id\", 'feb' AS \"month\", feb AS \"sales\" FROM m \
             WHERE feb IS NOT NULL) AS pivoted"
        );
    }
}
