//! Filters pushed into the scan: a `FilterExec`'s predicate, and the dynamic filters that
//! hash joins publish once their build side is in (its keys) and TopK publishes as its
//! threshold moves. The scan hands the Parquet decoder those that pay: the decoder then
//! decodes the filter's columns first and the other columns only for the rows that pass.
//!
//! What pays, measured on TPC-H SF 1 (docs/decisions.md): a join's filter that names its
//! keys, which DataFusion writes as IN lists when the build side has at most 150 distinct
//! keys per partition. Q17 then averages the quantities of 6 thousand lineitem rows instead
//! of 6 million (0.31 s to 0.20 s), and Q18 sums those of 57 orders. A filter that looks up
//! a big build side's hash table, or a static predicate over many rows (Q12's dates, Q13's
//! LIKE), cost up to a quarter more there: evaluated in the decoder it scatters the rows it
//! keeps, and the operator above evaluates it again. Those stay with the operators above,
//! except beside wide rows (`late_decodable`, `scan::late`). So does a list of keys that
//! keeps most rows (`scan::key_share`: TPC-DS's 12 stores, all of store_sales').
//!
//! Every bucket also drops the row groups that the dynamic filters, as they stand when it
//! opens, rule out by its footer's min/max statistics (`prunable`): a join's key bounds, a
//! TopK's threshold. Nothing is fetched or decoded for them. A page index rules out pages by
//! the same filters and the static predicate (`scan::pages`).
//!
//! The scan answers "not pushed down" to every filter: the operators above still apply
//! them, so what the decoder does not take is no loss, and a plan that travels to a worker
//! without them stays correct.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::datasource::physical_plan::parquet::can_expr_be_pushed_down_with_schemas;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    in_list, lit, BinaryExpr, CaseExpr, Column, DynamicFilterPhysicalExpr, InListExpr, Literal,
};
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::{conjunction, conjunction_opt, split_conjunction, PhysicalExpr};
use datafusion::physical_plan::joins::HashTableLookupExpr;

/// The conjuncts of `predicate` (over `output`, the scan's projected schema) that the
/// decoder should evaluate when it decodes the file columns as `decoding` says, rewritten
/// to `decoding`'s column indexes: the dynamic filters whose current state names their
/// keys (see the module), as they stand now, and that `pays` (given each as the decoder
/// would evaluate it). A conjunct over a column decoded in another type than the table's
/// (a fixed-length decimal, restored after decoding) or over a listing column stays with
/// the operators above.
pub fn decodable(
    predicate: &Arc<dyn PhysicalExpr>,
    output: &Schema,
    decoding: &Schema,
    pays: impl Fn(&Arc<dyn PhysicalExpr>) -> bool,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut kept = Vec::new();
    for conjunct in split_conjunction(predicate) {
        let Some(now) = named_keys(conjunct)? else {
            continue;
        };
        let now = unrouted(without_implied_bounds(narrowed(now, output)?)?, output)?;
        if !decoded_as_typed(&now, output, decoding) {
            continue;
        }
        let now = reassign_expr_columns(now, decoding)?;
        if can_expr_be_pushed_down_with_schemas(&now, decoding) && pays(&now) {
            kept.push(now);
        }
    }
    Ok(conjunction_opt(kept))
}

/// The conjuncts of `filters` (the scan's static predicate and its dynamic filters, over
/// `output`) that the decoder can evaluate when it decodes the file columns as `decoding` says,
/// for late materialisation (`scan::late`): all of them but a hash-table lookup (its
/// scattered keeps cost more than they save) and those over a column decoded in another type
/// or over a listing column. Dynamic filters stay live, not snapshotted: TopK's threshold
/// tightens while the decoder runs.
pub fn late_decodable(
    filters: &[&Arc<dyn PhysicalExpr>],
    output: &Schema,
    decoding: &Schema,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut kept = Vec::new();
    for conjunct in filters.iter().flat_map(|f| split_conjunction(f)) {
        let looks_up =
            |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<HashTableLookupExpr>().is_some();
        let a_lookup = is_dynamic(conjunct) && snapshot(conjunct)?.exists(|e| Ok(looks_up(e)))?;
        if a_lookup || !decoded_as_typed(conjunct, output, decoding) {
            continue;
        }
        let now = reassign_expr_columns(Arc::clone(conjunct), decoding)?;
        if can_expr_be_pushed_down_with_schemas(&now, decoding) {
            kept.push(now);
        }
    }
    Ok(conjunction_opt(kept))
}

