//! DuckDB's samples: `FROM t USING SAMPLE 10%`, `FROM t TABLESAMPLE 10 ROWS`,
//! `reservoir(50 ROWS)`, `10 PERCENT (bernoulli)`. DataFusion parses a `TABLESAMPLE` but
//! plans the table whole, a silent full answer; so a sampled table becomes a subquery that
//! samples it: a percentage keeps each row with that chance (`random() < p`, Bernoulli), a
//! number of rows keeps that many chosen at random (`ORDER BY random() LIMIT n`, as a
//! reservoir would). Two steps: the text first (`USING SAMPLE` after a single table is
//! that table's `TABLESAMPLE`; `10%` is `10 PERCENT`; the method's name goes), then the
//! parsed statement. A seed (`REPEATABLE (n)`) is not kept: each run samples anew. A sample
//! of a join (`USING SAMPLE` after several tables) does not parse, and any other sample
//! (`BUCKET`, `OFFSET`) is refused: never a whole table in a sample's place.

use std::ops::ControlFlow;

use datafusion::common::{plan_err, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, ObjectNamePart, Query, SetExpr, Statement, TableFactor, TableSampleKind, TableSampleUnit,
    VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

const METHODS: [&str; 3] = ["reservoir", "bernoulli", "system"];

/// `sql` with DuckDB's sample clauses in the form sqlparser reads (see the module's comment).
pub fn rewrite_sample_clauses(sql: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let word = |i: usize, text: &str| matches!(tokens.get(i), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text));
    if !(0..tokens.len()).any(|i| word(i, "sample") || word(i, "tablesample")) {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    while i < tokens.len() {
        let using_sample = word(i, "using")
            && word(next_solid(&tokens, i + 1), "sample")
            && from_is_one_table(&tokens, i);
        let sample_at = match using_sample {
            true => Some(next_solid(&tokens, i + 1)),
            false => word(i, "tablesample").then_some(i),
        };
        if let Some((quantity, end)) = sample_at.and_then(|at| quantity(&tokens, at + 1)) {
            out.push_str(&format!("TABLESAMPLE ({quantity})"));
            i = end;
            continue;
        }
        out.push_str(&tokens[i].to_string());
        i += 1;
    }
    out
}

/// The index of the first token at or after `i` that is not whitespace.
fn next_solid(tokens: &[Token], mut i: usize) -> usize {
    while matches!(tokens.get(i), Some(Token::Whitespace(_))) {
        i += 1;
    }
    i
}

/// Whether the FROM clause before `tokens[at]` names one table: no join or comma between it
/// and its FROM at the same depth of parentheses.
fn from_is_one_table(tokens: &[Token], at: usize) -> bool {
    let mut depth = 0i32;
    for token in tokens[..at].iter().rev() {
        match token {
            Token::RParen => depth += 1,
            Token::LParen => depth -= 1,
            Token::Comma if depth == 0 => return false,
            Token::Word(w) if depth == 0 && w.keyword == Keyword::JOIN => return false,
            Token::Word(w) if depth == 0 && w.keyword == Keyword::FROM => return true,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    false
}

/// The sample's size as `N PERCENT` or `N ROWS`, from the tokens after the keyword:
/// `N%`, `N PERCENT`, `N ROWS` or a bare `N` (rows, as in DuckDB), optionally followed by
/// `(method)`, or `method(…)` around them; and the index after them. `None` for other forms.
fn quantity(tokens: &[Token], start: usize) -> Option<(String, usize)> {
    let mut i = next_solid(tokens, start);
    let is_method = |i: usize| matches!(tokens.get(i), Some(Token::Word(w)) if METHODS.iter().any(|m| w.value.eq_ignore_ascii_case(m)));
    let wrapped = is_method(i) && tokens.get(next_solid(tokens, i + 1)) == Some(&Token::LParen);
    if wrapped {
        i = next_solid(tokens, next_solid(tokens, i + 1) + 1);
    } else if tokens.get(i) == Some(&Token::LParen) {
        return None;
    }
    let Some(Token::Number(number, _)) = tokens.get(i) else {
        return None;
    };
    i = next_solid(tokens, i + 1);
    let unit = match tokens.get(i) {
        Some(Token::Mod) => "PERCENT",
        Some(Token::Word(w)) if w.keyword == Keyword::PERCENT => "PERCENT",
        Some(Token::Word(w)) if w.keyword == Keyword::ROWS => "ROWS",
        _ => {
            i -= 1;
            "ROWS"
        }
    };
    i = next_solid(tokens, i + 1);
    if wrapped {
        (tokens.get(i) == Some(&Token::RParen)).then_some(())?;
        i += 1;
    } else if tokens.get(i) == Some(&Token::LParen) && is_method(next_solid(tokens, i + 1)) {
        let close = next_solid(tokens, next_solid(tokens, i + 1) + 1);
        (tokens.get(close) == Some(&Token::RParen)).then_some(())?;
        i = close + 1;
    }
    Some((format!("{number} {unit}"), i))
}

/// Every sampled table of `statement` as a subquery that samples it.
pub fn sample_tables(statement: &mut Statement) -> Result<()> {
    struct Sampler(Option<datafusion::error::DataFusionError>);
    impl VisitorMut for Sampler {
        type Break = ();
        fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            match sampled(factor) {
                Ok(Some(subquery)) => *factor = subquery,
                Ok(None) => {}
                Err(error) => {
                    self.0 = Some(error);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut sampler = Sampler(None);
    let _ = statement.visit(&mut sampler);
    sampler.0.map_or(Ok(()), Err)
}

/// The subquery that samples `factor`, if it has a sample.
fn sampled(factor: &mut TableFactor) -> Result<Option<TableFactor>> {
    let TableFactor::Table {
        name,
        alias,
        sample,
        ..
    } = factor
    else {
        return Ok(None);
    };
    let Some(kind) = sample.take() else {
        return Ok(None);
    };
    let (TableSampleKind::BeforeTableAlias(spec) | TableSampleKind::AfterTableAlias(spec)) = kind;
    let quantity = match (&spec.quantity, &spec.bucket, &spec.offset) {
        (Some(quantity), None, None) => quantity,
        _ => return plan_err!("this sample is not supported: {spec}; sample 10% or 10 ROWS"),
    };
    let value = match &quantity.value {
        Expr::Value(v) => v.to_string(),
        other => return plan_err!("a sample's size must be a number, not {other}"),
    };
    let keep = match quantity.unit {
        Some(TableSampleUnit::Rows) | None => format!("ORDER BY random() LIMIT {value}"),
        Some(TableSampleUnit::Percent) => format!("WHERE random() < {value} / 100.0"),
    };
    let named = match alias.take() {
        Some(alias) => alias.name.to_string(),
        None => match name.0.last() {
            Some(ObjectNamePart::Identifier(ident)) => {
                let stem = ident.value.rsplit('/').next().unwrap_or_default();
                let stem = stem.split('.').next().unwrap_or_default();
                format!("\"{}\"", stem.replace('"', "\"\""))
            }
            _ => "sampled".to_string(),
        },
    };
    let text = format!("SELECT * FROM (SELECT * FROM {factor} {keep}) AS {named}");
    let parsed = Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut parser| parser.parse_query())
        .map_err(|e| datafusion::error::DataFusionError::Plan(format!("sample: {e}")))?;
    Ok(first_factor(*parsed))
}

fn first_factor(query: Query) -> Option<TableFactor> {
    match *query.body {
        SetExpr::Select(select) => select.from.into_iter().next().map(|t| t.relation),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckdb_sample_clauses_become_tablesample_sizes() {
        let cases = [
            (
                "SELECT * FROM t USING SAMPLE 10%",
                "SELECT * FROM t TABLESAMPLE (10 PERCENT)",
            ),
            (
                "FROM t USING SAMPLE reservoir(50 ROWS) REPEATABLE (1)",
                "FROM t TABLESAMPLE (50 ROWS) REPEATABLE (1)",
            ),
            (
                "FROM t TABLESAMPLE 10 PERCENT (bernoulli)",
                "FROM t TABLESAMPLE (10 PERCENT)",
            ),
            ("FROM t USING SAMPLE 7", "FROM t TABLESAMPLE (7 ROWS)"),
            // A join's sample is not one table's: left to fail as it is written.
            (
                "FROM a JOIN b USING (k) USING SAMPLE 1%",
                "FROM a JOIN b USING (k) USING SAMPLE 1%",
            ),
            ("SELECT sample FROM t", "SELECT sample FROM t"),
        ];
        for (sql, expected) in cases {
            assert_eq!(rewrite_sample_clauses(sql), expected, "{sql}");
        }
    }

    #[test]
    fn a_sampled_table_becomes_a_subquery_that_samples_it() {
        let parse = |sql: &str| {
            Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0)
        };
        let mut statement = parse("SELECT count(*) FROM 'd/hits.parquet' TABLESAMPLE (10 PERCENT)");
        sample_tables(&mut statement).unwrap();
        assert_eq!(
            statement.to_string(),
            "SELECT count(*) FROM (SELECT * FROM 'd/hits.parquet' WHERE random() < 10 / 100.0) AS \"hits\""
        );
        let mut statement =
            parse("SELECT u.x FROM 't.parquet' AS u TABLESAMPLE (5 ROWS) WHERE u.x > 0");
        sample_tables(&mut statement).unwrap();
        assert_eq!(
            statement.to_string(),
            "SELECT u.x FROM (SELECT * FROM 't.parquet' ORDER BY random() LIMIT 5) AS u WHERE u.x > 0"
        );
    }
}
