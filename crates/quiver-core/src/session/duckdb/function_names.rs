//! DuckDB's function names that DataFusion lacks, written as DataFusion expressions before
//! planning: a table of macros (`macros`), as DuckDB defines many of its own functions. `year(d)`
//! becomes `CAST(date_part('year', d) AS BIGINT)`, `count_if(c)` a `count` of a CASE, and so
//! on. A select item whose meaning DuckDB's rules change (a call expanded here, or `/`, `//`
//! or `^`, which `operators` plans) is named by its SQL text, as DuckDB names it (`year(d)`,
//! `7 / 2`), not by DataFusion's name for the expansion (which drops casts, so `7 / 2` and
//! `7 // 2` would be one name twice). Calls with a window, FILTER or ORDER BY of their own are left alone, as are
//! calls with another number of arguments (DataFusion then says the function is unknown).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, ObjectNamePart, Select, SelectItem, UnaryOperator, Value,
    ValueWithSpan, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::parser::Parser;

use super::dialect::parser_dialect;
use super::macros::MACROS;

/// Expands every DuckDB-only call of `statement` (see the module's comment).
pub fn expand_duckdb_functions<V: VisitMut>(statement: &mut V) {
    struct Expander;
    impl VisitorMut for Expander {
        type Break = ();
        // Before the calls inside are expanded: the name is the text the user wrote.
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            for item in &mut select.projection {
                if let SelectItem::UnnamedExpr(expr) = item {
                    // Expanded on a copy only to see whether it changes: the walk goes on
                    // into the item and expands it, once.
                    let mut expanded = expr.clone();
                    let _ = expanded.visit(&mut Expander);
                    if expanded != *expr || has_duckdb_operator(expr) {
                        *item = SelectItem::ExprWithAlias {
                            alias: Ident::with_quote('"', expr.to_string()),
                            expr: expr.clone(),
                        };
                    }
                }
            }
            ControlFlow::Continue(())
        }
        // After the arguments: they are expanded already.
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::Function(function) = expr {
                if let Some(expanded) = expansion(function) {
                    *expr = expanded;
                }
            }
            // `~x`, DuckDB's bitwise NOT, which DataFusion lacks: x XOR -1.
            if let Expr::UnaryOp {
                op: UnaryOperator::BitwiseNot,
                expr: operand,
            } = expr
            {
                *expr = Expr::Nested(Box::new(Expr::BinaryOp {
                    left: operand.clone(),
                    op: BinaryOperator::PGBitwiseXor,
                    right: Box::new(Expr::value(Value::Number("-1".into(), false))),
                }));
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Expander);
}

/// Whether `expr` uses an operator whose meaning DuckDB's rules change (see `operators`).
fn has_duckdb_operator(expr: &Expr) -> bool {
    let found = visit_expressions(expr, |e| match e {
        Expr::BinaryOp {
            op:
                BinaryOperator::Divide
                | BinaryOperator::DuckIntegerDivide
                | BinaryOperator::MyIntegerDivide
                | BinaryOperator::BitwiseXor,
            ..
        } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    found.is_break()
}

/// The DataFusion expression for a DuckDB-only call, if it is one.
fn expansion(function: &Function) -> Option<Expr> {
    let [ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else {
        return None;
    };
    if function.over.is_some() || function.filter.is_some() || !function.within_group.is_empty() {
        return None;
    }
    if let Some(call) = struct_call(&name.value.to_ascii_lowercase(), &function.args) {
        return Some(call);
    }
    let mut args = plain_args(&function.args)?;
    if name.value.eq_ignore_ascii_case("xor") {
        // `^` is power in DuckDB (see `operators`); XOR is the operator `#` parses to.
        let [left, right] = <[Expr; 2]>::try_from(args).ok()?;
        return Some(Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(left),
            op: BinaryOperator::PGBitwiseXor,
            right: Box::new(right),
        })));
    }
    if ["date_diff", "datediff"]
        .iter()
        .any(|n| name.value.eq_ignore_ascii_case(n))
    {
        return date_diff(&args);
    }
    if ["date_sub", "datesub"]
        .iter()
        .any(|n| name.value.eq_ignore_ascii_case(n))
    {
        return date_sub(&args);
    }
    if name.value.eq_ignore_ascii_case("regexp_extract") {
        if let Some(call) = regexp_extract(&mut args) {
            return Some(call);
        }
    }
    // strptime(text, ['%d/%m/%Y', '%m/%d/%Y']): the formats tried in turn, which
    // to_timestamp takes as its arguments after the text.
    if name.value.eq_ignore_ascii_case("strptime") {
        if let [_, Expr::Array(formats)] = args.as_slice() {
            let formats = formats.elem.clone();
            args.truncate(1);
            args.extend(formats);
        }
    }
    let (_, _, template) = MACROS.iter().find(|(macro_name, arity, _)| {
        name.value.eq_ignore_ascii_case(macro_name) && arity.is_none_or(|n| n == args.len())
    })?;
    let all = args
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = template.replace("$*", &all);
    // From the highest: `$1` must not take the start of `$10`.
    for (index, arg) in args.iter().enumerate().rev() {
        // A lambda stays bare: DataFusion takes one only as an argument itself.
        let arg = match arg {
            Expr::Lambda(_) => arg.to_string(),
            _ => format!("({arg})"),
        };
        text = text.replace(&format!("${}", index + 1), &arg);
    }
    parsed(&text)
}

