//! Tables the SQL names by path, as written: a quoted path (`'data/*.parquet'`,
//! `'f.csv'`), or a call of a table function that reads files, with DuckDB's arguments: a
//! path or a list of paths, then named options (`name => value` or `name = value`).
//! `read_parquet` and the metadata tables (`parquet_metadata`, …, `glob`), `read_csv` and
//! `read_json` (with their `_auto` and `read_ndjson` spellings).

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr as SqlExpr, FunctionArg, FunctionArgExpr, ObjectName, Value,
};

use crate::iceberg::{IcebergOptions, IcebergRead, SnapshotChoice};
use crate::metadata::MetadataKind;
use crate::text::{Compression, CsvOptions, JsonLayout, TextFiles, TextKind};

/// A table the SQL names by path, with its options, as parsed from the statement.
#[derive(Debug, Clone, PartialEq)]
pub struct PathTable {
    /// The text the planner will look the table up by.
    pub key: String,
    /// The files' rows (`None`), or one of the tables of their footers.
    pub metadata: Option<MetadataKind>,
    pub patterns: Vec<String>,
    pub hive_partitioning: Option<bool>,
    /// `col TYPE, …` as written.
    pub schema: Option<String>,
    /// Columns of every file matched by name, rather than the first file's.
    pub union_by_name: bool,
    /// CSV or JSON files, and how to read them; Parquet otherwise.
    pub text: Option<TextFiles>,
    /// An Iceberg table at the path: what of it to read, and how.
    pub iceberg: Option<(IcebergRead, IcebergOptions)>,
}

impl PathTable {
    fn new(key: String, patterns: Vec<String>) -> Self {
        Self {
            key,
            metadata: None,
            patterns,
            hive_partitioning: None,
            schema: None,
            union_by_name: false,
            text: None,
            iceberg: None,
        }
    }

    /// `FROM 'path'`: read as its extension says.
    pub(super) fn quoted(path: String) -> Self {
        Self {
            text: TextFiles::by_extension(&path),
            ..Self::new(path.clone(), vec![path])
        }
    }
}

/// `'a/b.parquet'` (single quotes), or a double-quoted name that looks like a path.
pub(super) fn quoted_path(name: &ObjectName) -> Option<String> {
    let [part] = name.0.as_slice() else {
        return None;
    };
    let ident = part.as_ident()?;
    let value = &ident.value;
    let looks_like_path = value.contains('/')
        || value.contains('*')
        || value.ends_with(".parquet")
        || TextFiles::by_extension(value).is_some();
    match ident.quote_style {
        Some('\'') => Some(value.clone()),
        Some('"') | Some('`') if looks_like_path => Some(value.clone()),
        _ => None,
    }
}

/// The table a call of a file-reading function names; `None` for other functions.
pub(super) fn function_table(name: &ObjectName, args: &[FunctionArg]) -> Option<Result<PathTable>> {
    let function = name.to_string().to_ascii_lowercase();
    let csv = TextKind::Csv(CsvOptions::default());
    Some(match function.as_str() {
        "read_parquet" => parquet(name, args),
        "read_csv" | "read_csv_auto" => text(name, args, csv),
        "read_json" | "read_json_auto" => text(name, args, TextKind::Json(JsonLayout::Auto)),
        "read_ndjson" | "read_ndjson_auto" => text(name, args, TextKind::Json(JsonLayout::Lines)),
        "iceberg_scan" => iceberg(name, args, IcebergRead::Rows),
        "iceberg_snapshots" => iceberg(name, args, IcebergRead::Snapshots),
        "iceberg_metadata" => iceberg(name, args, IcebergRead::Metadata),
        _ => {
            let kind = MetadataKind::from_function(&function)?;
            arguments(name, args).and_then(|(table, options)| match options.first() {
                Some(_) => plan_err!("{function} takes a path or list of paths only"),
                None => Ok(PathTable {
                    metadata: Some(kind),
                    ..table
                }),
            })
        }
    })
}

