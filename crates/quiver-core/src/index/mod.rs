//! The persistent index: one Parquet file with a row per data file (path, etag, size, rows,
//! row groups, and per column its min, max and null count), so a filter drops files before
//! any footer is read. It lives beside the data at the glob's literal prefix
//! (`<prefix>/_quiver_index`, which the listing finds for free) or anywhere else.
//! An entry whose etag differs from the listing's is ignored for that file: a stale index
//! costs speed, never a wrong answer. The format is in docs/index.md.
//!
//! `file`: the stored form (Parquet, its key-value metadata); `entries`: building entries
//! from footers, and refreshing them; `statistics`: the entries as pruning statistics;
//! `commands`: build, refresh and show, as the command and `CALL` run them.

mod commands;
mod entries;
mod file;
mod statistics;

use std::collections::HashMap;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type, Schema, SchemaRef, UInt64Type};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::physical_optimizer::pruning::PruningPredicate;

use crate::source::{GlobPattern, ObjectMeta, INDEX_FILE_NAME};

pub use commands::{build_index, refresh_index, show_index, IndexStatus};
pub use entries::{indexed_fields, FileEntry};
use statistics::IndexStatistics;

/// Where the index of `pattern` lives by default: at its longest literal prefix.
pub fn default_location(pattern: &str) -> Result<String> {
    let glob = GlobPattern::new(pattern)?;
    let folder = if glob.is_literal() {
        format!("{}/", pattern.trim_end_matches('/'))
    } else {
        glob.prefix().to_string()
    };
    Ok(format!("{folder}{INDEX_FILE_NAME}"))
}

/// An index as read or built: one row per data file.
#[derive(Debug, Clone)]
pub struct FileIndex {
    /// `path, etag, size, rows, row_groups, stats{column{min, max, null_count}}`.
    entries: RecordBatch,
    /// The data files' schema.
    data_schema: SchemaRef,
    pub glob: String,
    pub built_at_ms: u64,
    /// Row of each path in `entries`.
    rows_by_path: HashMap<String, usize>,
    /// Whether its rows and bounds may answer a count or a min/max on their own.
    answers: bool,
}

/// What `refresh` did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RefreshSummary {
    /// Files whose footers were read: new or changed since the last build.
    pub footers_read: usize,
    /// Entries kept as they were.
    pub unchanged: usize,
    /// Entries of files no longer listed.
    pub dropped: usize,
}

impl FileIndex {
    fn new(
        entries: RecordBatch,
        data_schema: SchemaRef,
        glob: String,
        built_at_ms: u64,
    ) -> Result<Self> {
        let paths = entries.column(0).as_string::<i32>();
        let rows_by_path = paths
            .iter()
            .enumerate()
            .filter_map(|(row, path)| Some((path?.to_string(), row)))
            .collect();
        Ok(Self {
            entries,
            data_schema,
            glob,
            built_at_ms,
            rows_by_path,
            answers: true,
        })
    }

    /// Files indexed.
    pub fn len(&self) -> usize {
        self.entries.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data files' columns, as the first indexed file has them.
    pub fn data_schema(&self) -> &SchemaRef {
        &self.data_schema
    }

    /// Whether the entry of `file` describes the version the listing sees.
    pub fn is_fresh(&self, file: &ObjectMeta) -> bool {
        self.rows_by_path.get(&file.path).is_some_and(|&row| {
            let etags = self.entries.column(1).as_string::<i32>();
            etags.is_valid(row) && etags.value(row) == file.version
        })
    }

    /// Which of `files` may hold rows that pass `predicate`; files the index does not
    /// describe as listed are kept.
    /// `table_schema` gives the types the predicate compares in (e.g. view types).
    pub fn files_to_read(
        &self,
        predicate: &PruningPredicate,
        files: &[ObjectMeta],
        table_schema: &Schema,
    ) -> Vec<bool> {
        let statistics = IndexStatistics {
            index: self,
            table_schema,
            rows: files
                .iter()
                .map(|f| self.is_fresh(f).then(|| self.rows_by_path[&f.path] as u32))
                .collect(),
        };
        predicate
            .prune(&statistics)
            .unwrap_or_else(|_| vec![true; files.len()])
    }

    /// The rows of `files` together, if the index describes every one as listed.
    pub fn total_rows(&self, files: &[ObjectMeta]) -> Option<i64> {
        if !self.answers {
            return None;
        }
        let rows = self
            .entries
            .column_by_name("rows")?
            .as_primitive::<Int64Type>();
        files
            .iter()
            .map(|f| {
                self.is_fresh(f)
                    .then(|| rows.value(self.rows_by_path[&f.path]))
            })
            .sum()
    }

    /// The min and max of `column` over `files` (NULLs when every value is NULL), if the
    /// index describes every file as listed with exact statistics for it. Strings and
    /// binaries are never answered: writers may truncate their statistics.
    pub fn min_max(
        &self,
        files: &[ObjectMeta],
        column: &str,
    ) -> Option<(ScalarValue, ScalarValue)> {
        if !self.answers {
            return None;
        }
        let stats = self.entries.column_by_name("stats")?.as_struct();
        let column = stats.column_by_name(column)?.as_struct();
        let (mins, maxes) = (column.column(0), column.column(1));
        let nulls = column.column(2).as_primitive::<UInt64Type>();
        if matches!(
            mins.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
                | DataType::FixedSizeBinary(_)
        ) {
            return None;
        }
        let rows = self
            .entries
            .column_by_name("rows")?
            .as_primitive::<Int64Type>();
        let mut min = ScalarValue::try_from(mins.data_type()).ok()?;
        let mut max = min.clone();
        for file in files {
            if !self.is_fresh(file) {
                return None;
            }
            let row = self.rows_by_path[&file.path];
            if mins.is_null(row) || maxes.is_null(row) {
                // Unknown, unless the file's values are all NULL.
                let all_null = nulls.is_valid(row) && nulls.value(row) as i64 == rows.value(row);
                if all_null {
                    continue;
                }
                return None;
            }
            let (low, high) = (
                ScalarValue::try_from_array(mins, row).ok()?,
                ScalarValue::try_from_array(maxes, row).ok()?,
            );
            if min.is_null() || low.partial_cmp(&min)?.is_lt() {
                min = low;
            }
            if max.is_null() || high.partial_cmp(&max)?.is_gt() {
                max = high;
            }
        }
        Some((min, max))
    }
}
