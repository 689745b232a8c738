//! DuckDB's ASOF joins: `t ASOF [LEFT] JOIN p ON t.k = p.k AND t.ts >= p.ts` pairs each row
//! of `t` with the one row of `p` of the same keys whose `ts` is the nearest at or before
//! its own (`<=`: at or after), or none. DataFusion has no such join, so it is written out in
//! three steps:
//!
//! 1. the text, in words sqlparser reads (`ASOF JOIN p MATCH_CONDITION ('left') ON …`,
//!    Snowflake's form, the join's kind carried in the match condition);
//! 2. the parsed statement: an inner or left join on the same condition, marked by a
//!    conjunct no other join has;
//! 3. the plan: the marked join's left rows numbered, the join's matches for each row ranked
//!    by the inequality's right side (nearest first), and the first kept.
//!
//! The matches of a row before the ranking are every earlier (or later) row of its keys,
//! so the work grows with keys that hold many rows on both sides; DuckDB merges sorted
//! sides instead.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::expr::Sort;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    col, BinaryExpr, Expr as PlanExpr, ExprFunctionExt, Join, LogicalPlan, LogicalPlanBuilder,
    Operator,
};
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, JoinConstraint, JoinOperator, Query, SetExpr, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::tokenizer::{Token, Whitespace, Word};

/// The conjunct that marks a join written from an ASOF join: a comparison of two equal
/// strings, true for every row, which no query writes.
const MARK: &str = "quiver: an asof join";

/// The left side's row numbers, and each match's rank.
const ROW: &str = "__quiver_asof_row";
const RANK: &str = "__quiver_asof_rank";

/// Whether `tokens` hold DuckDB's `ASOF` (unquoted).
pub fn written(tokens: &[Token]) -> bool {
    tokens.iter().any(|t| is_word(t, "asof"))
}

/// Refuses DuckDB's `POSITIONAL JOIN`, which pairs rows by their place in each table: Quiver's
/// scans read a file's buckets in parallel and keep no row's place, so it says what to write
/// instead (the parser alone would say "found: POSITIONAL").
pub fn refuse_positional(tokens: &[Token]) -> Result<()> {
    let written = tokens.iter().enumerate().any(|(i, token)| {
        is_word(token, "positional")
            && tokens
                .get(solid(tokens, i + 1))
                .is_some_and(|t| is_word(t, "join"))
    });
    match written {
        true => plan_err!(
            "POSITIONAL JOIN is not supported: Quiver reads a table's parts in parallel and \
             keeps no row's position. Join on a key, or number each side with \
             row_number() OVER (ORDER BY …) and join on the numbers"
        ),
        false => Ok(()),
    }
}

/// `tokens` with each `ASOF [LEFT [OUTER]] JOIN r ON|USING …` as
/// `ASOF JOIN r MATCH_CONDITION ('inner'|'left') ON|USING …` (step 1).
pub fn for_the_parser(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len() + 8);
    let mut i = 0;
    while i < tokens.len() {
        if !is_word(&tokens[i], "asof") {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        out.push(tokens[i].clone());
        let mut j = solid(&tokens, i + 1);
        let mut kind = "inner";
        if tokens.get(j).is_some_and(|t| is_word(t, "left")) {
            kind = "left";
            j = solid(&tokens, j + 1);
            if tokens.get(j).is_some_and(|t| is_word(t, "outer")) {
                j = solid(&tokens, j + 1);
            }
        }
        // Not a join after all (or not one we read): as written, for the parser to judge.
        if !tokens.get(j).is_some_and(|t| is_word(t, "join")) {
            i += 1;
            continue;
        }
        out.push(Token::Whitespace(Whitespace::Space));
        let mut depth = 0usize;
        let mut k = j;
        while k < tokens.len() {
            match &tokens[k] {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                t if depth == 0 && k > j && (is_word(t, "on") || is_word(t, "using")) => break,
                _ => {}
            }
            out.push(tokens[k].clone());
            k += 1;
        }
        if k < tokens.len() {
            out.extend([
                Token::make_keyword("MATCH_CONDITION"),
                Token::Whitespace(Whitespace::Space),
                Token::LParen,
                Token::SingleQuotedString(kind.to_string()),
                Token::RParen,
                Token::Whitespace(Whitespace::Space),
            ]);
        }
        i = k;
    }
    out
}

