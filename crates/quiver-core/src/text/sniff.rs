//! The columns of a CSV or JSON file, from a sample of its first bytes, as DuckDB's sniffer
//! finds them. CSV: the delimiter that splits every sampled row into the same number of
//! fields (most fields wins), a header if the first row is text above typed values (or all
//! is text), and per column the narrowest of BOOLEAN, BIGINT, DOUBLE, DATE, TIMESTAMP and
//! VARCHAR that every sampled value parses as. JSON: the objects' keys in the order they
//! first appear, typed as arrow infers them, with strings that are all dates or all
//! timestamps typed so. A column with no value in the sample is VARCHAR, as in DuckDB.

use std::fmt;
use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::csv::reader::Format;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use regex::Regex;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::decode::{null_pattern, ArrayUnwrap, Decoding, Dialect};
use super::{CsvOptions, JsonLayout, TextKind};

/// Rows of the sample that the types are inferred from (DuckDB samples 20,480).
const SAMPLE_ROWS: usize = 20_480;
/// Delimiters tried, in the order a tie is broken.
const DELIMITERS: [u8; 4] = [b',', b'|', b';', b'\t'];

/// How to decode files like the one `sample` begins (`whole`: all of it).
pub fn decoding(kind: &TextKind, sample: &[u8], whole: bool) -> Result<Decoding, String> {
    if sample.iter().all(u8::is_ascii_whitespace) {
        return Err("the file is empty: there are no columns to read".into());
    }
    match kind {
        TextKind::Csv(options) => csv(options, complete_lines(sample, whole)),
        TextKind::Json(layout) => json(*layout, sample),
    }
}

/// The sample up to its last line's end, unless it is the whole file.
fn complete_lines(sample: &[u8], whole: bool) -> &[u8] {
    match sample.iter().rposition(|&b| b == b'\n') {
        Some(end) if !whole => &sample[..=end],
        _ => sample,
    }
}

fn csv(options: &CsvOptions, sample: &[u8]) -> Result<Decoding, String> {
    let quote = options.quote.unwrap_or(b'"');
    let delimiter = options
        .delimiter
        .unwrap_or_else(|| sniff_delimiter(sample, quote));
    let null = options.null_string.as_deref().map(null_pattern);
    let format = |header: bool| {
        let mut format = Format::default()
            .with_header(header)
            .with_delimiter(delimiter)
            .with_quote(quote);
        if let Some(escape) = options.escape {
            format = format.with_escape(escape);
        }
        if let Some(null) = &null {
            format = format.with_null_regex(null.clone());
        }
        format
    };
    let infer = |header: bool, rows: usize| {
        (format(header).infer_schema(Cursor::new(sample), Some(rows)))
            .map_err(|e| e.to_string().trim_start_matches("Csv error: ").to_string())
    };
    let (first_row, _) = infer(false, 1)?;
    let (below, rows_below) = infer(true, SAMPLE_ROWS)?;
    let header = options
        .header
        .unwrap_or_else(|| looks_like_header(&first_row, &below, rows_below));
    let (names, types): (Vec<String>, Vec<DataType>) = if header {
        let names = below.fields().iter().map(|f| f.name().clone()).collect();
        (
            unique_names(names),
            below
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
        )
    } else {
        let (all, _) = infer(false, SAMPLE_ROWS)?;
        let names = (0..all.fields().len())
            .map(|i| format!("column{i}"))
            .collect();
        (
            names,
            all.fields().iter().map(|f| f.data_type().clone()).collect(),
        )
    };
    let fields = names.into_iter().zip(types).map(|(name, data_type)| {
        let data_type = match options.all_varchar {
            true => DataType::Utf8,
            false => duckdb_type(data_type),
        };
        Field::new(name, data_type, true)
    });
    Ok(Decoding {
        schema: Arc::new(Schema::new(fields.collect::<Vec<_>>())),
        dialect: Dialect::Csv {
            header,
            delimiter,
            quote,
            escape: options.escape,
            null_string: options.null_string.clone(),
        },
    })
}