/// The table with its paths, and the options as written (names lower-cased).
fn arguments<'a>(
    name: &ObjectName,
    args: &'a [FunctionArg],
) -> Result<(PathTable, Vec<(String, &'a SqlExpr)>)> {
    let key = format!(
        "{name}({})",
        args.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut patterns = vec![];
    let mut options = vec![];
    for arg in args {
        match arg {
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(value),
                ..
            } => options.push((name.value.to_lowercase(), value)),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            })) => match left.as_ref() {
                SqlExpr::Identifier(ident) => options.push((ident.value.to_lowercase(), right)),
                _ => return plan_err!("{name}: unexpected argument {arg}"),
            },
            FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) if patterns.is_empty() => {
                patterns = string_list(value)?
            }
            FunctionArg::Unnamed(_) => {
                return plan_err!("{name} takes one path or list of paths, then named options")
            }
            other => return plan_err!("{name}: unexpected argument {other}"),
        }
    }
    if patterns.is_empty() {
        return plan_err!("{name} needs a path, e.g. {name}('data/*.parquet')");
    }
    Ok((PathTable::new(key, patterns), options))
}

fn parquet(name: &ObjectName, args: &[FunctionArg]) -> Result<PathTable> {
    let (mut table, options) = arguments(name, args)?;
    for (option, value) in options {
        match option.as_str() {
            "hive_partitioning" => table.hive_partitioning = Some(boolean(value)?),
            "schema" => table.schema = Some(string(value)?),
            "union_by_name" => table.union_by_name = boolean(value)?,
            other => {
                return plan_err!(
                    "{name}: unknown option '{other}' (known: hive_partitioning, schema, union_by_name)"
                )
            }
        }
    }
    Ok(table)
}

/// DuckDB's `iceberg_scan` and its siblings: a table's folder or metadata file, then which
/// snapshot (`snapshot_from_id`, `snapshot_from_timestamp`), which metadata `version`, and
/// `allow_moved_paths`.
fn iceberg(name: &ObjectName, args: &[FunctionArg], read: IcebergRead) -> Result<PathTable> {
    let (mut table, options) = arguments(name, args)?;
    if table.patterns.len() != 1 {
        return plan_err!("{name} reads one table: give its folder or its metadata file");
    }
    let mut iceberg = IcebergOptions::default();
    for (option, value) in options {
        match option.as_str() {
            "allow_moved_paths" => iceberg.allow_moved_paths = boolean(value)?,
            "version" => iceberg.version = Some(string_or_number(value)?),
            "snapshot_from_id" => {
                let id = string_or_number(value)?;
                let id = id
                    .parse()
                    .or_else(|_| plan_err!("{name}: snapshot id {id} is not a number"))?;
                iceberg.snapshot = SnapshotChoice::Id(id)
            }
            "snapshot_from_timestamp" => {
                iceberg.snapshot = SnapshotChoice::AsOf(milliseconds(name, value)?)
            }
            // The rest of DuckDB's options change nothing Quiver reads.
            "version_name_format" | "metadata_compression_codec" | "mode" => {}
            other => {
                return plan_err!(
                    "{name}: unknown option '{other}' (known: snapshot_from_id, \
                     snapshot_from_timestamp, version, allow_moved_paths)"
                )
            }
        }
    }
    table.iceberg = Some((read, iceberg));
    Ok(table)
}

/// A timestamp argument (`TIMESTAMP '…'`, `'…'::TIMESTAMP` or text) as milliseconds since
/// the epoch, read as UTC as DuckDB reads it.
fn milliseconds(name: &ObjectName, value: &SqlExpr) -> Result<i64> {
    let text = match value {
        SqlExpr::TypedString(typed) => match &typed.value.value {
            Value::SingleQuotedString(s) => s.clone(),
            other => return plan_err!("{name}: expected a timestamp, found {other}"),
        },
        SqlExpr::Cast { expr, .. } => string(expr)?,
        other => string(other)?,
    };
    let millis = DataType::Timestamp(TimeUnit::Millisecond, None);
    match ScalarValue::try_from_string(text.clone(), &millis) {
        Ok(ScalarValue::TimestampMillisecond(Some(ms), _)) => Ok(ms),
        _ => plan_err!("{name}: '{text}' is not a timestamp"),
    }
}