/// Whether `expr` names columns, all of them file columns that the decoder types as the
/// table does.
fn decoded_as_typed(expr: &Arc<dyn PhysicalExpr>, output: &Schema, decoding: &Schema) -> bool {
    let columns = collect_columns(expr);
    !columns.is_empty()
        && columns.iter().all(|c| {
            match (
                output.field_with_name(c.name()),
                decoding.field_with_name(c.name()),
            ) {
                (Ok(table), Ok(file)) => table.data_type() == file.data_type(),
                _ => false,
            }
        })
}

/// What a scan's predicates can rule out now, judged by statistics, from one snapshot of
/// their dynamic filters: `row_groups` by a footer's min/max (the planner used the static
/// conjuncts already), `pages` by a page index (which the planner never saw, so the static
/// conjuncts count there too).
pub struct Prunable {
    pub row_groups: Option<Arc<dyn PhysicalExpr>>,
    pub pages: Option<Arc<dyn PhysicalExpr>>,
}

/// `Prunable` of `predicates` (over `output`, the scan's projected schema), over `files` (the
/// table's file columns). Each dynamic filter is taken as it stands and loosened to what
/// min/max pruning understands: a partitioned join's filter routes each row to its build
/// partition's bounds (`CASE hash(key) % n WHEN i THEN …`); a row passing it passes one of
/// the branches, so it becomes their `OR`. A hash-table lookup becomes `true` (statistics say
/// nothing of it). Conjuncts over listing columns, and filters not yet known (`true`), are
/// left out.
pub fn prunable<'a>(
    predicates: impl IntoIterator<Item = &'a Arc<dyn PhysicalExpr>>,
    output: &Schema,
    files: &Schema,
) -> Result<Prunable> {
    let (mut row_groups, mut pages) = (vec![], vec![]);
    for conjunct in predicates.into_iter().flat_map(split_conjunction) {
        let dynamic = is_dynamic(conjunct);
        let now = match dynamic {
            true => loosened(snapshot(conjunct)?)?,
            false => Arc::clone(conjunct),
        };
        let columns = collect_columns(&now);
        let on_files = columns.iter().all(|c| {
            files.field_with_name(c.name()).is_ok() && output.field_with_name(c.name()).is_ok()
        });
        if columns.is_empty() || !on_files {
            continue;
        }
        let now = reassign_expr_columns(now, files)?;
        if dynamic {
            row_groups.push(Arc::clone(&now));
        }
        pages.push(now);
    }
    Ok(Prunable {
        row_groups: conjunction_opt(row_groups),
        pages: conjunction_opt(pages),
    })
}

/// `expr` with its dynamic filters replaced by their current state.
pub fn snapshot(expr: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(Arc::clone(expr)
        .transform_down(|e| match e.downcast_ref::<DynamicFilterPhysicalExpr>() {
            Some(filter) => Ok(Transformed::yes(filter.current()?)),
            None => Ok(Transformed::no(e)),
        })?
        .data)
}

/// `expr` as min/max pruning can use it (see `prunable`).
fn loosened(expr: Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(expr
        .transform_up(|e| {
            if e.downcast_ref::<HashTableLookupExpr>().is_some() {
                return Ok(Transformed::yes(lit(true)));
            }
            let Some(case) = e.downcast_ref::<CaseExpr>().filter(|c| c.expr().is_some()) else {
                return Ok(Transformed::no(e));
            };
            let branches = case
                .when_then_expr()
                .iter()
                .map(|(_, then)| Arc::clone(then));
            let any = branches
                .chain(case.else_expr().cloned())
                .reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::Or, b)) as _)
                .unwrap_or_else(|| lit(true));
            Ok(Transformed::yes(any))
        })?
        .data)
}

