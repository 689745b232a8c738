//! DuckDB's struct functions that DataFusion lacks: field names and values, a field by
//! position, where a value is among the fields, and structs joined or updated
//! (`struct_insert` and `struct_update` arrive here with their named arguments as a struct,
//! from `function_names`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StructArray};
use datafusion::arrow::datatypes::{DataType, FieldRef, Fields};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};

use super::row_functions::{int, list_of, returns, utf8, RowFunction};

pub const STRUCTS: &[RowFunction] = &[
    RowFunction {
        names: &["struct_keys"],
        arity: 1..=1,
        returns: returns!(list_of(DataType::Utf8)),
        eval: |a| {
            let (fields, _) = parts(&a[0])?;
            let names: Vec<ScalarValue> = fields.iter().map(|f| utf8(f.name())).collect();
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &names,
                &DataType::Utf8,
            )))
        },
        strict: true,
    },
    RowFunction {
        names: &["struct_values"],
        arity: 1..=1,
        returns: |types, _| Ok(types[0].clone()),
        eval: |a| Ok(a[0].clone()),
        strict: true,
    },
    RowFunction {
        names: &["struct_extract_at"],
        arity: 2..=2,
        returns: |types, constants| {
            let fields = struct_fields(&types[0])?;
            let Some(Some(position)) = constants.get(1).map(|c| c.map(int)) else {
                return plan_err!("struct_extract_at: the position must be a constant");
            };
            match usize::try_from(position?)
                .ok()
                .and_then(|p| fields.get(p.checked_sub(1)?))
            {
                Some(field) => Ok(field.data_type().clone()),
                None => plan_err!("struct_extract_at: no field at that position"),
            }
        },
        eval: |a| {
            let (_, columns) = parts(&a[0])?;
            let position = int(&a[1])? as usize;
            ScalarValue::try_from_array(&columns[position - 1], 0)
        },
        strict: true,
    },
    RowFunction {
        names: &["struct_position", "struct_indexof"],
        arity: 2..=2,
        returns: returns!(DataType::Int32),
        eval: |a| {
            let found = position(&a[0], &a[1])?;
            Ok(ScalarValue::Int32(found.map(|p| p as i32 + 1)))
        },
        strict: true,
    },
    RowFunction {
        names: &["struct_contains", "struct_has"],
        arity: 2..=2,
        returns: returns!(DataType::Boolean),
        eval: |a| {
            Ok(ScalarValue::Boolean(Some(
                position(&a[0], &a[1])?.is_some(),
            )))
        },
        strict: true,
    },
    RowFunction {
        names: &["struct_concat"],
        arity: 1..=usize::MAX,
        returns: |types, _| {
            let mut fields: Vec<FieldRef> = vec![];
            for data_type in types {
                for field in struct_fields(data_type)?.iter() {
                    if fields.iter().any(|f| f.name() == field.name()) {
                        return plan_err!("struct_concat: the field {} twice", field.name());
                    }
                    fields.push(Arc::clone(field));
                }
            }
            Ok(DataType::Struct(Fields::from(fields)))
        },
        eval: |a| {
            let (mut fields, mut columns) = (vec![], vec![]);
            for value in a {
                let (f, c) = parts(value)?;
                fields.extend(f.iter().cloned());
                columns.extend(c);
            }
            joined(fields, columns)
        },
        strict: true,
    },
    RowFunction {
        names: &["struct_update"],
        arity: 2..=2,
        returns: |types, _| {
            let (mut fields, updates) = (
                struct_fields(&types[0])?.to_vec(),
                struct_fields(&types[1])?,
            );
            for update in updates.iter() {
                match fields.iter_mut().find(|f| f.name() == update.name()) {
                    Some(field) => *field = Arc::clone(update),
                    None => fields.push(Arc::clone(update)),
                }
            }
            Ok(DataType::Struct(Fields::from(fields)))
        },
        eval: |a| {
            let ((fields, columns), (updates, values)) = (parts(&a[0])?, parts(&a[1])?);
            let (mut fields, mut columns) = (fields.to_vec(), columns);
            for (update, value) in updates.iter().zip(values) {
                match fields.iter().position(|f| f.name() == update.name()) {
                    Some(i) => (fields[i], columns[i]) = (Arc::clone(update), value),
                    None => {
                        fields.push(Arc::clone(update));
                        columns.push(value);
                    }
                }
            }
            joined(fields, columns)
        },
        strict: true,
    },
];

fn struct_fields(data_type: &DataType) -> Result<&Fields> {
    match data_type {
        DataType::Struct(fields) => Ok(fields),
        other => plan_err!("expected a struct, got {other}"),
    }
}

/// A struct value's fields and its one row's columns.
fn parts(value: &ScalarValue) -> Result<(Fields, Vec<ArrayRef>)> {
    match value {
        ScalarValue::Struct(array) => Ok((array.fields().clone(), array.columns().to_vec())),
        other => exec_err!("expected a struct, got {}", other.data_type()),
    }
}

fn joined(fields: Vec<FieldRef>, columns: Vec<ArrayRef>) -> Result<ScalarValue> {
    let array = StructArray::try_new(Fields::from(fields), columns, None)?;
    Ok(ScalarValue::Struct(Arc::new(array)))
}

/// The first field (from 0) whose value equals `wanted`.
fn position(value: &ScalarValue, wanted: &ScalarValue) -> Result<Option<usize>> {
    let (_, columns) = parts(value)?;
    for (i, column) in columns.iter().enumerate() {
        let field = ScalarValue::try_from_array(column, 0)?;
        let Ok(wanted) = wanted.cast_to(column.data_type()) else {
            continue;
        };
        if !field.is_null() && field == wanted {
            return Ok(Some(i));
        }
    }
    Ok(None)
}
