//! Pruning before any data is read: files by the values the listing gives them (hive and
//! virtual columns), row groups by the min/max statistics in their footer.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::Expr;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};

/// The filters that name only columns of `schema`, as one predicate over min/max
/// statistics; none when no filter applies or DataFusion cannot build one.
pub fn pruning_predicate(
    state: &dyn Session,
    filters: &[Expr],
    schema: &SchemaRef,
) -> Result<Option<PruningPredicate>> {
    let on_schema: Vec<Expr> = filters
        .iter()
        .filter(|f| {
            f.column_refs()
                .iter()
                .all(|c| schema.index_of(&c.name).is_ok())
        })
        .cloned()
        .collect();
    let Some(filter) = conjunction(on_schema) else {
        return Ok(None);
    };
    let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
    let physical = state.create_physical_expr(filter, &df_schema)?;
    Ok(PruningPredicateBuilder::new()
        .with_file_schema(Arc::clone(schema))
        .try_build(physical)
        .ok())
}

/// Which row groups of one file may hold rows that pass `predicate`.
pub fn row_groups_to_read(
    predicate: Option<&PruningPredicate>,
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    table_schema: &SchemaRef,
) -> Vec<bool> {
    let all: Vec<usize> = (0..metadata.num_row_groups()).collect();
    match predicate {
        Some(predicate) => row_groups_passing(predicate, metadata, &all, file_schema, table_schema),
        None => vec![true; all.len()],
    }
}

/// Which of the row groups `chosen` (indexes into the file's) may hold rows that pass
/// `predicate`, in their order: a bucket's, pruned again once dynamic filters are known.
pub fn row_groups_passing(
    predicate: &PruningPredicate,
    metadata: &ParquetMetaData,
    chosen: &[usize],
    file_schema: &Schema,
    table_schema: &SchemaRef,
) -> Vec<bool> {
    let groups = chosen
        .iter()
        .filter_map(|&rg| metadata.row_groups().get(rg))
        .collect::<Vec<_>>();
    if groups.len() != chosen.len() {
        return vec![true; chosen.len()]; // a row group the footer lacks: the read names it
    }
    let stats = RowGroupStatistics {
        metadata,
        groups,
        file_schema,
        table_schema,
    };
    // Pruning is an optimisation: if statistics cannot be used, read everything.
    predicate
        .prune(&stats)
        .unwrap_or_else(|_| vec![true; chosen.len()])
}

/// Which files pass the `filters` that name only columns of `listing_columns` (one row
/// per file: hive and virtual columns, or a metadata table's file names); `true` keeps a
/// file. Filters on other columns are left to the scan.
pub fn files_passing(
    state: &dyn Session,
    filters: &[Expr],
    listing_columns: &RecordBatch,
) -> Result<Vec<bool>> {
    let schema = listing_columns.schema();
    let on_listing: Vec<Expr> = filters
        .iter()
        .filter(|f| {
            let columns = f.column_refs();
            !columns.is_empty() && columns.iter().all(|c| schema.index_of(&c.name).is_ok())
        })
        .cloned()
        .collect();
    let Some(filter) = conjunction(on_listing) else {
        return Ok(vec![true; listing_columns.num_rows()]);
    };
    let filter =
        state.create_physical_expr(filter, &DFSchema::try_from(schema.as_ref().clone())?)?;
    let value = filter
        .evaluate(listing_columns)?
        .into_array(listing_columns.num_rows())?;
    let mask = value
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| {
            datafusion::error::DataFusionError::Plan("file filter is not boolean".into())
        })?;
    Ok((0..mask.len())
        .map(|i| mask.is_valid(i) && mask.value(i))
        .collect())
}

struct RowGroupStatistics<'a> {
    metadata: &'a ParquetMetaData,
    /// The row groups whose statistics are asked (all of the file's, or a bucket's).
    groups: Vec<&'a RowGroupMetaData>,
    file_schema: &'a Schema,
    table_schema: &'a SchemaRef,
}

impl RowGroupStatistics<'_> {
    fn converter(&self, column: &Column) -> Option<StatisticsConverter<'_>> {
        StatisticsConverter::try_new(
            &column.name,
            self.file_schema,
            self.metadata.file_metadata().schema_descr(),
        )
        .ok()
    }

    /// Statistics come in the file's type; the predicate speaks the table's (which a schema
    /// override may change). Cast, or give up on this column.
    fn in_table_type(&self, column: &Column, values: ArrayRef) -> Option<ArrayRef> {
        let wanted = self
            .table_schema
            .field_with_name(&column.name)
            .ok()?
            .data_type();
        if values.data_type() == wanted {
            Some(values)
        } else {
            cast(&values, wanted).ok()
        }
    }
}

impl PruningStatistics for RowGroupStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        let mins = self
            .converter(column)?
            .row_group_mins(self.groups.iter().copied())
            .ok()?;
        self.in_table_type(column, mins)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        let maxes = self
            .converter(column)?
            .row_group_maxes(self.groups.iter().copied())
            .ok()?;
        self.in_table_type(column, maxes)
    }

    fn num_containers(&self) -> usize {
        self.groups.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts = self
            .converter(column)?
            .row_group_null_counts(self.groups.iter().copied())
            .ok()?;
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self
            .groups
            .iter()
            .map(|rg| Some(rg.num_rows() as u64))
            .collect();
        Some(Arc::new(counts))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
