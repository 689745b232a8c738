//! `CREATE [OR REPLACE] MACRO name(a, b := 1) AS expr`: DuckDB's scalar macros, kept by the
//! session and expanded before planning as DuckDB expands them: the body, each parameter
//! replaced by its argument in parentheses (or its default). A macro may call another; a
//! macro that calls itself is an error, not a loop. Table macros (`AS TABLE`) are refused.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Mutex;

use datafusion::common::{plan_err, Result};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    MacroDefinition, ObjectNamePart, Select, SelectItem, Statement, VisitMut, VisitorMut,
};

/// Expansions deeper than this are a macro calling itself.
const MAX_DEPTH: usize = 16;

#[derive(Debug, Default)]
pub struct UserMacros(Mutex<HashMap<String, Macro>>);

#[derive(Debug, Clone)]
struct Macro {
    /// Parameters in order, with their defaults.
    params: Vec<(String, Option<Expr>)>,
    body: Expr,
}

impl UserMacros {
    /// Keeps the macro `statement` creates; `None` if it creates none.
    pub fn define(&self, statement: &Statement) -> Option<Result<()>> {
        let Statement::CreateMacro {
            or_replace,
            name,
            args,
            definition,
            ..
        } = statement
        else {
            return None;
        };
        let MacroDefinition::Expr(body) = definition else {
            return Some(plan_err!(
                "CREATE MACRO … AS TABLE is not supported yet: write a view instead"
            ));
        };
        let name = name.to_string().to_ascii_lowercase();
        let mut macros = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if macros.contains_key(&name) && !or_replace {
            return Some(plan_err!(
                "a macro named {name} exists; CREATE OR REPLACE MACRO replaces it"
            ));
        }
        let params = (args.iter().flatten())
            .map(|a| (a.name.value.to_ascii_lowercase(), a.default_expr.clone()))
            .collect();
        let body = body.clone();
        macros.insert(name, Macro { params, body });
        Some(Ok(()))
    }

    /// Expands every call of a macro in `statement`, and the calls their bodies make.
    pub fn expand<V: VisitMut>(&self, statement: &mut V) -> Result<()> {
        let macros = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if macros.is_empty() {
            return Ok(());
        }
        let _ = statement.visit(&mut NameAsWritten(&macros));
        for _ in 0..MAX_DEPTH {
            let mut expander = Expander {
                macros: &macros,
                expanded: 0,
                error: None,
            };
            let _ = statement.visit(&mut expander);
            if let Some(error) = expander.error {
                return plan_err!("{error}");
            }
            if expander.expanded == 0 {
                return Ok(());
            }
        }
        plan_err!("a macro calls itself (expanded {MAX_DEPTH} levels deep)")
    }
}

struct Expander<'a> {
    macros: &'a HashMap<String, Macro>,
    expanded: usize,
    error: Option<String>,
}

impl VisitorMut for Expander<'_> {
    type Break = ();

    // After the arguments: a call inside an argument is expanded first.
    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else {
            return ControlFlow::Continue(());
        };
        let [ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else {
            return ControlFlow::Continue(());
        };
        let Some(definition) = self.macros.get(&name.value.to_ascii_lowercase()) else {
            return ControlFlow::Continue(());
        };
        match body_with_args(&name.value, definition, &function.args) {
            Ok(body) => {
                *expr = body;
                self.expanded += 1;
                ControlFlow::Continue(())
            }
            Err(error) => {
                self.error = Some(error);
                ControlFlow::Break(())
            }
        }
    }
}

/// A select item that calls a macro keeps its text as its name (`f(21)`), as DuckDB names
/// it, not DataFusion's name for the expansion.
struct NameAsWritten<'a>(&'a HashMap<String, Macro>);

impl VisitorMut for NameAsWritten<'_> {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for item in &mut select.projection {
            let SelectItem::UnnamedExpr(expr) = item else {
                continue;
            };
            let calls_macro = visit_expressions(expr, |e| match e {
                Expr::Function(f)
                    if matches!(f.name.0.as_slice(),
                    [ObjectNamePart::Identifier(n)] if self.0.contains_key(&n.value.to_ascii_lowercase())) =>
                {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            });
            if calls_macro.is_break() {
                *item = SelectItem::ExprWithAlias {
                    alias: Ident::with_quote('"', expr.to_string()),
                    expr: expr.clone(),
                };
            }
        }
        ControlFlow::Continue(())
    }
}

/// The macro's body with each parameter replaced by its argument (positional, then named
/// `b := 2`, then the default).
fn body_with_args(
    name: &str,
    definition: &Macro,
    args: &FunctionArguments,
) -> std::result::Result<Expr, String> {
    let list = match args {
        FunctionArguments::List(list) => list.args.as_slice(),
        FunctionArguments::None => &[],
        FunctionArguments::Subquery(_) => return Err(format!("{name}: a subquery as arguments")),
    };
    let mut values: HashMap<String, Expr> = HashMap::new();
    let mut positional = 0;
    for arg in list {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) => {
                let Some((param, _)) = definition.params.get(positional) else {
                    return Err(format!(
                        "{name} takes {} arguments",
                        definition.params.len()
                    ));
                };
                values.insert(param.clone(), value.clone());
                positional += 1;
            }
            FunctionArg::Named {
                name: param,
                arg: FunctionArgExpr::Expr(value),
                ..
            } => {
                values.insert(param.value.to_ascii_lowercase(), value.clone());
            }
            other => return Err(format!("{name}: an argument it cannot take: {other}")),
        }
    }
    for (param, default) in &definition.params {
        if !values.contains_key(param) {
            match default {
                Some(default) => values.insert(param.clone(), default.clone()),
                None => return Err(format!("{name}: no value for its parameter {param}")),
            };
        }
    }
    let mut body = definition.body.clone();
    let _ = body.visit(&mut Substitute(&values));
    Ok(Expr::Nested(Box::new(body)))
}

/// Replaces the parameters' names by their values (after the walk has passed them, so a
/// value that names a column of the same name is not replaced again).
struct Substitute<'a>(&'a HashMap<String, Expr>);

impl VisitorMut for Substitute<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Identifier(ident) = expr {
            if let Some(value) = self.0.get(&ident.value.to_ascii_lowercase()) {
                *expr = Expr::Nested(Box::new(value.clone()));
            }
        }
        ControlFlow::Continue(())
    }
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
    fn macros_expand_with_arguments_defaults_and_each_other() {
        let macros = UserMacros::default();
        for sql in [
            "CREATE MACRO add(a, b := 1) AS a + b",
            "CREATE MACRO twice(x) AS add(x, x)",
        ] {
            macros.define(&parse(sql)).unwrap().unwrap();
        }
        let mut statement = parse("SELECT add(a, 2), add(3) AS three, twice(a) FROM t");
        macros.expand(&mut statement).unwrap();
        assert_eq!(
            statement.to_string(),
            "SELECT ((a) + (2)) AS \"add(a, 2)\", ((3) + (1)) AS three, \
             ((((a)) + ((a)))) AS \"twice(a)\" FROM t"
        );
        assert!(macros
            .define(&parse("CREATE MACRO add(a) AS a"))
            .unwrap()
            .is_err());
        macros
            .define(&parse("CREATE OR REPLACE MACRO add(a) AS add(a)"))
            .unwrap()
            .unwrap();
        let error = macros.expand(&mut parse("SELECT add(1)")).unwrap_err();
        assert!(error.to_string().contains("calls itself"), "{error}");
        let table = macros.define(&parse("CREATE MACRO t() AS TABLE SELECT 1"));
        assert!(table.unwrap().is_err());
    }
}