/// The statement's ASOF joins as marked inner or left joins (step 2).
pub fn marked_joins<V: VisitMut>(statement: &mut V) -> Result<()> {
    struct Marks(Result<()>);
    impl VisitorMut for Marks {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            let SetExpr::Select(select) = query.body.as_mut() else {
                return ControlFlow::Continue(());
            };
            for join in select.from.iter_mut().flat_map(|t| t.joins.iter_mut()) {
                if let Err(e) = mark(&mut join.join_operator) {
                    self.0 = Err(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut marks = Marks(Ok(()));
    let _ = statement.visit(&mut marks);
    marks.0
}

fn mark(operator: &mut JoinOperator) -> Result<()> {
    let JoinOperator::AsOf {
        match_condition,
        constraint,
    } = operator
    else {
        return Ok(());
    };
    let left = match match_condition {
        Expr::Value(v) => matches!(&v.value, Value::SingleQuotedString(s) if s == "left"),
        _ => false,
    };
    let JoinConstraint::On(condition) = constraint else {
        return plan_err!(
            "an ASOF join needs ON with its keys and one inequality \
             (ON t.key = p.key AND t.ts >= p.ts); USING and NATURAL are not supported"
        );
    };
    let text = |s: &str| Expr::value(Value::SingleQuotedString(s.to_string()));
    let marked = Expr::BinaryOp {
        left: Box::new(condition.clone()),
        op: BinaryOperator::And,
        right: Box::new(Expr::BinaryOp {
            left: Box::new(text(MARK)),
            op: BinaryOperator::Eq,
            right: Box::new(text(MARK)),
        }),
    };
    *operator = match left {
        true => JoinOperator::LeftOuter(JoinConstraint::On(marked)),
        false => JoinOperator::Inner(JoinConstraint::On(marked)),
    };
    Ok(())
}

/// `plan` with each marked join keeping, for each left row, its nearest match (step 3).
pub fn nearest_matches(plan: LogicalPlan) -> Result<LogicalPlan> {
    Ok(plan
        .transform_up(|node| match &node {
            LogicalPlan::Join(join) if join.filter.as_ref().is_some_and(is_marked) => {
                Ok(Transformed::yes(nearest(join)?))
            }
            _ => Ok(Transformed::no(node)),
        })?
        .data)
}

fn nearest(join: &Join) -> Result<LogicalPlan> {
    let filter = join.filter.as_ref().expect("a marked join has a filter");
    let conjuncts: Vec<PlanExpr> = split_conjunction(filter)
        .into_iter()
        .filter(|c| !is_mark(c))
        .cloned()
        .collect();
    let order = nearest_first(&conjuncts, join)?;
    let numbered = LogicalPlanBuilder::from(Arc::unwrap_or_clone(Arc::clone(&join.left)))
        .window(vec![row_number().alias(ROW)])?
        .build()?;
    let joined = LogicalPlan::Join(Join::try_new(
        Arc::new(numbered),
        Arc::clone(&join.right),
        join.on.clone(),
        conjunction(conjuncts),
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?);
    let rank = row_number()
        .partition_by(vec![col(ROW)])
        .order_by(vec![order])
        .build()?
        .alias(RANK);
    let columns = join.schema.columns().into_iter().map(PlanExpr::Column);
    LogicalPlanBuilder::from(joined)
        .window(vec![rank])?
        .filter(col(RANK).eq(PlanExpr::Literal(ScalarValue::UInt64(Some(1)), None)))?
        .project(columns)?
        .build()
}

/// The order of a left row's matches, nearest first: by the right side of the condition's
/// one inequality between the two sides, descending for `>=` and `>` (the latest at or
/// before), ascending for `<=` and `<`.
fn nearest_first(conjuncts: &[PlanExpr], join: &Join) -> Result<Sort> {
    let on = |expr: &PlanExpr, side: &LogicalPlan| {
        let columns = expr.column_refs();
        !columns.is_empty() && columns.iter().all(|c| side.schema().has_column(c))
    };
    let mut found = Vec::new();
    for conjunct in conjuncts {
        let PlanExpr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
            continue;
        };
        let later = match op {
            Operator::GtEq | Operator::Gt => true,
            Operator::LtEq | Operator::Lt => false,
            _ => continue,
        };
        if on(left, &join.left) && on(right, &join.right) {
            found.push(Sort::new(right.as_ref().clone(), !later, false));
        } else if on(left, &join.right) && on(right, &join.left) {
            found.push(Sort::new(left.as_ref().clone(), later, false));
        }
    }
    match <[Sort; 1]>::try_from(found) {
        Ok([order]) => Ok(order),
        Err(found) => plan_err!(
            "an ASOF join's ON needs exactly one inequality (>=, >, <= or <) between its two \
             sides, found {}",
            found.len()
        ),
    }
}

fn is_marked(filter: &PlanExpr) -> bool {
    split_conjunction(filter).into_iter().any(is_mark)
}

fn is_mark(expr: &PlanExpr) -> bool {
    let text = |e: &PlanExpr| match e {
        PlanExpr::Literal(ScalarValue::Utf8(Some(s)), _) => s == MARK,
        _ => false,
    };
    matches!(expr, PlanExpr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right })
        if text(left) && text(right))
}

fn is_word(token: &Token, text: &str) -> bool {
    matches!(token, Token::Word(Word { value, quote_style: None, .. }) if value.eq_ignore_ascii_case(text))
}

/// The index of the first token at or after `i` that is not whitespace.
fn solid(tokens: &[Token], mut i: usize) -> usize {
    while matches!(tokens.get(i), Some(Token::Whitespace(_))) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    /// The statement as the parser gets it, after the token rewrite.
    fn parsed(sql: &str) -> Statement {
        let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap();
        let text: String = for_the_parser(tokens)
            .iter()
            .map(|t| t.to_string())
            .collect();
        Parser::parse_sql(&GenericDialect {}, &text)
            .unwrap()
            .remove(0)
    }

    fn rewritten(sql: &str) -> String {
        let mut statement = parsed(sql);
        marked_joins(&mut statement).unwrap();
        statement.to_string()
    }

    #[test]
    fn asof_joins_become_marked_inner_and_left_joins() {
        assert_eq!(
            rewritten("SELECT * FROM t ASOF JOIN p ON t.k = p.k AND t.ts >= p.ts"),
            format!("SELECT * FROM t INNER JOIN p ON t.k = p.k AND t.ts >= p.ts AND '{MARK}' = '{MARK}'")
        );
        assert_eq!(
            rewritten(
                "SELECT * FROM t ASOF LEFT OUTER JOIN (SELECT * FROM q WHERE x IN (1, 2)) p \
                 ON p.ts <= t.ts"
            ),
            format!(
                "SELECT * FROM t LEFT OUTER JOIN (SELECT * FROM q WHERE x IN (1, 2)) p \
                 ON p.ts <= t.ts AND '{MARK}' = '{MARK}'"
            )
        );
        // A column named asof, quoted or not followed by a join, is left alone.
        assert_eq!(
            rewritten("SELECT \"asof\" FROM t"),
            "SELECT \"asof\" FROM t"
        );
    }

    #[test]
    fn using_is_refused_with_what_to_write_instead() {
        let mut statement = parsed("SELECT * FROM t ASOF JOIN p USING (k, ts)");
        let error = marked_joins(&mut statement).unwrap_err().to_string();
        assert!(error.contains("needs ON"), "{error}");
    }

    #[test]
    fn a_positional_join_is_refused_with_what_to_write_instead() {
        let tokens = |sql: &str| Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap();
        let refused = refuse_positional(&tokens("SELECT * FROM a POSITIONAL  JOIN b"));
        assert!(refused
            .unwrap_err()
            .to_string()
            .contains("row_number() OVER"));
        assert!(refuse_positional(&tokens("SELECT positional FROM a JOIN b USING (k)")).is_ok());
        assert!(refuse_positional(&tokens("SELECT 'positional join' FROM a")).is_ok());
    }
}
