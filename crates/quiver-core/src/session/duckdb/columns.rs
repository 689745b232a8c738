//! DuckDB's `COLUMNS(…)`: a select item written once for every column of the FROM clause
//! that its selector picks, named after the column, and a WHERE or HAVING condition
//! written so becomes the AND of them all. The selectors: `*`; a regular expression,
//! matched anywhere in the name (an alias may take its groups: `AS '\1_x'`); a list of
//! names; a lambda over the name (`lambda c: c LIKE 'l_%'`), of LIKE, ILIKE, `=`, `<>`, IN,
//! AND, OR, NOT, `starts_with`, `ends_with`, `contains` and `regexp_matches`. The columns
//! of a FROM clause are known only by planning it (`session::planning` does), so this
//! module finds the next query to expand (`next_to_expand`, one whose FROM clause has no
//! `COLUMNS` left) and expands it (`expand`) once they are known.

use std::ops::ControlFlow;

use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, ObjectNamePart, OneOrManyWithParens, Select, SelectItem, SetExpr, Statement,
    TableWithJoins, UnaryOperator, Value, Visit, VisitMut, VisitorMut,
};
use regex::Regex;

/// A column of a FROM clause: the relation it came from (if named) and its name.
pub type FromColumn = (Option<String>, String);

/// The next query whose select list or conditions use `COLUMNS`, by its place among the
/// statement's queries, with its FROM clause (which uses none).
pub fn next_to_expand(statement: &mut Statement) -> Option<(usize, Vec<TableWithJoins>)> {
    let mut found = None;
    let _ = visit_selects(statement, |index, select| {
        let ready = uses_columns(select) && !mentions(&select.from);
        if ready {
            found = Some((index, select.from.clone()));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Expands the `COLUMNS` of the query at `index` (as `next_to_expand` counts) over the
/// `columns` of its FROM clause.
pub fn expand(statement: &mut Statement, index: usize, columns: &[FromColumn]) -> Result<()> {
    let mut outcome = Ok(());
    let _ = visit_selects(statement, |at, select| {
        if at != index {
            return ControlFlow::Continue(());
        }
        outcome = expand_select(select, columns);
        ControlFlow::Break(())
    });
    outcome
}

/// Calls `each` with every SELECT of `statement` (subqueries too) and its place, in a
/// fixed order, until it breaks.
fn visit_selects(
    statement: &mut Statement,
    each: impl FnMut(usize, &mut Select) -> ControlFlow<()>,
) -> ControlFlow<()> {
    struct Selects<F>(usize, F);
    impl<F: FnMut(usize, &mut Select) -> ControlFlow<()>> VisitorMut for Selects<F> {
        type Break = ();
        fn pre_visit_query(
            &mut self,
            query: &mut datafusion::sql::sqlparser::ast::Query,
        ) -> ControlFlow<()> {
            let mut sets = vec![query.body.as_mut()];
            while let Some(set) = sets.pop() {
                match set {
                    SetExpr::Select(select) => {
                        self.0 += 1;
                        (self.1)(self.0 - 1, select)?;
                    }
                    SetExpr::SetOperation { left, right, .. } => {
                        sets.push(right.as_mut());
                        sets.push(left.as_mut());
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    statement.visit(&mut Selects(0, each))
}

/// Whether `node` holds a `COLUMNS(…)` call (a string or another function that merely
/// spells it does not count).
fn mentions<V: Visit>(node: &V) -> bool {
    let found = visit_expressions(node, |expr| match is_columns_call(expr) {
        true => ControlFlow::Break(()),
        false => ControlFlow::Continue(()),
    });
    found.is_break()
}

fn is_columns_call(expr: &Expr) -> bool {
    let Expr::Function(function) = expr else {
        return false;
    };
    matches!(function.name.0.as_slice(),
        [ObjectNamePart::Identifier(name)] if name.value.eq_ignore_ascii_case("columns"))
}

/// Whether `select`'s items or conditions call `COLUMNS(…)`.
pub fn uses_columns(select: &Select) -> bool {
    mentions(&select.projection) || mentions(&select.selection) || mentions(&select.having)
}

fn expand_select(select: &mut Select, columns: &[FromColumn]) -> Result<()> {
    let mut items = Vec::with_capacity(select.projection.len());
    for item in std::mem::take(&mut select.projection) {
        let (expr, alias) = match &item {
            SelectItem::UnnamedExpr(expr) => (expr, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            _ => {
                items.push(item);
                continue;
            }
        };
        let Some(selector) = selector_in(expr)? else {
            items.push(item);
            continue;
        };
        for column in selector.pick(columns)? {
            let name = &columns[column].1;
            let expr = with_column(expr, columns, column);
            let alias = match (alias, &selector) {
                (Some(alias), Selector::Pattern(pattern)) => {
                    let template = template_of(&alias.value);
                    Ident::with_quote('"', pattern.replace(name, template.as_str()))
                }
                (Some(alias), _) => alias.clone(),
                (None, _) => Ident::with_quote('"', name),
            };
            items.push(SelectItem::ExprWithAlias { expr, alias });
        }
    }
    select.projection = items;
    for condition in [&mut select.selection, &mut select.having]
        .into_iter()
        .flatten()
    {
        if let Some(selector) = selector_in(condition)? {
            let parts = (selector.pick(columns)?.into_iter())
                .map(|column| with_column(condition, columns, column));
            *condition = parts
                .reduce(|all, part| Expr::BinaryOp {
                    left: Box::new(all),
                    op: BinaryOperator::And,
                    right: Box::new(part),
                })
                .unwrap_or(Expr::value(Value::Boolean(true)));
        }
    }
    Ok(())
}

/// An alias's `\1` (a group of the selector's match) as the regex crate writes it, `${1}`.
fn template_of(alias: &str) -> String {
    let mut template = String::new();
    let mut chars = alias.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => template.push_str("$$"),
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                template.push_str("${");
                while let Some(digit) = chars.next_if(char::is_ascii_digit) {
                    template.push(digit);
                }
                template.push('}');
            }
            c => template.push(c),
        }
    }
    template
}

/// Which columns a `COLUMNS` call picks.
enum Selector {
    All,
    Pattern(Regex),
    Names(Vec<String>),
    Lambda(String, Box<Expr>),
}

impl Selector {
    fn of(arg: &FunctionArg) -> Result<Self> {
        let FunctionArg::Unnamed(arg) = arg else {
            return Err(refused(arg));
        };
        Ok(match arg {
            FunctionArgExpr::Wildcard => Self::All,
            FunctionArgExpr::Expr(Expr::Value(value)) => match text(&value.value) {
                Some(pattern) => Self::Pattern(
                    Regex::new(pattern)
                        .map_err(|e| DataFusionError::Plan(format!("COLUMNS('{pattern}'): {e}")))?,
                ),
                None => return Err(refused(arg)),
            },
            FunctionArgExpr::Expr(Expr::Array(list)) => Self::Names(
                (list.elem.iter())
                    .map(|name| match name {
                        Expr::Value(value) => text(&value.value).map(str::to_string),
                        _ => None,
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| refused(arg))?,
            ),
            FunctionArgExpr::Expr(Expr::Lambda(lambda)) => match &lambda.params {
                OneOrManyWithParens::One(param) => {
                    Self::Lambda(param.name.value.clone(), lambda.body.clone())
                }
                OneOrManyWithParens::Many(_) => return Err(refused(arg)),
            },
            _ => return Err(refused(arg)),
        })
    }

    /// The indexes of the columns picked, in the FROM clause's order.
    fn pick(&self, columns: &[FromColumn]) -> Result<Vec<usize>> {
        let all = 0..columns.len();
        Ok(match self {
            Self::All => all.collect(),
            Self::Pattern(pattern) => all.filter(|&i| pattern.is_match(&columns[i].1)).collect(),
            Self::Names(names) => {
                let named =
                    |column: &FromColumn| names.iter().any(|n| n.eq_ignore_ascii_case(&column.1));
                if let Some(name) = names
                    .iter()
                    .find(|n| !columns.iter().any(|c| c.1.eq_ignore_ascii_case(n)))
                {
                    let error = format!("COLUMNS: no column named {name}");
                    return Err(DataFusionError::Plan(error));
                }
                all.filter(|&i| named(&columns[i])).collect()
            }
            Self::Lambda(param, body) => {
                let mut picked = vec![];
                for i in all {
                    if truth(&evaluate(body, param, &columns[i].1)?)? {
                        picked.push(i);
                    }
                }
                picked
            }
        })
    }
}

/// The selector of the `COLUMNS` call in `expr` (the first, if there are several).
fn selector_in(expr: &Expr) -> Result<Option<Selector>> {
    let mut found = None;
    let mut expr = expr.clone();
    let _ = visit_columns_calls(&mut expr, |args, _| {
        found = Some(match args {
            [arg] => Selector::of(arg),
            _ => Err(DataFusionError::Plan(
                "COLUMNS takes one argument: *, a regular expression, a list of names or a \
                 lambda"
                    .into(),
            )),
        });
        ControlFlow::Break(())
    });
    found.transpose()
}

/// `expr` with every `COLUMNS` call replaced by the column at `index` (qualified when
/// another column of the FROM clause has its name).
fn with_column(expr: &Expr, columns: &[FromColumn], index: usize) -> Expr {
    let (relation, name) = &columns[index];
    let shared = columns.iter().filter(|c| &c.1 == name).count() > 1;
    let column = match (relation, shared) {
        (Some(relation), true) => Expr::CompoundIdentifier(vec![
            Ident::with_quote('"', relation),
            Ident::with_quote('"', name),
        ]),
        _ => Expr::Identifier(Ident::with_quote('"', name)),
    };
    let mut expr = expr.clone();
    let _ = visit_columns_calls(&mut expr, |_, call| {
        *call = column.clone();
        ControlFlow::Continue(())
    });
    expr
}

/// Calls `each` with every `COLUMNS(…)` call in `expr`: its arguments and the call itself.
fn visit_columns_calls(
    expr: &mut Expr,
    mut each: impl FnMut(&[FunctionArg], &mut Expr) -> ControlFlow<()>,
) -> ControlFlow<()> {
    datafusion::sql::sqlparser::ast::visit_expressions_mut(expr, |expr| {
        if !is_columns_call(expr) {
            return ControlFlow::Continue(());
        }
        let Expr::Function(function) = expr else {
            return ControlFlow::Continue(());
        };
        let FunctionArguments::List(list) = &function.args else {
            return ControlFlow::Continue(());
        };
        let args = list.args.clone();
        each(&args, expr)
    })
}

fn refused(arg: &dyn std::fmt::Display) -> DataFusionError {
    DataFusionError::Plan(format!(
        "COLUMNS({arg}): a selector is *, a regular expression ('l_.*'), a list of names \
         (['a', 'b']) or a lambda of one name (lambda c: c LIKE 'l_%')"
    ))
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => Some(text),
        _ => None,
    }
}

/// A lambda's value for one column name: text or a truth value.
#[derive(Debug, PartialEq)]
enum Named {
    Text(String),
    Truth(bool),
}

fn truth(value: &Named) -> Result<bool> {
    match value {
        Named::Truth(truth) => Ok(*truth),
        Named::Text(text) => Err(DataFusionError::Plan(format!(
            "COLUMNS(lambda …): the lambda gives '{text}', not true or false"
        ))),
    }
}

/// `body` for the column `name` bound to `param` (see the module's comment for what it
/// may use).
fn evaluate(body: &Expr, param: &str, name: &str) -> Result<Named> {
    let text_of = |expr: &Expr| match evaluate(expr, param, name)? {
        Named::Text(text) => Ok(text),
        Named::Truth(_) => Err(lambda_refused(expr)),
    };
    Ok(match body {
        Expr::Identifier(ident) if ident.value == param => Named::Text(name.to_string()),
        Expr::Value(value) => match text(&value.value) {
            Some(text) => Named::Text(text.to_string()),
            None => return Err(lambda_refused(body)),
        },
        Expr::Nested(inner) => evaluate(inner, param, name)?,
        Expr::Like {
            negated,
            expr,
            pattern,
            any: false,
            escape_char: None,
        } => Named::Truth(like(&text_of(expr)?, &text_of(pattern)?, false) != *negated),
        Expr::ILike {
            negated,
            expr,
            pattern,
            any: false,
            escape_char: None,
        } => Named::Truth(like(&text_of(expr)?, &text_of(pattern)?, true) != *negated),
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let value = text_of(expr)?;
            let found = list.iter().map(text_of).collect::<Result<Vec<_>>>()?;
            Named::Truth(found.contains(&value) != *negated)
        }
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => Named::Truth(!truth(&evaluate(expr, param, name)?)?),
        Expr::BinaryOp { left, op, right } => {
            let (left, right) = (evaluate(left, param, name)?, evaluate(right, param, name)?);
            Named::Truth(match op {
                BinaryOperator::Eq => left == right,
                BinaryOperator::NotEq => left != right,
                BinaryOperator::And => truth(&left)? && truth(&right)?,
                BinaryOperator::Or => truth(&left)? || truth(&right)?,
                _ => return Err(lambda_refused(body)),
            })
        }
        Expr::Function(function) => {
            let FunctionArguments::List(list) = &function.args else {
                return Err(lambda_refused(body));
            };
            let args = (list.args.iter())
                .map(|arg| match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => text_of(expr),
                    _ => Err(lambda_refused(body)),
                })
                .collect::<Result<Vec<_>>>()?;
            let called = function.name.to_string().to_ascii_lowercase();
            Named::Truth(called_on_text(&called, &args).ok_or_else(|| lambda_refused(body))??)
        }
        _ => return Err(lambda_refused(body)),
    })
}

/// SQL's LIKE (ILIKE when `insensitive`) of `value` against `pattern`.
fn like(value: &str, pattern: &str, insensitive: bool) -> bool {
    let mut regex = String::from(if insensitive { "(?is)^" } else { "(?s)^" });
    for c in pattern.chars() {
        match c {
            '%' => regex.push_str(".*"),
            '_' => regex.push('.'),
            c => regex.push_str(&regex::escape(&c.to_string())),
        }
    }
    regex.push('$');
    Regex::new(&regex).is_ok_and(|r| r.is_match(value))
}

/// The functions a lambda may call on a name, of a text and a probe (`None`: another).
fn called_on_text(called: &str, args: &[String]) -> Option<Result<bool>> {
    let [value, probe] = args else {
        return None;
    };
    Some(Ok(match called {
        "starts_with" | "prefix" => value.starts_with(probe.as_str()),
        "ends_with" | "suffix" => value.ends_with(probe.as_str()),
        "contains" => value.contains(probe.as_str()),
        "regexp_matches" => match Regex::new(probe) {
            Ok(regex) => regex.is_match(value),
            Err(e) => return Some(Err(DataFusionError::Plan(format!("COLUMNS: {e}")))),
        },
        _ => return None,
    }))
}

fn lambda_refused(expr: &Expr) -> DataFusionError {
    DataFusionError::Plan(format!(
        "COLUMNS(lambda …): cannot evaluate {expr} on a column name; use LIKE, ILIKE, =, <>, \
         IN, AND, OR, NOT, starts_with, ends_with, contains or regexp_matches"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::duckdb::parsed;

    fn expanded(sql: &str, columns: &[FromColumn]) -> Result<String> {
        let mut statement = parsed(sql);
        let (index, _) = next_to_expand(&mut statement).expect("a COLUMNS to expand");
        expand(&mut statement, index, columns)?;
        Ok(statement.to_string())
    }

    fn named(names: &[&str]) -> Vec<FromColumn> {
        names
            .iter()
            .map(|n| (Some("t".into()), n.to_string()))
            .collect()
    }

    #[test]
    fn each_selector_picks_its_columns_named_after_them() {
        let t = named(&["id", "number", "name", "numbers"]);
        for (sql, expected) in [
            (
                "SELECT max(COLUMNS(*)) FROM t",
                r#"SELECT max("id") AS "id", max("number") AS "number", max("name") AS "name", max("numbers") AS "numbers" FROM t"#,
            ),
            (
                "SELECT COLUMNS('num') + 1 FROM t",
                r#"SELECT "number" + 1 AS "number", "numbers" + 1 AS "numbers" FROM t"#,
            ),
            (
                "SELECT min(COLUMNS(['name', 'id'])) FROM t",
                r#"SELECT min("id") AS "id", min("name") AS "name" FROM t"#,
            ),
            (
                "SELECT COLUMNS(lambda c: c LIKE 'num%' AND NOT c = 'numbers') FROM t",
                r#"SELECT "number" AS "number" FROM t"#,
            ),
            (
                r"SELECT COLUMNS('(n)(.*)') AS '\2_x' FROM t",
                r#"SELECT "number" AS "umber_x", "name" AS "ame_x", "numbers" AS "umbers_x" FROM t"#,
            ),
            (
                "SELECT id FROM t WHERE COLUMNS('^num') > 0",
                r#"SELECT id FROM t WHERE "number" > 0 AND "numbers" > 0"#,
            ),
        ] {
            assert_eq!(expanded(sql, &t).unwrap(), expected, "{sql}");
        }
    }

    #[test]
    fn a_name_two_relations_share_is_qualified_and_the_inner_query_comes_first() {
        let joined = vec![
            (Some("a".into()), "id".into()),
            (Some("b".into()), "id".into()),
            (Some("b".into()), "v".into()),
        ];
        let got = expanded("SELECT COLUMNS(*) FROM a JOIN b USING (id)", &joined).unwrap();
        assert_eq!(
            got,
            r#"SELECT "a"."id" AS "id", "b"."id" AS "id", "v" AS "v" FROM a JOIN b USING(id)"#
        );
        let mut nested = parsed("SELECT COLUMNS(*) FROM (SELECT COLUMNS('x') FROM t)");
        let (index, from) = next_to_expand(&mut nested).unwrap();
        assert_eq!((index, from[0].to_string()), (1, "t".to_string()));
    }

    #[test]
    fn a_string_or_another_function_that_spells_columns_is_left_alone() {
        for sql in [
            "SELECT 'columns(' FROM t",
            "SELECT my_columns(a) FROM t",
            "SELECT count(*) FROM duckdb_columns()",
        ] {
            let mut statement = parsed(sql);
            assert!(next_to_expand(&mut statement).is_none(), "{sql}");
        }
    }

    #[test]
    fn what_cannot_be_read_is_refused_naming_the_forms() {
        let t = named(&["a"]);
        let error = expanded("SELECT COLUMNS(1) FROM t", &t).unwrap_err();
        assert!(error.to_string().contains("a selector is *"), "{error}");
        let error = expanded("SELECT COLUMNS(lambda c: length(c) > 1) FROM t", &t).unwrap_err();
        assert!(error.to_string().contains("cannot evaluate"), "{error}");
        let error = expanded("SELECT COLUMNS(['b']) FROM t", &t).unwrap_err();
        assert!(error.to_string().contains("no column named b"), "{error}");
    }
}
