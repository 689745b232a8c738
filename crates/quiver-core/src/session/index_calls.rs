//! The index in SQL: `CALL quiver_index_build('glob' [, 'to'])`, `quiver_index_refresh` and
//! `quiver_index_show` do what `quiver index build|refresh|show` does, wherever SQL runs: a
//! scheduled job on Lambda refreshes an index with a CALL, as a materialized view would.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
};

use crate::index::IndexStatus;

/// What a CALL asks of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexAction {
    Build,
    Refresh,
    Show,
}

/// The index call `function` names, with its glob and optional location; `None` for any
/// other procedure.
pub fn index_call(function: &Function) -> Option<Result<(IndexAction, String, Option<String>)>> {
    let action = match function.name.to_string().to_ascii_lowercase().as_str() {
        "quiver_index_build" => IndexAction::Build,
        "quiver_index_refresh" => IndexAction::Refresh,
        "quiver_index_show" => IndexAction::Show,
        _ => return None,
    };
    let usage = || {
        DataFusionError::Plan(format!(
            "{} takes a glob and optionally where the index lives, e.g. {}('s3://bucket/events/*.parquet')",
            function.name, function.name
        ))
    };
    let FunctionArguments::List(list) = &function.args else {
        return Some(Err(usage()));
    };
    let strings: Option<Vec<String>> = list
        .args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
                Value::SingleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    Some(match strings.as_deref() {
        Some([glob]) => Ok((action, glob.clone(), None)),
        Some([glob, to]) => Ok((action, glob.clone(), Some(to.clone()))),
        _ => Err(usage()),
    })
}

/// One row: where the index is, what it holds, what changed, what a refresh read.
pub fn status_batch(status: &IndexStatus) -> Result<RecordBatch> {
    let text = |v: &str| Arc::new(StringArray::from(vec![v.to_string()])) as ArrayRef;
    let number = |v: u64| Arc::new(UInt64Array::from(vec![v])) as ArrayRef;
    let refresh = status.refresh.clone().unwrap_or_default();
    Ok(RecordBatch::try_from_iter([
        ("location", text(&status.location)),
        ("glob", text(&status.glob)),
        ("files", number(status.files as u64)),
        ("changed", number(status.changed as u64)),
        ("deleted", number(status.deleted as u64)),
        ("footers_read", number(refresh.footers_read as u64)),
        ("built_at_ms", number(status.built_at_ms)),
    ])?)
}