/// `text` parsed as one expression, in parentheses.
fn parsed(text: &str) -> Option<Expr> {
    let parsed = Parser::new(parser_dialect(text).as_ref())
        .try_with_sql(text)
        .and_then(|mut parser| parser.parse_expr())
        .ok()?;
    Some(Expr::Nested(Box::new(parsed)))
}

/// A string literal's text.
fn literal_text(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(text),
            ..
        }) => Some(text),
        _ => None,
    }
}

/// `date_sub('part', start, end)`: how many whole parts lie between (`date_sub('hour',
/// '23:59:59', '01:58:00' the next day)` is 1), for the parts of fixed length.
fn date_sub(args: &[Expr]) -> Option<Expr> {
    let [part, start, end] = args else {
        return None;
    };
    let seconds = match literal_text(part)?.to_lowercase().trim_end_matches('s') {
        "week" => 604_800.0,
        "day" => 86_400.0,
        "hour" => 3_600.0,
        "minute" => 60.0,
        "second" => 1.0,
        "millisecond" => 1e-3,
        "microsecond" => 1e-6,
        _ => return None,
    };
    parsed(&format!(
        "CAST(trunc((date_part('epoch', ({end})) - date_part('epoch', ({start}))) / {seconds}) AS BIGINT)"
    ))
}

/// `regexp_extract(text, pattern [, group or names] [, options])` where the macros' forms do
/// not reach: options ('i' case-insensitive, 'c' sensitive) go into the pattern, and a
/// list of names gives a struct of the groups by those names.
fn regexp_extract(args: &mut Vec<Expr>) -> Option<Expr> {
    if args.len() >= 3 {
        if let Some(options) = literal_text(&args[args.len() - 1]).map(str::to_string) {
            let flags = match options.as_str() {
                "i" => "(?i)",
                "c" | "" => "",
                _ => return None,
            };
            args.pop();
            args[1] = parsed(&format!("'{flags}' || ({})", args[1]))?;
        }
    }
    let Some(Expr::Array(names)) = args.get(2) else {
        return None; // the macros take the rest
    };
    let (text, pattern) = (&args[0], &args[1]);
    let mut fields = vec![];
    for (group, name) in names.elem.iter().enumerate() {
        let name = literal_text(name)?.replace('\'', "''");
        fields.push(format!(
            "'{name}', CASE WHEN ({text}) IS NOT NULL THEN \
             coalesce(regexp_match(({text}), '(' || ({pattern}) || ')')[{}], '') END",
            group + 2
        ));
    }
    parsed(&format!("named_struct({})", fields.join(", ")))
}

/// DuckDB's struct calls with named arguments (`name := value`), which DataFusion's calls
/// cannot take: `struct_pack(i := 4)` is `named_struct('i', 4)`, and `struct_insert(s, b
/// := 2)` and `struct_update(s, a := 2)` pass theirs as such a struct.
fn struct_call(name: &str, args: &FunctionArguments) -> Option<Expr> {
    let FunctionArguments::List(list) = args else {
        return None;
    };
    let mut positional = vec![];
    let mut named = vec![];
    for arg in &list.args {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => positional.push(expr.to_string()),
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(expr),
                ..
            } => named.push(format!("'{}', {expr}", name.value.replace('\'', "''"))),
            _ => return None,
        }
    }
    if named.is_empty() {
        return None;
    }
    let fields = format!("named_struct({})", named.join(", "));
    match (name, positional.as_slice()) {
        ("struct_pack", []) => parsed(&fields),
        ("struct_insert", [target]) => parsed(&format!("struct_concat({target}, {fields})")),
        ("struct_update", [target]) => parsed(&format!("struct_update({target}, {fields})")),
        _ => None,
    }
}

