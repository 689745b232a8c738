//! DuckDB's SQL where DataFusion's differs, rewritten before DataFusion parses it:
//! `COPY ... TO 'target' (FORMAT parquet, PARTITION_BY (a))`, DuckDB's option list, becomes
//! DataFusion's `STORED AS PARQUET PARTITIONED BY (a)`, and `SUMMARIZE x` becomes
//! `CALL quiver_summarize('x')` (see `summarize`). `EXPLAIN COST <query>` is Quiver's own
//! and is answered before parsing (see `cost`). Other SQL passes through unchanged.

use datafusion::common::Result;
use datafusion::sql::sqlparser::dialect::{Dialect, DuckDbDialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Word};

/// DuckDB's functions that take a lambda, under any of their names.
const LAMBDA_FUNCTIONS: [&str; 10] = [
    "list_transform",
    "array_transform",
    "apply",
    "list_apply",
    "array_apply",
    "list_filter",
    "array_filter",
    "filter",
    "list_any_match",
    "array_any_match",
];

/// The dialect to parse `sql` in: DuckDB's where it writes a lambda (`lambda x : x + 1`,
/// or `x -> x + 1` beside a function that takes one), which only DuckDB's parser reads;
/// the generic one otherwise, where `->` is JSON's arrow (in DuckDB's, `j -> 'k'` would be
/// a lambda).
pub fn parser_dialect(sql: &str) -> Box<dyn Dialect> {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Box::new(GenericDialect {});
    };
    let is_word = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let lambda_keyword = tokens.iter().any(|t| is_word(t, Keyword::LAMBDA));
    let arrow_lambda = tokens.contains(&Token::Arrow)
        && tokens.iter().any(|t| {
            matches!(t, Token::Word(w) if LAMBDA_FUNCTIONS.iter().any(|f| w.value.eq_ignore_ascii_case(f)))
        });
    match lambda_keyword || arrow_lambda {
        true => Box::new(DuckDbDialect {}),
        false => Box::new(GenericDialect {}),
    }
}

/// The query after `EXPLAIN COST`, if `sql` starts so.
pub fn explain_cost(sql: &str) -> Option<&str> {
    fn keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
        let (head, rest) = text.trim_start().split_at_checked(word.len())?;
        (head.eq_ignore_ascii_case(word) && rest.starts_with(char::is_whitespace)).then_some(rest)
    }
    keyword(keyword(sql, "explain")?, "cost").map(str::trim_start)
}

/// DuckDB's option list after `TO 'target'` in DataFusion's words:
/// `(FORMAT parquet, PARTITION_BY (a, b))` becomes `STORED AS PARQUET PARTITIONED BY (a, b)`.
/// Other SQL passes through unchanged.
pub fn rewrite_duckdb_copy(sql: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let is_word =
        |t: &Token, k: Keyword| matches!(t, Token::Word(Word { keyword, .. }) if *keyword == k);
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    let mut in_copy = false;
    let mut depth = 0usize;
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::SemiColon => in_copy = false,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            t if is_word(t, Keyword::COPY) && depth == 0 => in_copy = true,
            _ => {}
        }
        out.push(token.to_string());
        i += 1;
        // After `TO 'target'` at the top level of a COPY, an option list in parentheses.
        if in_copy && depth == 0 && is_word(token, Keyword::TO) {
            let mut j = i;
            while matches!(tokens.get(j), Some(Token::Whitespace(_))) {
                j += 1;
            }
            let Some(Token::SingleQuotedString(_)) = tokens.get(j) else {
                continue;
            };
            let mut k = j + 1;
            while matches!(tokens.get(k), Some(Token::Whitespace(_))) {
                k += 1;
            }
            if !matches!(tokens.get(k), Some(Token::LParen)) {
                continue;
            }
            let Some((clauses, end)) = duckdb_options(&tokens, k) else {
                continue;
            };
            for t in &tokens[i..=j] {
                out.push(t.to_string());
            }
            out.push(format!(" {clauses}"));
            i = end + 1;
        }
    }
    out.concat()
}

