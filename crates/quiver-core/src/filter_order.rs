//! Cheap conjuncts first in every filter. DataFusion evaluates `a AND b` by evaluating `a`
//! on every row and then `b` only on the rows `a` kept when it kept a fifth or fewer
//! (its pre-selection); otherwise `b` too runs on every row. So the order of a filter's
//! conjuncts, which DataFusion keeps as the query wrote them, decides how many rows each
//! costs. TPC-H Q12 writes `l_shipmode IN ('MAIL', 'SHIP')` (two string comparisons per
//! row, 28% kept) and two column-to-column comparisons before its date range (one integer
//! comparison each, 14% kept together): evaluated first, the range leaves the rest a
//! seventh of the rows.
//!
//! A LIKE of several segments (`'%special%requests%'`), which arrow-rs matches with a
//! regular expression, is preceded by a substring search for each segment (`'%special%'`,
//! memchr's), so that the expression runs only where all of them are found: Q13's NOT LIKE
//! over 1.5 million comments then runs on the 1.4% that hold both words.
//!
//! What moves to the front: a primitive column (number, date, time, decimal, boolean)
//! compared with a literal or in a list of literals, or tested for null. These cannot fail,
//! and the other conjuncts keep their order, so a conjunct that guards another (`x <> 0
//! AND 10 / x > 1`) still comes first and sees no more rows than before.
//!
//! The conjuncts, so ordered, then run in turn into one bitmap of kept rows (`in_turn`), not
//! as DataFusion's nested ANDs, and so do the parts of an OR (`quiver.conjuncts_in_turn`).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal,
};
use datafusion::physical_expr::{conjunction, split_conjunction, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::ExecutionPlan;

use crate::in_turn::InTurn;
use crate::options::QuiverOptions;

/// The rule: every `FilterExec`'s cheap conjuncts first, then its ANDs and ORs evaluated in
/// turn, each part on the rows the ones before left undecided (`InTurn`).
#[derive(Debug)]
pub struct CheapConjunctsFirst;

impl PhysicalOptimizerRule for CheapConjunctsFirst {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let in_turn = QuiverOptions::of(config).conjuncts_in_turn;
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let schema = filter.input().schema();
            let searched = segments_searched_first(filter.predicate())?;
            let predicate = searched.as_ref().unwrap_or(filter.predicate());
            let ordered = cheap_first(predicate, &schema).or(searched);
            let predicate = ordered.as_ref().unwrap_or(filter.predicate());
            let taken_in_turn = match in_turn {
                true => InTurn::of(predicate)?,
                false => None,
            };
            let predicate = match (taken_in_turn, ordered) {
                (Some(taken_in_turn), _) => taken_in_turn,
                (None, Some(ordered)) => ordered,
                (None, None) => return Ok(Transformed::no(node)),
            };
            let evaluated_in_order = FilterExecBuilder::from(filter)
                .with_predicate(predicate)
                .build()?;
            Ok(Transformed::yes(
                Arc::new(evaluated_in_order) as Arc<dyn ExecutionPlan>
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "cheap_conjuncts_first"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `predicate` with its cheap conjuncts first, or `None` when that is its order already.
fn cheap_first(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Option<Arc<dyn PhysicalExpr>> {
    let conjuncts = split_conjunction(predicate);
    let (cheap, rest): (Vec<&Arc<dyn PhysicalExpr>>, Vec<_>) =
        conjuncts.iter().copied().partition(|c| is_cheap(c, schema));
    // Already in order: every cheap one before every other.
    if conjuncts[..cheap.len()].iter().all(|c| is_cheap(c, schema)) {
        return None;
    }
    Some(conjunction(cheap.into_iter().chain(rest).map(Arc::clone)))
}

/// `predicate` with each LIKE of several segments preceded by a search for each segment,
/// or `None` when it has no such LIKE.
fn segments_searched_first(
    predicate: &Arc<dyn PhysicalExpr>,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut changed = false;
    let mut conjuncts = Vec::new();
    for conjunct in split_conjunction(predicate) {
        match searches(conjunct)? {
            Some(expanded) => {
                changed = true;
                conjuncts.push(expanded);
            }
            None => conjuncts.push(Arc::clone(conjunct)),
        }
    }
    Ok(changed.then(|| conjunction(conjuncts)))
}

/// For `s LIKE '%a%b%'`: `s LIKE '%a%' AND s LIKE '%b%' AND s LIKE '%a%b%'`; for NOT LIKE,
/// `s NOT LIKE '%a%' OR s NOT LIKE '%b%' OR s NOT LIKE '%a%b%'` (not holding a segment
/// implies not matching). Only case-sensitive patterns that start and end with `%` and hold
/// no `_` or escape; nulls stay null either way.
fn searches(conjunct: &Arc<dyn PhysicalExpr>) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let Some(like) = conjunct.downcast_ref::<LikeExpr>() else {
        return Ok(None);
    };
    let Some(pattern) = like.pattern().downcast_ref::<Literal>() else {
        return Ok(None);
    };
    let text = match pattern.value() {
        ScalarValue::Utf8(Some(t))
        | ScalarValue::Utf8View(Some(t))
        | ScalarValue::LargeUtf8(Some(t)) => t,
        _ => return Ok(None),
    };
    let segments: Vec<&str> = text.split('%').filter(|s| !s.is_empty()).collect();
    let plain = text.len() > 2
        && text.starts_with('%')
        && text.ends_with('%')
        && !text.contains(['_', '\\']);
    if like.case_insensitive() || !plain || segments.len() < 2 {
        return Ok(None);
    }
    let same_type = |t: String| match pattern.value() {
        ScalarValue::Utf8View(_) => ScalarValue::Utf8View(Some(t)),
        ScalarValue::LargeUtf8(_) => ScalarValue::LargeUtf8(Some(t)),
        _ => ScalarValue::Utf8(Some(t)),
    };
    let negated = like.negated();
    let mut checks: Vec<Arc<dyn PhysicalExpr>> = segments
        .iter()
        .map(|segment| {
            let contains = Arc::new(Literal::new(same_type(format!("%{segment}%"))));
            Arc::new(LikeExpr::new(
                negated,
                false,
                Arc::clone(like.expr()),
                contains,
            )) as _
        })
        .collect();
    checks.push(Arc::clone(conjunct));
    let join = if negated { Operator::Or } else { Operator::And };
    let mut checks = checks.into_iter();
    let first = checks.next().expect("two segments at least");
    Ok(Some(checks.fold(first, |all, next| {
        Arc::new(BinaryExpr::new(all, join, next)) as _
    })))
}

/// A primitive column compared with a literal, in a list of literals, or tested for null.
pub(crate) fn is_cheap(conjunct: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    let primitive_column = |e: &Arc<dyn PhysicalExpr>| {
        e.downcast_ref::<Column>()
            .and_then(|c| schema.fields().get(c.index()))
            .is_some_and(|f| is_primitive(f.data_type()))
    };
    let literal = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().is_some();
    if let Some(binary) = conjunct.downcast_ref::<BinaryExpr>() {
        let comparison = matches!(
            binary.op(),
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
        );
        let (l, r) = (binary.left(), binary.right());
        return comparison
            && ((primitive_column(l) && literal(r)) || (literal(l) && primitive_column(r)));
    }
    if let Some(list) = conjunct.downcast_ref::<InListExpr>() {
        return primitive_column(list.expr()) && list.list().iter().all(literal);
    }
    if let Some(test) = conjunct.downcast_ref::<IsNullExpr>() {
        return primitive_column(test.arg());
    }
    if let Some(test) = conjunct.downcast_ref::<IsNotNullExpr>() {
        return primitive_column(test.arg());
    }
    false
}

fn is_primitive(data_type: &DataType) -> bool {
    data_type.is_numeric() || data_type.is_temporal() || matches!(data_type, DataType::Boolean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};

    #[test]
    fn a_range_on_a_date_goes_before_strings_and_column_comparisons() {
        let schema = Schema::new(vec![
            Field::new("mode", DataType::Utf8, true),
            Field::new("shipped", DataType::Date32, true),
            Field::new("received", DataType::Date32, true),
        ]);
        let c = |name| col(name, &schema).unwrap();
        let cmp = |l, op, r| binary(l, op, r, &schema).unwrap();
        let modes = in_list(c("mode"), vec![lit("MAIL"), lit("SHIP")], &false, &schema).unwrap();
        let order = cmp(c("shipped"), Operator::Lt, c("received"));
        let from = cmp(c("received"), Operator::GtEq, lit(date(8766)));
        let until = cmp(lit(date(9131)), Operator::Gt, c("received"));
        let predicate = conjunction([modes, order, Arc::clone(&from), until]);

        let reordered = cheap_first(&predicate, &schema).unwrap();
        let names: Vec<String> = split_conjunction(&reordered)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "received@2 >= 1994-01-01",
                "1995-01-01 > received@2",
                "mode@0 IN (SET) ([MAIL, SHIP])",
                "shipped@1 < received@2",
            ]
        );
        // In order already: left alone.
        assert!(cheap_first(&reordered, &schema).is_none());
        assert!(cheap_first(&from, &schema).is_none());
    }

    #[test]
    fn a_like_of_several_segments_searches_each_first() {
        let schema = Schema::new(vec![Field::new("comment", DataType::Utf8View, true)]);
        let c = col("comment", &schema).unwrap();
        let like = |negated, pattern: &str| {
            Arc::new(LikeExpr::new(
                negated,
                false,
                Arc::clone(&c),
                lit(ScalarValue::Utf8View(Some(pattern.into()))),
            )) as Arc<dyn PhysicalExpr>
        };
        let not_like = like(true, "%special%requests%");
        let searched = segments_searched_first(&not_like).unwrap().unwrap();
        assert_eq!(
            searched.to_string(),
            "comment@0 NOT LIKE %special% OR comment@0 NOT LIKE %requests% \
             OR comment@0 NOT LIKE %special%requests%"
        );
        let searched = segments_searched_first(&like(false, "%a%b%"))
            .unwrap()
            .unwrap();
        assert_eq!(split_conjunction(&searched).len(), 3);
        // One segment (memchr already), an anchored start, `_`: left alone.
        for pattern in ["%special%", "special%requests%", "%spe_ial%requests%"] {
            assert!(segments_searched_first(&like(false, pattern))
                .unwrap()
                .is_none());
        }
        // The same answers, nulls included.
        use datafusion::arrow::array::{BooleanArray, StringViewArray};
        use datafusion::arrow::record_batch::RecordBatch;
        let comments = StringViewArray::from(vec![
            Some("special requests"),
            Some("requests special"),
            Some("special"),
            None,
            Some("x special y requests z"),
        ]);
        let batch =
            RecordBatch::try_new(Arc::new(schema.clone()), vec![Arc::new(comments)]).unwrap();
        for original in [
            like(true, "%special%requests%"),
            like(false, "%special%requests%"),
        ] {
            let rewritten = segments_searched_first(&original).unwrap().unwrap();
            let answer = |e: &Arc<dyn PhysicalExpr>| {
                let out = e.evaluate(&batch).unwrap().into_array(5).unwrap();
                out.as_any().downcast_ref::<BooleanArray>().unwrap().clone()
            };
            assert_eq!(answer(&rewritten), answer(&original));
        }
    }

    fn date(days: i32) -> datafusion::common::ScalarValue {
        datafusion::common::ScalarValue::Date32(Some(days))
    }
}