/// The delimiter that splits the sampled rows into the most fields, all rows alike.
fn sniff_delimiter(sample: &[u8], quote: u8) -> u8 {
    let fields = |delimiter: u8| {
        let format = Format::default()
            .with_header(false)
            .with_delimiter(delimiter)
            .with_quote(quote);
        // A row with another count of fields is an error: that delimiter is not it.
        (format.infer_schema(Cursor::new(sample), Some(SAMPLE_ROWS)))
            .map_or(0, |(schema, _)| schema.fields().len())
    };
    let mut best = (1, b',');
    for delimiter in DELIMITERS {
        let count = fields(delimiter);
        if count > best.0 {
            best = (count, delimiter);
        }
    }
    best.1
}

/// Whether the first row names the columns: it is text where the rows below are typed,
/// or everything is text (DuckDB's guess too). A lone row is a header if it is all text.
/// (A sampled row's type is `Null` where it is empty.)
fn looks_like_header(first_row: &Schema, below: &Schema, rows_below: usize) -> bool {
    let is_text = |t: &DataType| *t == DataType::Utf8;
    let untyped = |t: &DataType| matches!(t, DataType::Utf8 | DataType::Null);
    // Empty names are allowed (they become `column{i}`), but not only those.
    let first_all_text = first_row.fields().iter().all(|f| untyped(f.data_type()))
        && first_row.fields().iter().any(|f| is_text(f.data_type()));
    if rows_below == 0 {
        return first_all_text;
    }
    let text_above_typed = (first_row.fields().iter().zip(below.fields()))
        .any(|(first, below)| is_text(first.data_type()) && !untyped(below.data_type()));
    text_above_typed || (first_all_text && below.fields().iter().all(|f| untyped(f.data_type())))
}

/// Header names as DuckDB makes them usable: an empty one is `column{i}`, a repeated one
/// gets `_1`, `_2`, ….
fn unique_names(names: Vec<String>) -> Vec<String> {
    let mut taken: Vec<String> = Vec::with_capacity(names.len());
    for (i, name) in names.into_iter().enumerate() {
        let base = match name.is_empty() {
            true => format!("column{i}"),
            false => name,
        };
        let mut unique = base.clone();
        let mut n = 0;
        while taken.contains(&unique) {
            n += 1;
            unique = format!("{base}_{n}");
        }
        taken.push(unique);
    }
    taken
}

/// DuckDB's type for what arrow inferred: TIMESTAMP is microseconds, and a column with no
/// value is VARCHAR.
fn duckdb_type(inferred: DataType) -> DataType {
    match inferred {
        DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone),
        DataType::Null => DataType::Utf8,
        other => other,
    }
}

fn json(layout: JsonLayout, sample: &[u8]) -> Result<Decoding, String> {
    let lines = ArrayUnwrap::new(layout).apply(Bytes::copy_from_slice(sample));
    let mut values = vec![];
    let mut records = serde_json::Deserializer::from_slice(&lines).into_iter::<Value>();
    for value in records.by_ref().take(SAMPLE_ROWS) {
        match value {
            Ok(value) => values.push(value),
            // The sample may end inside a record.
            Err(_) if !values.is_empty() => break,
            Err(error) => return Err(format!("not JSON: {error}")),
        }
    }
    if values.is_empty() {
        return Err("holds no object: there are no columns to read".into());
    }
    if let Some(other) = values.iter().find(|v| !v.is_object()) {
        return Err(format!(
            "holds {other}, not objects: read_json reads objects, a row each"
        ));
    }
    let inferred = datafusion::arrow::json::reader::infer_json_schema_from_iterator(
        values
            .iter()
            .map(Ok::<_, datafusion::arrow::error::ArrowError>),
    )
    .map_err(|e| e.to_string())?;
    let mut fields = vec![];
    for name in keys_in_order(&lines) {
        if let Ok(field) = inferred.field_with_name(&name) {
            let data_type = match field.data_type() {
                DataType::Utf8 => text_type(values.iter().filter_map(|v| v.get(&name)?.as_str())),
                other => duckdb_type(other.clone()),
            };
            fields.push(Field::new(name, data_type, true));
        }
    }
    Ok(Decoding {
        schema: Arc::new(Schema::new(fields)),
        dialect: Dialect::Json(layout),
    })
}

/// DATE if every string is a date, TIMESTAMP if every one is a timestamp, else VARCHAR.
fn text_type<'a>(mut texts: impl Iterator<Item = &'a str> + Clone) -> DataType {
    let date = Regex::new(r"^\d{4}-\d\d-\d\d$").expect("a valid pattern");
    let timestamp =
        Regex::new(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d{1,6})?$").expect("a valid pattern");
    if texts.clone().next().is_none() {
        DataType::Utf8
    } else if texts.clone().all(|t| date.is_match(t)) {
        DataType::Date32
    } else if texts.all(|t| timestamp.is_match(t)) {
        DataType::Timestamp(TimeUnit::Microsecond, None)
    } else {
        DataType::Utf8
    }
}

