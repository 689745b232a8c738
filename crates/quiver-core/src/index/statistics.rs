//! The index's entries as DataFusion pruning statistics: one container per listed file.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};

use super::FileIndex;

/// The index's statistics for some files (one container each): rows of `index.entries`,
/// `None` where the index does not describe the file as listed.
pub(super) struct IndexStatistics<'a> {
    pub(super) index: &'a FileIndex,
    pub(super) table_schema: &'a Schema,
    pub(super) rows: Vec<Option<u32>>,
}

impl IndexStatistics<'_> {
    /// The statistic `name` (`min`, `max`, `null_count`) of `column`, per container.
    fn statistic(&self, column: &Column, name: &str) -> Option<ArrayRef> {
        let column_name = &column.name;
        let stats = self.index.entries.column_by_name("stats")?.as_struct();
        let column = stats.column_by_name(&column.name)?.as_struct();
        let values = take(
            column.column_by_name(name)?,
            &UInt32Array::from(self.rows.clone()),
            None,
        )
        .ok()?;
        match self.table_schema.field_with_name(column_name).ok() {
            Some(field) if name != "null_count" && field.data_type() != values.data_type() => {
                cast(&values, field.data_type()).ok()
            }
            _ => Some(values),
        }
    }

    fn entry(&self, name: &str) -> Option<ArrayRef> {
        let values = self.index.entries.column_by_name(name)?;
        take(values, &UInt32Array::from(self.rows.clone()), None).ok()
    }
}

impl PruningStatistics for IndexStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "min")
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "max")
    }

    fn num_containers(&self) -> usize {
        self.rows.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "null_count")
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let rows = self.entry("rows")?;
        cast(&rows, &DataType::UInt64).ok()
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}
