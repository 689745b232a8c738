//! DuckDB's list functions that DataFusion lacks: the positions that sort a list, elements
//! picked by position or by a mask, distinct values counted, and an aggregate of a list by
//! its name (`list_aggregate(l, 'min')`). Positions are 1-based, as everywhere in DuckDB.

use std::collections::HashSet;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::{sort_to_indices, SortOptions};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};

use super::row_functions::{int, list_of, returns, text, RowFunction};

pub const LISTS: &[RowFunction] = &[
    RowFunction {
        names: &["list_grade_up", "array_grade_up", "grade_up"],
        arity: 1..=1,
        returns: returns!(list_of(DataType::Int64)),
        eval: |a| {
            let values = elements(&a[0])?;
            let order = SortOptions {
                descending: false,
                nulls_first: false,
            };
            let sorted = sort_to_indices(&values, Some(order), None)?;
            let positions: Vec<ScalarValue> = (sorted.values().iter())
                .map(|&i| ScalarValue::Int64(Some(i as i64 + 1)))
                .collect();
            Ok(list(&positions, &DataType::Int64))
        },
        strict: true,
    },
    RowFunction {
        names: &["list_select", "array_select"],
        arity: 2..=2,
        returns: |types, _| Ok(list_of(element(&types[0])?)),
        eval: |a| {
            let values = elements(&a[0])?;
            let positions = scalars(&elements(&a[1])?)?;
            let mut picked = Vec::with_capacity(positions.len());
            for position in positions {
                let index = if position.is_null() {
                    0
                } else {
                    int(&position)?
                };
                picked.push(if (1..=values.len() as i64).contains(&index) {
                    ScalarValue::try_from_array(&values, index as usize - 1)?
                } else {
                    ScalarValue::try_from(values.data_type())?
                });
            }
            Ok(list(&picked, values.data_type()))
        },
        strict: true,
    },
    RowFunction {
        names: &["list_where", "array_where"],
        arity: 2..=2,
        returns: |types, _| Ok(list_of(element(&types[0])?)),
        eval: |a| {
            let (values, mask) = (elements(&a[0])?, scalars(&elements(&a[1])?)?);
            if mask.len() != values.len() {
                return exec_err!("list_where: the mask's length differs from the list's");
            }
            let mut kept = vec![];
            for (i, flag) in mask.iter().enumerate() {
                if flag == &ScalarValue::Boolean(Some(true)) {
                    kept.push(ScalarValue::try_from_array(&values, i)?);
                }
            }
            Ok(list(&kept, values.data_type()))
        },
        strict: true,
    },
    RowFunction {
        // DataFusion's keeps a NULL; DuckDB's drops them (and promises no order: this one
        // keeps the first of each).
        names: &["list_distinct", "array_distinct"],
        arity: 1..=1,
        returns: |types, _| Ok(list_of(element(&types[0])?)),
        eval: |a| {
            let values = elements(&a[0])?;
            let mut seen = HashSet::new();
            let distinct: Vec<ScalarValue> = (scalars(&values)?.into_iter())
                .filter(|v| !v.is_null() && seen.insert(v.clone()))
                .collect();
            Ok(list(&distinct, values.data_type()))
        },
        strict: true,
    },
    RowFunction {
        names: &["list_unique", "array_unique"],
        arity: 1..=1,
        returns: returns!(DataType::UInt64),
        eval: |a| {
            let values = scalars(&elements(&a[0])?)?;
            let distinct: HashSet<&ScalarValue> = values.iter().filter(|v| !v.is_null()).collect();
            Ok(ScalarValue::UInt64(Some(distinct.len() as u64)))
        },
        strict: true,
    },
    RowFunction {
        names: &[
            "list_aggregate",
            "array_aggregate",
            "list_aggr",
            "array_aggr",
            "aggregate",
        ],
        arity: 2..=2,
        returns: |types, constants| {
            let Some(Some(name)) = constants.get(1).map(|c| c.and_then(|c| c.try_as_str())) else {
                return plan_err!("list_aggregate: the aggregate's name must be a constant");
            };
            aggregate_type(
                &name.unwrap_or_default().to_ascii_lowercase(),
                &element(&types[0])?,
            )
        },
        eval: |a| {
            let values = scalars(&elements(&a[0])?)?;
            aggregate(&text(&a[1])?.to_ascii_lowercase(), values)
        },
        strict: true,
    },
];

fn list(values: &[ScalarValue], element: &DataType) -> ScalarValue {
    ScalarValue::List(ScalarValue::new_list_nullable(values, element))
}

/// The type of a list type's elements.
fn element(data_type: &DataType) -> Result<DataType> {
    match data_type {
        DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
            Ok(field.data_type().clone())
        }
        DataType::Null => Ok(DataType::Null),
        other => plan_err!("expected a list, got {other}"),
    }
}

/// A list value's elements.
fn elements(value: &ScalarValue) -> Result<ArrayRef> {
    match value {
        ScalarValue::List(list) => Ok(list.value(0)),
        ScalarValue::LargeList(list) => Ok(list.value(0)),
        ScalarValue::FixedSizeList(list) => Ok(list.value(0)),
        other => exec_err!("expected a list, got {}", other.data_type()),
    }
}

fn scalars(array: &ArrayRef) -> Result<Vec<ScalarValue>> {
    (0..array.len())
        .map(|i| ScalarValue::try_from_array(array, i))
        .collect()
}

/// What `list_aggregate(…, name)` gives for elements of `element`.
fn aggregate_type(name: &str, element: &DataType) -> Result<DataType> {
    Ok(match name {
        "min" | "max" | "first" | "last" | "any_value" | "arbitrary" => element.clone(),
        "count" => DataType::Int64,
        "sum" if element.is_integer() => DataType::Int64,
        "sum" | "avg" | "mean" => DataType::Float64,
        other => return plan_err!(
            "list_aggregate: '{other}' is not an aggregate it knows (min, max, sum, avg, count, first, last)"
        ),
    })
}

/// The aggregate `name` of `values` (NULLs left out, as aggregates do).
fn aggregate(name: &str, values: Vec<ScalarValue>) -> Result<ScalarValue> {
    let element = values
        .first()
        .map_or(DataType::Null, ScalarValue::data_type);
    let returns = aggregate_type(name, &element)?;
    let present: Vec<ScalarValue> = values.into_iter().filter(|v| !v.is_null()).collect();
    let pick = |better: std::cmp::Ordering| {
        present.iter().cloned().reduce(|best, v| {
            if v.partial_cmp(&best) == Some(better) {
                v
            } else {
                best
            }
        })
    };
    let value = match name {
        "min" => pick(std::cmp::Ordering::Less),
        "max" => pick(std::cmp::Ordering::Greater),
        "first" | "any_value" | "arbitrary" => present.first().cloned(),
        "last" => present.last().cloned(),
        "count" => Some(ScalarValue::Int64(Some(present.len() as i64))),
        "sum" | "avg" | "mean" => {
            let mut sum = ScalarValue::try_from(&returns)?;
            for v in &present {
                let v = v.cast_to(&returns)?;
                sum = if sum.is_null() { v } else { sum.add(&v)? };
            }
            match name {
                "sum" => Some(sum),
                _ if present.is_empty() => None,
                _ => Some(sum.div(ScalarValue::Float64(Some(present.len() as f64)))?),
            }
        }
        _ => None,
    };
    match value {
        Some(value) => value.cast_to(&returns),
        None => ScalarValue::try_from(&returns),
    }
}
