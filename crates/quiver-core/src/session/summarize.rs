//! `SUMMARIZE <table or query>`, as DuckDB has it: one row per column with its type, min,
//! max, approximate distinct count, average, standard deviation, quartiles, count and share
//! of nulls. One aggregate query computes every column's figures in one pass over the data;
//! its single row is then turned into a row per column.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
};

use crate::sql_types::sql_type_name;

/// What `CALL quiver_summarize('…')` (SUMMARIZE, rewritten by `dialect`) summarizes; `None`
/// for any other procedure.
pub fn summarize_call(function: &Function) -> Option<Result<String>> {
    if !function
        .name
        .to_string()
        .eq_ignore_ascii_case("quiver_summarize")
    {
        return None;
    }
    let target = match &function.args {
        FunctionArguments::List(list) => match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] => match &v.value {
                Value::SingleQuotedString(s) if !s.trim().is_empty() => Some(s.clone()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    Some(target.ok_or_else(|| {
        DataFusionError::Plan(
            "SUMMARIZE takes a table, a path or a query, e.g. SUMMARIZE 'data/*.parquet'".into(),
        )
    }))
}

/// The query whose columns are summarized: the target itself when it is a query, else all
/// of the table or path it names.
pub fn source_query(target: &str) -> String {
    let first = target
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    if matches!(first.as_str(), "SELECT" | "WITH" | "VALUES" | "") || target.starts_with('(') {
        target.to_string()
    } else {
        format!("SELECT * FROM {target}")
    }
}

/// Figures per column, in the order of the aggregate query's output.
const FIGURES: [&str; 9] = [
    "min",
    "max",
    "approx_unique",
    "avg",
    "std",
    "q25",
    "q50",
    "q75",
    "count",
];

/// One aggregate over `source` with every column's figures, then the row count.
pub fn summary_query(columns: &Schema, source: &str) -> String {
    let mut select = vec![];
    for (i, field) in columns.fields().iter().enumerate() {
        let c = format!("\"{}\"", field.name().replace('"', "\"\""));
        let data_type = field.data_type();
        let nested = data_type.is_nested();
        let numeric = data_type.is_numeric();
        let quartiles = data_type.is_integer() || data_type.is_floating();
        let text = |expr: String, when: bool| {
            if when {
                format!("CAST({expr} AS VARCHAR)")
            } else {
                "CAST(NULL AS VARCHAR)".to_string()
            }
        };
        select.push(text(format!("min({c})"), !nested));
        select.push(text(format!("max({c})"), !nested));
        select.push(if nested || *data_type == DataType::Null {
            "CAST(NULL AS BIGINT)".to_string()
        } else if data_type.is_floating() {
            // approx_distinct counts no floats: their text is as distinct as they are.
            format!("CAST(approx_distinct(CAST({c} AS VARCHAR)) AS BIGINT)")
        } else {
            format!("CAST(approx_distinct({c}) AS BIGINT)")
        });
        select.push(text(format!("avg({c})"), numeric));
        select.push(text(format!("stddev({c})"), numeric));
        for q in ["0.25", "0.5", "0.75"] {
            select.push(text(
                format!("approx_percentile_cont({q}) WITHIN GROUP (ORDER BY {c})"),
                quartiles,
            ));
        }
        select.push(format!("count({c})"));
        // Names of their own: two NULLs of one type would otherwise share one.
        let first = select.len() - FIGURES.len();
        for (figure, expr) in select[first..].iter_mut().enumerate() {
            *expr = format!("{expr} AS \"{i}_{figure}\"");
        }
    }
    select.push("count(*)".to_string());
    format!("SELECT {} FROM ({source}) AS summarized", select.join(", "))
}

/// The aggregate's single row as DuckDB's SUMMARIZE answer: a row per column of `columns`.
pub fn summary_batch(columns: &Schema, answer: &RecordBatch) -> Result<RecordBatch> {
    let figure = |column: usize, figure: usize| -> Result<Option<String>> {
        let array = cast(
            answer.column(column * FIGURES.len() + figure),
            &DataType::Utf8,
        )?;
        let array = array.as_string::<i32>();
        Ok((answer.num_rows() > 0 && array.is_valid(0)).then(|| array.value(0).to_string()))
    };
    let total = answer
        .column(answer.num_columns() - 1)
        .as_primitive_opt::<datafusion::arrow::datatypes::Int64Type>()
        .and_then(|a| (!a.is_empty()).then(|| a.value(0)))
        .unwrap_or(0);
    let n = columns.fields().len();
    let mut text: Vec<Vec<Option<String>>> = vec![Vec::with_capacity(n); FIGURES.len()];
    for column in 0..n {
        for (f, values) in text.iter_mut().enumerate() {
            values.push(figure(column, f)?);
        }
    }
    let number = |values: &[Option<String>]| -> ArrayRef {
        Arc::new(Int64Array::from_iter(
            values
                .iter()
                .map(|v| v.as_deref().and_then(|v| v.parse().ok())),
        ))
    };
    let strings = |values: &[Option<String>]| -> ArrayRef {
        Arc::new(StringArray::from_iter(values.iter().map(|v| v.as_deref())))
    };
    let counts: Vec<i64> = text[8]
        .iter()
        .map(|v| v.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect();
    let null_percentage = Decimal128Array::from_iter(counts.iter().map(|count| {
        (total > 0).then(|| ((total - count) as i128 * 10_000 + total as i128 / 2) / total as i128)
    }))
    .with_precision_and_scale(9, 2)?;
    let names = StringArray::from_iter_values(columns.fields().iter().map(|f| f.name()));
    let types = StringArray::from_iter_values(
        columns
            .fields()
            .iter()
            .map(|f| sql_type_name(f.data_type())),
    );
    Ok(RecordBatch::try_from_iter([
        ("column_name", Arc::new(names) as ArrayRef),
        ("column_type", Arc::new(types) as ArrayRef),
        ("min", strings(&text[0])),
        ("max", strings(&text[1])),
        ("approx_unique", number(&text[2])),
        ("avg", strings(&text[3])),
        ("std", strings(&text[4])),
        ("q25", strings(&text[5])),
        ("q50", strings(&text[6])),
        ("q75", strings(&text[7])),
        // DuckDB's count is the table's: its rows, nulls or not.
        (
            "count",
            Arc::new(Int64Array::from(vec![total; n])) as ArrayRef,
        ),
        ("null_percentage", Arc::new(null_percentage) as ArrayRef),
    ])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_paths_are_read_whole_and_queries_as_they_are() {
        assert_eq!(source_query("'d/*.parquet'"), "SELECT * FROM 'd/*.parquet'");
        assert_eq!(source_query("lineitem"), "SELECT * FROM lineitem");
        assert_eq!(source_query("select a from t"), "select a from t");
        assert_eq!(
            source_query("WITH x AS (SELECT 1) SELECT * FROM x"),
            "WITH x AS (SELECT 1) SELECT * FROM x"
        );
    }
}