/// Whether `filter` holds a dynamic filter (one the scan keeps, see the module).
pub fn is_dynamic(filter: &Arc<dyn PhysicalExpr>) -> bool {
    filter
        .exists(|e| Ok(e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some()))
        .unwrap_or(false)
}

/// `filter` (a join's filter as it stands, over `output`) loosened to the fixed-width columns
/// it names, for the decoder: it decodes the filter's columns for every row, so a list of
/// several join keys, `struct(id, status, education) IN (...)` (TPC-DS q85), or a key's
/// bounds on a string, would have it decode and compare every string before any row is
/// dropped: q85's customer_demographics, probed by a collected join, decoded 1.9 million
/// rows of strings for 26 kept (0.16 s; 0.09 s with no filter in the decoder, 0.10 s with
/// the id's list alone). A list of keys becomes one list per fixed-width
/// column of its keys (`id IN (...)`), and bounds on other columns `true`. Every part it
/// replaces sits under `AND` or a `CASE`'s `THEN`, where a looser part only keeps more rows,
/// and the join applies its filter whole above the scan.
fn narrowed(filter: Arc<dyn PhysicalExpr>, output: &Schema) -> Result<Arc<dyn PhysicalExpr>> {
    let fixed_width = |e: &Arc<dyn PhysicalExpr>| {
        e.data_type(output)
            .is_ok_and(|t| t.is_primitive() || t == DataType::Boolean)
    };
    Ok(filter
        .transform_up(|e| {
            if let Some(list) = e.downcast_ref::<InListExpr>() {
                return Ok(match keys_lists(list, output, fixed_width)? {
                    Some(lists) => Transformed::yes(lists),
                    None => Transformed::no(e),
                });
            }
            let Some(binary) = e.downcast_ref::<BinaryExpr>() else {
                return Ok(Transformed::no(e));
            };
            let sides = [binary.left(), binary.right()];
            let is_true = |e: &Arc<dyn PhysicalExpr>| is_boolean(e, true);
            if *binary.op() == Operator::And {
                // What a replaced bound leaves: `true AND x` is `x`.
                return Ok(match sides.map(is_true) {
                    [true, _] => Transformed::yes(Arc::clone(binary.right())),
                    [_, true] => Transformed::yes(Arc::clone(binary.left())),
                    _ => Transformed::no(e),
                });
            }
            let on_other = |side: &&Arc<dyn PhysicalExpr>| {
                side.downcast_ref::<Column>().is_some() && !fixed_width(side)
            };
            let a_bound = matches!(
                binary.op(),
                Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
            );
            Ok(match a_bound && sides.iter().any(on_other) {
                true => Transformed::yes(lit(true)),
                false => Transformed::no(e),
            })
        })?
        .data)
}

/// `filter` without the bounds that a list of keys beside them implies. A join's filter is
/// `k >= min AND k <= max AND k IN (…)`, and the decoder evaluates its conjuncts one after
/// the other, each over the rows the ones before kept: a bound that keeps half of the rows,
/// scattered, cuts them into hundreds of thousands of ranges, which the next conjunct is read
/// over and which are then intersected. TPC-DS q82's store_sales, whose list keeps 2 items of
/// 18,000, spent a third of its time there (a warm statement 0.060 s against 0.043 s with no
/// filter in the decoder); the list alone keeps the same rows. As in `narrowed`, a part
/// dropped sits under `AND` or a `CASE`'s `THEN` (all a join's filter holds), so the filter
/// only keeps more rows, and the join applies its filter whole.
fn without_implied_bounds(filter: Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(filter
        .transform_up(|e| {
            let is_and = |e: &Arc<dyn PhysicalExpr>| {
                e.downcast_ref::<BinaryExpr>()
                    .is_some_and(|b| *b.op() == Operator::And)
            };
            if !is_and(&e) {
                return Ok(Transformed::no(e));
            }
            let kept = {
                let conjuncts = split_conjunction(&e);
                let listed: Vec<&Column> = conjuncts
                    .iter()
                    .filter_map(|c| c.downcast_ref::<InListExpr>())
                    .filter(|list| !list.negated())
                    .filter_map(|list| list.expr().downcast_ref::<Column>())
                    .collect();
                let implied = |c: &&Arc<dyn PhysicalExpr>| {
                    bounded_column(c).is_some_and(|column| listed.contains(&column))
                };
                match conjuncts.iter().any(implied) {
                    true => Some(conjunction(
                        conjuncts.into_iter().filter(|c| !implied(c)).cloned(),
                    )),
                    false => None,
                }
            };
            Ok(match kept {
                Some(kept) => Transformed::yes(kept),
                None => Transformed::no(e),
            })
        })?
        .data)
}