/// The top-level keys of the objects in `lines`, each once, in the order they first
/// appear (serde_json's own map sorts them).
fn keys_in_order(lines: &[u8]) -> Vec<String> {
    let mut keys: Vec<String> = vec![];
    let records = serde_json::Deserializer::from_slice(lines).into_iter::<KeysInOrder>();
    for record in records.take(SAMPLE_ROWS).map_while(Result::ok) {
        for key in record.0 {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// An object's keys as written, its values skipped.
struct KeysInOrder(Vec<String>);

impl<'de> Deserialize<'de> for KeysInOrder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = KeysInOrder;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeysInOrder, A::Error> {
                let mut keys = vec![];
                while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(KeysInOrder(keys))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_columns(text: &str, options: CsvOptions) -> (Vec<(String, DataType)>, Dialect) {
        let decoding = decoding(&TextKind::Csv(options), text.as_bytes(), true).unwrap();
        let columns = (decoding.schema.fields().iter())
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        (columns, decoding.dialect)
    }

    #[test]
    fn a_header_above_typed_rows_names_the_columns() {
        let text = "id,name,price,day,at,ok,empty\n1,a,1.5,2024-01-01,2024-01-01 10:00:00,true,\n";
        let (columns, dialect) = csv_columns(text, CsvOptions::default());
        use DataType::*;
        let types = [
            Int64,
            Utf8,
            Float64,
            Date32,
            Timestamp(TimeUnit::Microsecond, None),
            Boolean,
            Utf8,
        ];
        let names = ["id", "name", "price", "day", "at", "ok", "empty"];
        let expected: Vec<_> = names.iter().map(|n| n.to_string()).zip(types).collect();
        assert_eq!(columns, expected);
        assert!(matches!(
            dialect,
            Dialect::Csv {
                header: true,
                delimiter: b',',
                ..
            }
        ));
    }

    #[test]
    fn rows_without_a_header_are_column0_and_on_and_the_delimiter_is_found() {
        let (columns, dialect) = csv_columns("1|x;y|2.5\n2|z|3\n", CsvOptions::default());
        let names: Vec<_> = columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["column0", "column1", "column2"]);
        assert_eq!(columns[0].1, DataType::Int64);
        assert!(matches!(
            dialect,
            Dialect::Csv {
                header: false,
                delimiter: b'|',
                ..
            }
        ));
        // All text: the first row is taken as the header, as DuckDB does.
        let (columns, _) = csv_columns("a,a,\nx,y,z\n", CsvOptions::default());
        let names: Vec<_> = columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "a_1", "column2"]);
    }

    #[test]
    fn options_override_the_sniffer() {
        let options = CsvOptions {
            header: Some(false),
            all_varchar: true,
            ..CsvOptions::default()
        };
        let (columns, _) = csv_columns("a,b\n1,2\n", options);
        assert!(columns.iter().all(|(_, t)| *t == DataType::Utf8));
        assert_eq!(columns[0].0, "column0");
    }

    #[test]
    fn json_keys_keep_their_order_and_dates_their_type() {
        let text = b"[{\"z\": 1, \"day\": \"2024-01-02\", \"a\": {\"b\": 1.5}},\n {\"n\": null, \"z\": 2}]";
        let decoding = decoding(&TextKind::Json(JsonLayout::Auto), text, true).unwrap();
        let names: Vec<_> = decoding
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["z", "day", "a", "n"]);
        assert_eq!(decoding.schema.field(1).data_type(), &DataType::Date32);
        assert_eq!(decoding.schema.field(3).data_type(), &DataType::Utf8);
        let error = decoding_error(b"1\n2\n");
        assert!(error.contains("not objects"), "{error}");
        assert!(decoding_error(b"{oops").contains("not JSON"));
        assert!(decoding_error(b"  \n").contains("empty"));
        assert!(decoding_error(b"[ ]").contains("no object"));
    }

    fn decoding_error(text: &[u8]) -> String {
        decoding(&TextKind::Json(JsonLayout::Auto), text, true).unwrap_err()
    }
}