/// DuckDB's tokens that DataFusion's parser lacks: `16_000` (digits grouped by `_`) is
/// 16000, `2 ** 3` is `2 ^ 3` (power, as `^` is here), `4!` is `factorial(4)`, and an
/// `ASOF [LEFT] JOIN` is in the words sqlparser reads (see `asof`). Other SQL passes through
/// unchanged, as written; a `POSITIONAL JOIN` is refused.
pub fn rewrite_duckdb_tokens(sql: &str) -> Result<String> {
    let Ok(mut tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Ok(sql.to_string());
    };
    super::asof::refuse_positional(&tokens)?;
    let asof = super::asof::written(&tokens);
    if asof {
        tokens = super::asof::for_the_parser(tokens);
    }
    let duckdb_only = asof
        || tokens.windows(2).any(|pair| match pair {
            [Token::Number(..), Token::Word(w)] => {
                w.quote_style.is_none() && w.value.starts_with('_')
            }
            [Token::Mul, Token::Mul] | [Token::Number(..), Token::ExclamationMark] => true,
            _ => false,
        });
    if !duckdb_only {
        return Ok(sql.to_string());
    }
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    while i < tokens.len() {
        let next = tokens.get(i + 1);
        match (&tokens[i], next) {
            (Token::Number(digits, long), Some(Token::Word(w)))
                if w.quote_style.is_none()
                    && w.value.starts_with('_')
                    && w.value.chars().all(|c| c == '_' || c.is_ascii_digit()) =>
            {
                out.push_str(digits);
                out.push_str(&w.value.replace('_', ""));
                if *long {
                    out.push('L');
                }
                i += 2;
            }
            (Token::Mul, Some(Token::Mul)) => {
                out.push('^');
                i += 2;
            }
            (Token::Number(digits, _), Some(Token::ExclamationMark)) => {
                out.push_str(&format!("factorial({digits})"));
                i += 2;
            }
            (token, _) => {
                out.push_str(&token.to_string());
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `SUMMARIZE <table or query>` as `CALL quiver_summarize('<table or query>')`, a statement
/// DataFusion parses; the session answers it.
pub fn rewrite_summarize(sql: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let mut out = String::with_capacity(sql.len());
    let mut at_start = true;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let summarize = matches!(token, Token::Word(w)
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("summarize"));
        if at_start && summarize {
            let end = tokens[i..]
                .iter()
                .position(|t| *t == Token::SemiColon)
                .map_or(tokens.len(), |n| i + n);
            let target: String = tokens[i + 1..end].iter().map(|t| t.to_string()).collect();
            out.push_str(&format!(
                "CALL quiver_summarize('{}')",
                target.trim().replace('\'', "''")
            ));
            i = end;
            continue;
        }
        match token {
            Token::SemiColon => at_start = true,
            Token::Whitespace(_) => {}
            _ => at_start = false,
        }
        out.push_str(&token.to_string());
        i += 1;
    }
    out
}

/// Parses `(KEY value, KEY (a, b), ...)` starting at `tokens[start]` (the `(`); returns the
/// DataFusion clauses and the index of the closing `)`.
fn duckdb_options(tokens: &[Token], start: usize) -> Option<(String, usize)> {
    let mut depth = 0;
    let mut end = start;
    for (index, token) in tokens.iter().enumerate().skip(start) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    end = index;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner: Vec<&Token> = tokens[start + 1..end]
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut clauses = Vec::new();
    let mut options = Vec::new();
    let mut rest = inner.as_slice();
    while let Some((key, tail)) = rest.split_first() {
        let key = match key {
            Token::Word(w) => w.value.to_ascii_uppercase(),
            _ => return None,
        };
        rest = tail;
        match key.as_str() {
            "PARTITION_BY" => {
                let (columns, tail) = parenthesized_or_one(rest)?;
                clauses.push(format!("PARTITIONED BY ({})", columns.join(", ")));
                rest = tail;
            }
            "FORMAT" => {
                let (value, tail) = rest.split_first()?;
                clauses.push(format!("STORED AS {}", plain(value)?.to_ascii_uppercase()));
                rest = tail;
            }
            other => {
                // A flag alone (`HEADER`) is true.
                let (value, tail) = match rest.split_first() {
                    None | Some((Token::Comma, _)) => ("true".to_string(), rest),
                    Some((value, tail)) => (plain(value)?, tail),
                };
                options.push(format!(
                    "'format.{}' '{}'",
                    other.to_ascii_lowercase(),
                    value.replace('\'', "''")
                ));
                rest = tail;
            }
        }
        if let Some((Token::Comma, tail)) = rest.split_first() {
            rest = tail;
        }
    }
    if !options.is_empty() {
        clauses.push(format!("OPTIONS ({})", options.join(", ")));
    }
    Some((clauses.join(" "), end))
}

fn parenthesized_or_one<'a>(tokens: &'a [&'a Token]) -> Option<(Vec<String>, &'a [&'a Token])> {
    match tokens.split_first()? {
        (Token::LParen, mut rest) => {
            let mut names = Vec::new();
            loop {
                let (token, tail) = rest.split_first()?;
                rest = tail;
                match token {
                    Token::RParen => return Some((names, rest)),
                    Token::Comma => {}
                    other => names.push(other.to_string()),
                }
            }
        }
        (one, rest) => Some((vec![one.to_string()], rest)),
    }
}

fn plain(token: &Token) -> Option<String> {
    match token {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        Token::Number(n, _) => Some(n.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::{
        Expr, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem, SetExpr, Statement,
    };
    use datafusion::sql::sqlparser::parser::Parser;

    /// The first select item of `sql`, parsed in the dialect `parser_dialect` picks.
    fn first_item(sql: &str) -> Expr {
        let statement = Parser::parse_sql(parser_dialect(sql).as_ref(), sql)
            .unwrap()
            .remove(0);
        let Statement::Query(query) = statement else {
            panic!("not a query")
        };
        let SetExpr::Select(select) = *query.body else {
            panic!("not a select")
        };
        match &select.projection[0] {
            SelectItem::UnnamedExpr(expr) => expr.clone(),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn lambdas_are_parsed_where_written_and_the_arrow_is_json_elsewhere() {
        let takes_lambda = |sql: &str| match first_item(sql) {
            Expr::Function(f) => matches!(&f.args, FunctionArguments::List(list)
                if list.args.iter().any(|a| matches!(a,
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Lambda(_)))))),
            _ => false,
        };
        assert!(takes_lambda("SELECT list_transform([1], lambda x : x + 1)"));
        assert!(takes_lambda("SELECT apply([1], x -> x + 1)"));
        assert!(matches!(
            first_item("SELECT j -> 'k' FROM t"),
            Expr::BinaryOp { .. }
        ));
    }

    #[test]
    fn explain_cost_is_found_in_any_case() {
        assert_eq!(explain_cost(" explain COST\n SELECT 1"), Some("SELECT 1"));
        assert_eq!(explain_cost("EXPLAIN SELECT cost FROM t"), None);
        assert_eq!(explain_cost("EXPLAIN costs"), None);
        assert_eq!(explain_cost("SELECT 1"), None);
    }

    #[test]
    fn duckdb_options_become_datafusion_clauses() {
        let sql =
            "COPY (SELECT a, b FROM t) TO 's3://b/out/' (FORMAT parquet, PARTITION_BY (a, b));";
        assert_eq!(
            rewrite_duckdb_copy(sql),
            "COPY (SELECT a, b FROM t) TO 's3://b/out/' STORED AS PARQUET PARTITIONED BY (a, b);"
        );
        assert_eq!(
            rewrite_duckdb_copy("COPY t TO 'o/' (FORMAT 'parquet', PARTITION_BY a)"),
            "COPY t TO 'o/' STORED AS PARQUET PARTITIONED BY (a)"
        );
        assert_eq!(
            rewrite_duckdb_copy("COPY t TO 'o.csv' (HEADER, DELIMITER '|')"),
            "COPY t TO 'o.csv' OPTIONS ('format.header' 'true', 'format.delimiter' '|')"
        );
        let untouched = "SELECT '(x)' AS to_do FROM t WHERE b IN (1, 2)";
        assert_eq!(rewrite_duckdb_copy(untouched), untouched);
    }

    #[test]
    fn duckdb_tokens_become_datafusion_s() {
        assert_eq!(
            rewrite_duckdb_tokens("SELECT 16_000, 1_000_000 * 2 ** 3, 4! FROM t").unwrap(),
            "SELECT 16000, 1000000 * 2 ^ 3, factorial(4) FROM t"
        );
        let untouched = "SELECT 'it''s ** 4!', a * b, \"x_1\" FROM t";
        assert_eq!(rewrite_duckdb_tokens(untouched).unwrap(), untouched);
    }

    #[test]
    fn summarize_becomes_a_call() {
        assert_eq!(
            rewrite_summarize("SET x = 1; SUMMARIZE 'data/*.parquet';"),
            "SET x = 1; CALL quiver_summarize('''data/*.parquet''');"
        );
        assert_eq!(
            rewrite_summarize("summarize SELECT a FROM t"),
            "CALL quiver_summarize('SELECT a FROM t')"
        );
        let untouched = "SELECT summarize FROM t";
        assert_eq!(rewrite_summarize(untouched), untouched);
    }
}
