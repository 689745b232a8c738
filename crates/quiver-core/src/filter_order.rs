//! Cheap conjuncts first in every filter. DataFusion evaluates `a AND b` by evaluating `a`
//! on every row and then `b` only on the rows `a` kept when it kept a fifth or fewer
//! (its pre-selection); otherwise `b` too runs on every row. So the order of a filter's
//! conjuncts, which DataFusion keeps as the query wrote them, decides how many rows each
//! costs. TPC-H Q12 writes `l_shipmode IN ('MAIL', 'SHIP')` (two string comparisons per
//! row, 28% kept) and two column-to-column comparisons before its date range (one integer
//! comparison each, 14% kept together): evaluated first, the range leaves the rest a
//! seventh of the rows.
//!
//! What moves to the front: a primitive column (number, date, time, decimal, boolean)
//! compared with a literal or in a list of literals, or tested for null. These cannot fail,
//! and the other conjuncts keep their order, so a conjunct that guards another (`x <> 0
//! AND 10 / x > 1`) still comes first and sees no more rows than before.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, Literal,
};
use datafusion::physical_expr::{conjunction, split_conjunction, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::ExecutionPlan;

/// The rule: every `FilterExec`'s cheap conjuncts first.
#[derive(Debug)]
pub struct CheapConjunctsFirst;

impl PhysicalOptimizerRule for CheapConjunctsFirst {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let schema = filter.input().schema();
            match cheap_first(filter.predicate(), &schema) {
                Some(predicate) => {
                    let reordered = FilterExecBuilder::from(filter)
                        .with_predicate(predicate)
                        .build()?;
                    Ok(Transformed::yes(
                        Arc::new(reordered) as Arc<dyn ExecutionPlan>
                    ))
                }
                None => Ok(Transformed::no(node)),
            }
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

/// A primitive column compared with a literal, in a list of literals, or tested for null.
fn is_cheap(conjunct: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
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

    fn date(days: i32) -> datafusion::common::ScalarValue {
        datafusion::common::ScalarValue::Date32(Some(days))
    }
}