/// `date_diff('part', start, end)`: how many boundaries of `part` lie between, as DuckDB
/// counts them (`date_diff('hour', '23:59:59', '01:58:00' the next day)` is 2). Only for a
/// part written as a literal that is known here, so that another is refused, never NULL.
fn date_diff(args: &[Expr]) -> Option<Expr> {
    let [Expr::Value(part), start, end] = args else {
        return None;
    };
    let datafusion::sql::sqlparser::ast::Value::SingleQuotedString(part) = &part.value else {
        return None;
    };
    let part = part.to_lowercase();
    let since_epoch = |unit: &str, seconds: u32| {
        format!(
            "(date_part('epoch', date_trunc('{unit}', $E)) - \
             date_part('epoch', date_trunc('{unit}', $S))) / {seconds}"
        )
    };
    let in_units = |unit: &str, per_year: u32| {
        format!(
            "(date_part('year', $E) * {per_year} + date_part('{unit}', $E)) - \
             (date_part('year', $S) * {per_year} + date_part('{unit}', $S))"
        )
    };
    let difference = match part.trim_end_matches('s') {
        "year" => "date_part('year', $E) - date_part('year', $S)".to_string(),
        "quarter" => in_units("quarter", 4),
        "month" => in_units("month", 12),
        "day" => since_epoch("day", 86_400),
        "hour" => since_epoch("hour", 3_600),
        "minute" => since_epoch("minute", 60),
        "second" => since_epoch("second", 1),
        _ => return None,
    };
    let text = format!("CAST(({difference}) AS BIGINT)")
        .replace("$S", &format!("({start})"))
        .replace("$E", &format!("({end})"));
    parsed(&text)
}

/// The arguments of a call with positional arguments only, and no DISTINCT, ORDER BY or
/// other clause inside its parentheses.
fn plain_args(args: &FunctionArguments) -> Option<Vec<Expr>> {
    let list = match args {
        FunctionArguments::None => return Some(vec![]),
        FunctionArguments::List(list) if list.duplicate_treatment.is_none() => list,
        _ => return None,
    };
    if !list.clauses.is_empty() {
        return None;
    }
    list.args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn expanded(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        expand_duckdb_functions(&mut statement);
        statement.to_string()
    }

    #[test]
    fn duckdb_only_calls_expand_and_keep_their_names() {
        assert_eq!(
            expanded("SELECT strlen(s), year(d) + 1 AS y FROM t WHERE count_if(b) > 0"),
            "SELECT (octet_length((s))) AS \"strlen(s)\", \
             (CAST(date_part('year', (d)) AS BIGINT)) + 1 AS y FROM t \
             WHERE (count(CASE WHEN (b) THEN 1 END)) > 0"
        );
        // A macro that wraps DataFusion's function of the same name expands once.
        assert_eq!(
            expanded("SELECT sha256('a')"),
            "SELECT (encode(sha256(('a')), 'hex')) AS \"sha256('a')\""
        );
        // Named arguments make a struct; a regexp's options go into its pattern.
        assert_eq!(
            expanded("SELECT struct_insert(s, b := 2) AS x, ~c AS y"),
            "SELECT (struct_concat(s, named_struct('b', 2))) AS x, (c # -1) AS y"
        );
        assert_eq!(
            expanded("SELECT regexp_extract(t, 'a(b)', ['x'], 'i') AS r"),
            "SELECT (named_struct('x', CASE WHEN (t) IS NOT NULL THEN \
             coalesce(regexp_match((t), '(' || (('(?i)' || ('a(b)'))) || ')')[2], '') END)) AS r"
        );
        assert_eq!(
            expanded("SELECT xor(2, 3) AS x, list_value(1, 2) AS l"),
            "SELECT (2 # 3) AS x, (make_array(1, 2)) AS l"
        );
        // Named as written: DataFusion would name both `Int64(7) / Int64(2)`.
        assert_eq!(
            expanded("SELECT 7 / 2, 7 // 2, a FROM t"),
            "SELECT 7 / 2 AS \"7 / 2\", 7 // 2 AS \"7 // 2\", a FROM t"
        );
    }

    #[test]
    fn other_calls_and_other_arities_are_left_alone() {
        // date_diff of a part not known here stays unknown rather than NULL.
        let sql =
            "SELECT year(d, 1), upper(s), first(x) OVER (), date_diff('fortnight', a, b) FROM t";
        assert_eq!(expanded(sql), sql);
    }
}