fn string_or_number(value: &SqlExpr) -> Result<String> {
    match value {
        SqlExpr::Value(v) => match &v.value {
            Value::Number(n, _) => Ok(n.clone()),
            _ => string(value),
        },
        SqlExpr::UnaryOp { expr, .. } => Ok(format!("-{}", string_or_number(expr)?)),
        _ => string(value),
    }
}

/// Options the sniffer decides for itself, accepted and left to it.
const LEFT_TO_THE_SNIFFER: [&str; 3] = ["auto_detect", "sample_size", "maximum_object_size"];

fn text(name: &ObjectName, args: &[FunctionArg], mut kind: TextKind) -> Result<PathTable> {
    let (mut table, options) = arguments(name, args)?;
    let mut filename = false;
    let mut compression = None;
    for (option, value) in options {
        match (&mut kind, option.as_str()) {
            (_, "filename") => filename = boolean(value)?,
            (_, "compression") => match Compression::named(&string(value)?) {
                Some(named) => compression = named,
                None => {
                    return plan_err!(
                        "{name}: compression {value} is not one of auto, none, gzip, zstd"
                    )
                }
            },
            (_, option) if LEFT_TO_THE_SNIFFER.contains(&option) => {}
            (TextKind::Csv(csv), "header") => csv.header = Some(boolean(value)?),
            (TextKind::Csv(csv), "delim" | "sep" | "delimiter") => {
                csv.delimiter = Some(character(name, value)?)
            }
            (TextKind::Csv(csv), "quote") => csv.quote = Some(character(name, value)?),
            (TextKind::Csv(csv), "escape") => csv.escape = Some(character(name, value)?),
            (TextKind::Csv(csv), "nullstr" | "null") => csv.null_string = Some(string(value)?),
            (TextKind::Csv(csv), "all_varchar") => csv.all_varchar = boolean(value)?,
            (TextKind::Json(layout), "format") => {
                *layout = match string(value)?.to_ascii_lowercase().as_str() {
                    "auto" | "unstructured" => JsonLayout::Auto,
                    "array" => JsonLayout::Array,
                    "newline_delimited" | "nd" => JsonLayout::Lines,
                    other => {
                        return plan_err!(
                            "{name}: format '{other}' is not one of auto, array, newline_delimited"
                        )
                    }
                }
            }
            (TextKind::Json(_), "records")
                if string(value).is_ok_and(|v| v == "auto" || v == "true") => {}
            (TextKind::Json(_), "records") if boolean(value).is_ok_and(|v| v) => {}
            (kind, other) => {
                let known = match kind {
                    TextKind::Csv(_) => {
                        "header, delim (sep), quote, escape, nullstr, all_varchar, filename, compression"
                    }
                    TextKind::Json(_) => "format, records, filename, compression",
                };
                return plan_err!("{name}: option '{other}' is not supported (known: {known})");
            }
        }
    }
    table.text = Some(TextFiles {
        kind,
        filename,
        compression,
    });
    Ok(table)
}

/// One character, as a byte (`'\t'` written out is a tab too).
fn character(name: &ObjectName, value: &SqlExpr) -> Result<u8> {
    let text = string(value)?.replace("\\t", "\t");
    match text.as_bytes() {
        [byte] => Ok(*byte),
        _ => plan_err!("{name}: '{text}' is not one character"),
    }
}

fn string(value: &SqlExpr) -> Result<String> {
    match value {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Ok(s.clone()),
            other => plan_err!("expected a string, found {other}"),
        },
        other => plan_err!("expected a string, found {other}"),
    }
}

fn string_list(value: &SqlExpr) -> Result<Vec<String>> {
    match value {
        SqlExpr::Array(array) => array.elem.iter().map(string).collect(),
        other => Ok(vec![string(other)?]),
    }
}

fn boolean(value: &SqlExpr) -> Result<bool> {
    match value {
        SqlExpr::Value(v) => match &v.value {
            Value::Boolean(b) => Ok(*b),
            Value::Number(n, _) if n == "1" || n == "0" => Ok(n == "1"),
            Value::SingleQuotedString(s)
                if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") =>
            {
                Ok(s.eq_ignore_ascii_case("true"))
            }
            other => plan_err!("expected true or false, found {other}"),
        },
        other => plan_err!("expected true or false, found {other}"),
    }
}