/// `filter` with a partitioned join's routing undone where each of its partitions names its
/// keys in a list over one and the same column: `CASE hash(k) % n WHEN i THEN k IN (Lᵢ) …
/// ELSE false END` becomes `k IN (L₀ ∪ L₁ ∪ …)`. The union keeps every row the `CASE` keeps
/// (and no other: a key in Lⱼ was hashed to partition j when the build side was split, as a
/// probe row with that key is), without hashing each row's keys again and filtering the
/// batch once per partition (tpchgen-cli's TPC-H Q17: its lineitem scan 376 → 172 ms).
/// Where a branch is anything else (a hash-table lookup, `true` for a partition that
/// stopped), the `CASE` stays.
fn unrouted(filter: Arc<dyn PhysicalExpr>, output: &Schema) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(filter
        .transform_up(|e| {
            let Some(case) = e.downcast_ref::<CaseExpr>().filter(|c| c.expr().is_some()) else {
                return Ok(Transformed::no(e));
            };
            let lists: Option<Vec<&InListExpr>> = case
                .when_then_expr()
                .iter()
                .map(|(_, then)| then.downcast_ref::<InListExpr>().filter(|l| !l.negated()))
                .collect();
            let falls_out = case.else_expr().is_none_or(|e| is_boolean(e, false));
            let Some(lists) = lists.filter(|l| falls_out && !l.is_empty()) else {
                return Ok(Transformed::no(e));
            };
            let key = lists[0].expr();
            if lists.iter().any(|list| list.expr() != key) {
                return Ok(Transformed::no(e));
            }
            let values = lists.iter().flat_map(|list| list.list().iter().cloned());
            let union = in_list(Arc::clone(key), values.collect(), &false, output)?;
            Ok(Transformed::yes(union))
        })?
        .data)
}

/// Whether `expr` is the literal `value`.
fn is_boolean(expr: &Arc<dyn PhysicalExpr>, value: bool) -> bool {
    expr.downcast_ref::<Literal>()
        .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(value)))
}

/// The column of `column < literal` (or `<=`, `>`, `>=`, either way round).
fn bounded_column(expr: &Arc<dyn PhysicalExpr>) -> Option<&Column> {
    let binary = expr.downcast_ref::<BinaryExpr>()?;
    let a_bound = matches!(
        binary.op(),
        Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    );
    let literal = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().is_some();
    let (left, right) = (binary.left(), binary.right());
    match a_bound {
        true if literal(right) => left.downcast_ref::<Column>(),
        true if literal(left) => right.downcast_ref::<Column>(),
        _ => None,
    }
}

/// `struct(a, b, …) IN (…)` as `a IN (…) AND …` over the fields that are fixed-width columns
/// (`fixed_width`), each list holding its field's values; `None` for any other list, or
/// where no field is such a column.
fn keys_lists(
    list: &InListExpr,
    output: &Schema,
    fixed_width: impl Fn(&Arc<dyn PhysicalExpr>) -> bool,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let Some(keys) = list
        .expr()
        .downcast_ref::<ScalarFunctionExpr>()
        .filter(|f| f.name() == "struct" && !list.negated())
    else {
        return Ok(None);
    };
    let rows: Option<Vec<_>> = list
        .list()
        .iter()
        .map(|value| match value.downcast_ref::<Literal>()?.value() {
            ScalarValue::Struct(row) => Some(Arc::clone(row)),
            _ => None,
        })
        .collect();
    let Some(rows) = rows else {
        return Ok(None);
    };
    let mut lists = Vec::new();
    for (field, key) in keys.args().iter().enumerate() {
        if key.downcast_ref::<Column>().is_none() || !fixed_width(key) {
            continue;
        }
        let mut values = Vec::with_capacity(rows.len());
        for row in &rows {
            values.push(lit(ScalarValue::try_from_array(row.column(field), 0)?));
        }
        lists.push(in_list(Arc::clone(key), values, &false, output)?);
    }
    Ok(conjunction_opt(lists))
}

