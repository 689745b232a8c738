//! Decoding one bucket: DataFusion's Parquet reader over the bucket's bytes (through
//! `BucketReaderFactory`), with the pushed filters it is given to apply to rows, and its
//! fixed-length decimals converted as they come out (see `fixed_decimals`). A decoder's
//! error or panic on a file's pages becomes an error that names the file.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::config::{ConfigOptions, TableParquetOptions};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::object_store::ObjectStoreUrl;
use datafusion::datasource::physical_plan::parquet::ParquetAccessPlan;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use parquet::file::metadata::ParquetMetaData;

use super::field_ids::ByFieldId;
use super::input::BucketInput;
use super::key_share::keeps_few;
use super::late::{is_wide, Late};
use super::reader::BucketReaderFactory;
use super::BucketScanExec;
use crate::error::QuiverError;

impl BucketScanExec {
    /// One fetched (or on-demand) bucket decoded by DataFusion's Parquet reader, its
    /// fixed-length decimals converted as they come out (see `fixed_decimals`).
    pub(super) fn decode(
        &self,
        file: PartitionedFile,
        context: Arc<TaskContext>,
        late: &Arc<Late>,
    ) -> Result<SendableRecordBatchStream> {
        let input = file.extension::<Arc<BucketInput>>().cloned();
        let decoding_schema = input.as_ref().and_then(|input| input.file_schema.clone());
        let file_schema = decoding_schema
            .clone()
            .unwrap_or_else(|| Arc::new(self.file_schema()));
        let listing_fields = self.table_schema.fields()[self.file_columns..].to_vec();
        let config = context.session_config().options();
        let config_pushes = config.execution.parquet.pushdown_filters;
        let row_groups = file
            .extension::<ParquetAccessPlan>()
            .map(ParquetAccessPlan::row_group_indexes)
            .unwrap_or_default();
        let late = match &input {
            Some(input) if config_pushes && late.pays() => self
                .late_filter(&file_schema, &input.metadata, &row_groups)?
                .map(|filter| (filter, late, rows_of(&input.metadata, &row_groups))),
            _ => None,
        };
        let row_filter = match (&late, &input) {
            (Some((filter, ..)), _) => Some(Arc::clone(filter)),
            (None, Some(input)) => {
                self.row_filter(&file_schema, config, &input.metadata, &row_groups)?
            }
            (None, None) => None,
        };
        let mut source = ParquetSource::new(
            TableSchema::builder(file_schema)
                .with_table_partition_cols(listing_fields)
                .build(),
        )
        .with_table_parquet_options(late_options(late.is_some()))
        .with_parquet_file_reader_factory(Arc::new(BucketReaderFactory))
        .with_enable_page_index(false);
        if let Some(filter) = row_filter {
            // The footers' statistics pruned the row groups already, and bloom filters are
            // bytes no bucket planned: the decoder only filters rows.
            source = source
                .with_predicate(filter)
                .with_pushdown_filters(true)
                .with_reorder_filters(config.execution.parquet.reorder_filters)
                .with_bloom_filter_on_read(false);
        }
        let config =
            FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
                .with_projection_indices(self.projection.clone())?
                .with_expr_adapter(Some(Arc::new(ByFieldId)))
                .with_file_group(FileGroup::new(vec![file]))
                .build();
        let mut decoded = DataSourceExec::from_data_source(config).execute(0, context)?;
        if let Some((_, late, rows)) = late {
            decoded = late.counted(rows, decoded);
        }
        if decoding_schema.is_none() {
            return Ok(decoded);
        }
        let schema = self.schema();
        let restored = {
            let schema = Arc::clone(&schema);
            decoded.map(move |batch| crate::fixed_decimals::restore(batch?, &schema))
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, restored)))
    }

    /// What of the pushed filters the decoder applies to the rows of `row_groups` of
    /// `metadata` when `decoding` is how it decodes the file columns: the join filters that
    /// keep few rows (`key_share`), and nothing unless DataFusion's
    /// `datafusion.execution.parquet.pushdown_filters` is on (Quiver's default).
    fn row_filter(
        &self,
        decoding: &Schema,
        config: &ConfigOptions,
        metadata: &ParquetMetaData,
        row_groups: &[usize],
    ) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        match &self.pushed_filter {
            Some(filter) if config.execution.parquet.pushdown_filters => {
                let pays = |now: &Arc<dyn PhysicalExpr>| {
                    keeps_few(now, decoding, metadata, row_groups, self.probed)
                };
                crate::pushdown::decodable(filter, &self.schema(), decoding, pays)
            }
            _ => Ok(None),
        }
    }

    /// Every pushed filter the decoder can apply when it decodes the file columns as
    /// `decoding` says, if the projection is wide beside them in `row_groups` of `metadata`
    /// (see `late`).
    fn late_filter(
        &self,
        decoding: &Schema,
        metadata: &ParquetMetaData,
        row_groups: &[usize],
    ) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        let pushed: Vec<_> = self
            .pushed_filter
            .iter()
            .chain(&self.pushed_predicate)
            .collect();
        let output = self.schema();
        let Some(filter) = crate::pushdown::late_decodable(&pushed, &output, decoding)? else {
            return Ok(None);
        };
        let filtered: Vec<String> = collect_columns(&filter)
            .into_iter()
            .map(|c| c.name().to_string())
            .collect();
        let filtered: Vec<&str> = filtered.iter().map(String::as_str).collect();
        let projected: Vec<&str> = output.fields().iter().map(|f| f.name().as_str()).collect();
        Ok(is_wide(metadata, row_groups, &projected, &filtered).then_some(filter))
    }

    /// The table's file columns, as the footers type them.
    pub(super) fn file_schema(&self) -> Schema {
        Schema::new(self.table_schema.fields()[..self.file_columns].to_vec())
    }
}

/// A decoder's error on a file's pages (a page that does not decompress or decode) as
/// "PATH: corrupt Parquet data: ...": Arrow's and Parquet's errors name no file. Errors
/// that already name it (a failed read) pass unchanged.
pub(super) fn naming_the_file(path: &str, error: DataFusionError) -> DataFusionError {
    let reason = error.to_string();
    match error {
        DataFusionError::ArrowError(..) | DataFusionError::ParquetError(..)
            if !reason.contains(path) =>
        {
            QuiverError::CorruptData {
                path: path.to_string(),
                reason,
            }
            .into()
        }
        other => other,
    }
}

/// A decoder's panic on a file's pages, as the error it should have been.
pub(super) fn corrupt_data(path: &str, panic: &str) -> DataFusionError {
    QuiverError::CorruptData {
        path: path.to_string(),
        reason: format!("a decoder failed ({panic})"),
    }
    .into()
}

/// The decoder's options: under late materialisation, without the cache of the filters'
/// decoded columns, which held a wide scan's filtered text (ClickBench q23's URL) a second
/// time for the projection (peak 650 MB against 540 MB without late materialisation) while
/// only the rows that pass are decoded again.
fn late_options(late: bool) -> TableParquetOptions {
    let mut options = TableParquetOptions::default();
    if late {
        options.global.max_predicate_cache_size = Some(0);
    }
    options
}

/// The rows of `row_groups` in `metadata`.
fn rows_of(metadata: &ParquetMetaData, row_groups: &[usize]) -> u64 {
    row_groups
        .iter()
        .filter_map(|&rg| metadata.row_groups().get(rg))
        .map(|group| group.num_rows() as u64)
        .sum()
}
