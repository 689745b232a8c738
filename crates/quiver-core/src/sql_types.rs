//! Arrow types by the names SQL users know, as DuckDB spells them: `VARCHAR` for `Utf8View`,
//! `BIGINT` for `Int64`, `DECIMAL(15,2)` for `Decimal128(15, 2)`. DESCRIBE, SUMMARIZE and the
//! table header speak these; plans and errors keep Arrow's.

use datafusion::arrow::datatypes::{DataType, TimeUnit};

pub fn sql_type_name(data_type: &DataType) -> String {
    use DataType::*;
    match data_type {
        Null => "NULL".into(),
        Boolean => "BOOLEAN".into(),
        Int8 => "TINYINT".into(),
        Int16 => "SMALLINT".into(),
        Int32 => "INTEGER".into(),
        Int64 => "BIGINT".into(),
        UInt8 => "UTINYINT".into(),
        UInt16 => "USMALLINT".into(),
        UInt32 => "UINTEGER".into(),
        UInt64 => "UBIGINT".into(),
        Float16 | Float32 => "FLOAT".into(),
        Float64 => "DOUBLE".into(),
        Utf8 | LargeUtf8 | Utf8View => "VARCHAR".into(),
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => "BLOB".into(),
        Date32 | Date64 => "DATE".into(),
        Time32(_) | Time64(_) => "TIME".into(),
        Timestamp(unit, zone) => {
            let name = match unit {
                TimeUnit::Second => "TIMESTAMP_S",
                TimeUnit::Millisecond => "TIMESTAMP_MS",
                TimeUnit::Microsecond => "TIMESTAMP",
                TimeUnit::Nanosecond => "TIMESTAMP_NS",
            };
            match zone {
                Some(_) if *unit == TimeUnit::Microsecond => "TIMESTAMP WITH TIME ZONE".into(),
                Some(_) => format!("{name} WITH TIME ZONE"),
                None => name.into(),
            }
        }
        Duration(_) | Interval(_) => "INTERVAL".into(),
        Decimal32(p, s) | Decimal64(p, s) | Decimal128(p, s) | Decimal256(p, s) => {
            format!("DECIMAL({p},{s})")
        }
        List(item) | LargeList(item) | ListView(item) | LargeListView(item) => {
            format!("{}[]", sql_type_name(item.data_type()))
        }
        FixedSizeList(item, n) => format!("{}[{n}]", sql_type_name(item.data_type())),
        Struct(fields) => format!(
            "STRUCT({})",
            fields
                .iter()
                .map(|f| format!("{} {}", quoted(f.name()), sql_type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Map(entries, _) => match entries.data_type() {
            Struct(kv) if kv.len() == 2 => format!(
                "MAP({}, {})",
                sql_type_name(kv[0].data_type()),
                sql_type_name(kv[1].data_type())
            ),
            other => format!("MAP({other})"),
        },
        Dictionary(_, value) => sql_type_name(value),
        RunEndEncoded(_, value) => sql_type_name(value.data_type()),
        Union(..) => data_type.to_string(),
    }
}

/// A struct field's name, in double quotes unless it is a plain lower-case identifier.
fn quoted(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use std::sync::Arc;

    #[test]
    fn arrow_types_get_duckdb_names() {
        assert_eq!(sql_type_name(&DataType::Utf8View), "VARCHAR");
        assert_eq!(sql_type_name(&DataType::Int64), "BIGINT");
        assert_eq!(sql_type_name(&DataType::Decimal128(15, 2)), "DECIMAL(15,2)");
        assert_eq!(sql_type_name(&DataType::Date32), "DATE");
        assert_eq!(
            sql_type_name(&DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into())
            )),
            "TIMESTAMP WITH TIME ZONE"
        );
        assert_eq!(
            sql_type_name(&DataType::Timestamp(TimeUnit::Nanosecond, None)),
            "TIMESTAMP_NS"
        );
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        assert_eq!(sql_type_name(&DataType::List(item)), "INTEGER[]");
        let fields = vec![
            Field::new("a", DataType::Float64, true),
            Field::new("B c", DataType::Utf8, true),
        ];
        assert_eq!(
            sql_type_name(&DataType::Struct(fields.into())),
            "STRUCT(a DOUBLE, \"B c\" VARCHAR)"
        );
    }
}