/// `conjunct` with its dynamic filters replaced by their current state, if it has one and
/// that state names keys in IN lists and looks up no hash table.
fn named_keys(conjunct: &Arc<dyn PhysicalExpr>) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let dynamic = is_dynamic(conjunct);
    let now = snapshot(conjunct)?;
    let has = |kind: fn(&dyn PhysicalExpr) -> bool| now.exists(|e| Ok(kind(e.as_ref())));
    let names_keys = has(|e| e.downcast_ref::<InListExpr>().is_some())?;
    let looks_up = has(|e| e.downcast_ref::<HashTableLookupExpr>().is_some())?;
    Ok((dynamic && names_keys && !looks_up).then_some(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};

    fn schema(fields: &[(&str, DataType)]) -> Schema {
        Schema::new(
            fields
                .iter()
                .map(|(name, t)| Field::new(*name, t.clone(), true))
                .collect::<Vec<_>>(),
        )
    }

    /// A join's dynamic filter on `column` of `output`, before its build side is in.
    fn join_filter(column: &str, output: &Schema) -> Arc<DynamicFilterPhysicalExpr> {
        Arc::new(DynamicFilterPhysicalExpr::new(
            vec![col(column, output).unwrap()],
            lit(true),
        ))
    }

    #[test]
    fn takes_the_join_filters_that_name_their_keys_as_they_stand() {
        // The scan outputs (price, day, year); the file decodes price as fixed-length bytes
        // and holds no year (a hive column).
        let output = schema(&[
            ("price", DataType::Decimal128(15, 2)),
            ("day", DataType::Int32),
            ("year", DataType::Utf8),
        ]);
        let decoding = schema(&[
            ("id", DataType::Int64),
            ("day", DataType::Int32),
            ("price", DataType::FixedSizeBinary(7)),
        ]);
        let day = col("day", &output).unwrap();
        let static_day = binary(Arc::clone(&day), Operator::Lt, lit(10i32), &output).unwrap();
        let on_day = join_filter("day", &output);
        let on_price = join_filter("price", &output);
        let all = conjunction_opt([
            Arc::clone(&static_day),
            Arc::clone(&on_day) as _,
            Arc::clone(&on_price) as _,
        ])
        .unwrap();
        // Before the build side is in, nothing names keys.
        assert!(decodable(&all, &output, &decoding, |_| true)
            .unwrap()
            .is_none());

        let days = in_list(
            Arc::clone(&day),
            vec![lit(3i32), lit(5i32)],
            &false,
            &output,
        )
        .unwrap();
        // As DataFusion writes a join's filter: the keys' bounds beside their list, which
        // the list implies (the decoder gets the list alone).
        let bound = |op, v: i32| binary(Arc::clone(&day), op, lit(v), &output).unwrap();
        let shaped = conjunction([bound(Operator::GtEq, 3), bound(Operator::LtEq, 5), days]);
        on_day.update(shaped).unwrap();
        let price = col("price", &output).unwrap();
        let cents = lit(ScalarValue::Decimal128(Some(100), 15, 2));
        on_price
            .update(in_list(price, vec![cents], &false, &output).unwrap())
            .unwrap();
        // The day filter as it stands, on the decoder's second column; not the static
        // predicate, nor the filter on a column decoded as bytes.
        let kept = decodable(&all, &output, &decoding, |_| true)
            .unwrap()
            .unwrap();
        assert_eq!(kept.to_string(), "day@1 IN (SET) ([3, 5])");
        // One that does not pay stays with the operators above.
        let none = decodable(&all, &output, &decoding, |_| false).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn a_join_on_several_keys_reaches_the_decoder_as_lists_of_its_fixed_width_keys() {
        use datafusion::arrow::array::{Array, ArrayRef, Int32Array, StringViewArray, StructArray};
        use datafusion::common::config::ConfigOptions;
        // TPC-DS q85: a join on (id, status) publishes both keys' bounds and a list of pairs.
        let output = schema(&[("id", DataType::Int32), ("status", DataType::Utf8View)]);
        let id = col("id", &output).unwrap();
        let status = col("status", &output).unwrap();
        let pairs = StructArray::from(vec![
            (
                Arc::new(Field::new("c0", DataType::Int32, true)),
                Arc::new(Int32Array::from(vec![7, 9])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c1", DataType::Utf8View, true)),
                Arc::new(StringViewArray::from(vec!["M", "S"])) as ArrayRef,
            ),
        ]);
        let keys = Arc::new(ScalarFunctionExpr::new(
            "struct",
            datafusion::functions::core::r#struct(),
            vec![Arc::clone(&id), Arc::clone(&status)],
            Arc::new(Field::new("struct", pairs.data_type().clone(), true)),
            Arc::new(ConfigOptions::default()),
        ));
        let listed = InListExpr::try_new_from_array(keys, Arc::new(pairs), false, &output);
        let bound = |key: &Arc<dyn PhysicalExpr>, op, value: ScalarValue| {
            binary(Arc::clone(key), op, lit(value), &output).unwrap()
        };
        let text = |v: &str| ScalarValue::Utf8View(Some(v.into()));
        let on_both = join_filter("id", &output);
        on_both
            .update(
                conjunction_opt([
                    bound(&id, Operator::GtEq, ScalarValue::Int32(Some(7))),
                    bound(&id, Operator::LtEq, ScalarValue::Int32(Some(9))),
                    bound(&status, Operator::GtEq, text("M")),
                    bound(&status, Operator::LtEq, text("S")),
                    Arc::new(listed.unwrap()),
                ])
                .unwrap(),
            )
            .unwrap();
        let filter: Arc<dyn PhysicalExpr> = on_both;
        let kept = decodable(&filter, &output, &output, |_| true)
            .unwrap()
            .unwrap();
        // The decoder reads only id, its own list (which implies its bounds); the join
        // checks the pairs.
        assert_eq!(kept.to_string(), "id@0 IN (SET) ([7, 9])");
    }

    #[test]
    fn a_partitioned_join_s_lists_reach_the_decoder_as_one_list_without_their_routing() {
        let output = schema(&[("day", DataType::Int32)]);
        let day = col("day", &output).unwrap();
        let listed = |values: &[i32]| {
            let values = values.iter().map(|v| lit(*v)).collect();
            in_list(Arc::clone(&day), values, &false, &output).unwrap()
        };
        let bound = |op, v: i32| binary(Arc::clone(&day), op, lit(v), &output).unwrap();
        let branch = |low: i32, high: i32, values: &[i32]| {
            conjunction([
                bound(Operator::GtEq, low),
                bound(Operator::LtEq, high),
                listed(values),
            ])
        };
        // CASE day % 2 WHEN 0 THEN <its bounds> AND day IN (4, 8) WHEN 1 THEN … ELSE false END
        let routed = |second: Arc<dyn PhysicalExpr>| {
            let routing = bound(Operator::Modulo, 2);
            let branches = vec![(lit(0i32), branch(4, 8, &[4, 8])), (lit(1i32), second)];
            Arc::new(CaseExpr::try_new(Some(routing), branches, Some(lit(false))).unwrap())
        };
        let on_day = join_filter("day", &output);
        on_day.update(routed(branch(3, 5, &[3, 5]))).unwrap();
        let filter: Arc<dyn PhysicalExpr> = Arc::clone(&on_day) as _;
        let kept = decodable(&filter, &output, &output, |_| true)
            .unwrap()
            .unwrap();
        assert_eq!(kept.to_string(), "day@0 IN (SET) ([4, 8, 3, 5])");
        // A partition whose build stopped keeps every row it is routed: the routing stays.
        on_day.update(routed(lit(true))).unwrap();
        let kept = decodable(&filter, &output, &output, |_| true)
            .unwrap()
            .unwrap();
        assert!(kept.to_string().starts_with("CASE day@0 % 2"), "{kept}");
    }

    #[test]
    fn late_materialisation_takes_static_and_live_dynamic_filters_the_decoder_can_read() {
        let output = schema(&[
            ("price", DataType::Decimal128(15, 2)),
            ("day", DataType::Int32),
        ]);
        let decoding = schema(&[
            ("day", DataType::Int32),
            ("price", DataType::FixedSizeBinary(7)),
        ]);
        let day = col("day", &output).unwrap();
        let static_day = binary(Arc::clone(&day), Operator::Lt, lit(10i32), &output).unwrap();
        let top_k = join_filter("day", &output);
        let on_price = join_filter("price", &output);
        let dynamic = conjunction_opt([Arc::clone(&top_k) as _, on_price as _]).unwrap();
        let kept = late_decodable(&[&static_day, &dynamic], &output, &decoding)
            .unwrap()
            .unwrap();
        // Both filters on day, on the decoder's first column; not the one on bytes.
        let conjuncts: Vec<_> = split_conjunction(&kept).into_iter().cloned().collect();
        assert_eq!(conjuncts.len(), 2, "{kept}");
        assert_eq!(conjuncts[0].to_string(), "day@0 < 10");
        // The dynamic one stays live: a threshold set later is what the decoder evaluates.
        top_k
            .update(binary(day, Operator::Lt, lit(3i32), &output).unwrap())
            .unwrap();
        assert_eq!(snapshot(&conjuncts[1]).unwrap().to_string(), "day@0 < 3");
    }

    #[test]
    fn a_partitioned_join_s_bounds_prune_as_their_union_and_unknown_filters_are_left_out() {
        use datafusion::physical_expr::expressions::CaseExpr;
        let output = schema(&[("day", DataType::Int32), ("year", DataType::Utf8)]);
        let files = schema(&[("id", DataType::Int64), ("day", DataType::Int32)]);
        let on_day = join_filter("day", &output);
        let on_year = join_filter("year", &output);
        let both = conjunction_opt([Arc::clone(&on_day) as _, Arc::clone(&on_year) as _]).unwrap();
        let now = |predicates: &[&Arc<dyn PhysicalExpr>]| {
            prunable(predicates.iter().copied(), &output, &files).unwrap()
        };
        assert!(now(&[&both]).row_groups.is_none(), "not known yet");
        // CASE day % 2 WHEN 0 THEN day <= 3 ELSE day >= 8 END
        let day = col("day", &output).unwrap();
        let bound = |op, v: i32| binary(Arc::clone(&day), op, lit(v), &output).unwrap();
        let routing = binary(Arc::clone(&day), Operator::Modulo, lit(2i32), &output).unwrap();
        let case = CaseExpr::try_new(
            Some(routing),
            vec![(lit(0i32), bound(Operator::LtEq, 3))],
            Some(bound(Operator::GtEq, 8)),
        )
        .unwrap();
        on_day.update(Arc::new(case)).unwrap();
        on_year
            .update(
                in_list(
                    col("year", &output).unwrap(),
                    vec![lit("x")],
                    &false,
                    &output,
                )
                .unwrap(),
            )
            .unwrap();
        // The union of the branches, on the file schema's column; not the listing column.
        let static_day = bound(Operator::Lt, 10);
        let judged = now(&[&static_day, &both]);
        let row_groups = judged.row_groups.unwrap();
        assert_eq!(row_groups.to_string(), "day@1 <= 3 OR day@1 >= 8");
        // Pages are judged by the static conjunct too, from the same snapshot.
        let pages = judged.pages.unwrap();
        let conjuncts: Vec<String> = split_conjunction(&pages)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(conjuncts, ["day@1 < 10", "day@1 <= 3 OR day@1 >= 8"]);
    }
}
