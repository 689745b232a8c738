//! Parquet metadata as tables, under DuckDB's names and columns so its users can paste:
//! `parquet_metadata` (a row per file, row group and column chunk), `parquet_schema`,
//! `parquet_file_metadata` and `parquet_kv_metadata`. They read footers only: one request
//! per file at most (the footer cache), many in flight, never a data page; a filter on
//! `file_name` drops files before their footers are read.
//!
//! rows (their columns, built from footers) · text (values as DuckDB shows them) ·
//! inspect (a file's metadata as one value, for the page and `quiver inspect`).

pub mod inspect;
mod rows;
mod text;

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;

use crate::prune::files_passing;
use crate::runtime::{ParquetFile, QuiverRuntime};
use crate::source::ObjectMeta;

/// Which metadata table a function call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataKind {
    /// A row per file x row group x column chunk.
    Metadata,
    /// A row per schema element per file.
    Schema,
    /// A row per file.
    FileMetadata,
    /// A row per key-value pair in a footer.
    KvMetadata,
    /// A row per file the glob matches, its path only (DuckDB's `glob()`): no footer read.
    Files,
}

impl MetadataKind {
    /// The kind a table function name stands for (`parquet_metadata`, …).
    pub fn from_function(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "parquet_metadata" => Some(Self::Metadata),
            "parquet_schema" => Some(Self::Schema),
            "parquet_file_metadata" => Some(Self::FileMetadata),
            "parquet_kv_metadata" => Some(Self::KvMetadata),
            "glob" => Some(Self::Files),
            _ => None,
        }
    }

    pub fn function(self) -> &'static str {
        match self {
            Self::Metadata => "parquet_metadata",
            Self::Schema => "parquet_schema",
            Self::FileMetadata => "parquet_file_metadata",
            Self::KvMetadata => "parquet_kv_metadata",
            Self::Files => "glob",
        }
    }

    pub fn schema(self) -> SchemaRef {
        use DataType::{Binary, Boolean, Int64, UInt64, Utf8};
        let columns: &[(&str, DataType)] = match self {
            Self::Metadata => &[
                ("file_name", Utf8),
                ("row_group_id", Int64),
                ("row_group_num_rows", Int64),
                ("row_group_num_columns", Int64),
                ("row_group_bytes", Int64),
                ("column_id", Int64),
                ("file_offset", Int64),
                ("num_values", Int64),
                ("path_in_schema", Utf8),
                ("type", Utf8),
                ("stats_min", Utf8),
                ("stats_max", Utf8),
                ("stats_null_count", Int64),
                ("stats_distinct_count", Int64),
                ("stats_min_value", Utf8),
                ("stats_max_value", Utf8),
                ("compression", Utf8),
                ("encodings", Utf8),
                ("index_page_offset", Int64),
                ("dictionary_page_offset", Int64),
                ("data_page_offset", Int64),
                ("total_compressed_size", Int64),
                ("total_uncompressed_size", Int64),
                ("bloom_filter_offset", Int64),
                ("bloom_filter_length", Int64),
                ("min_is_exact", Boolean),
                ("max_is_exact", Boolean),
                ("row_group_compressed_bytes", Int64),
            ],
            Self::Schema => &[
                ("file_name", Utf8),
                ("name", Utf8),
                ("type", Utf8),
                ("type_length", Utf8),
                ("repetition_type", Utf8),
                ("num_children", Int64),
                ("converted_type", Utf8),
                ("scale", Int64),
                ("precision", Int64),
                ("field_id", Int64),
                ("logical_type", Utf8),
                ("column_id", Int64),
            ],
            Self::FileMetadata => &[
                ("file_name", Utf8),
                ("created_by", Utf8),
                ("num_rows", Int64),
                ("num_row_groups", Int64),
                ("format_version", Int64),
                ("encryption_algorithm", Utf8),
                ("footer_signing_key_metadata", Utf8),
                ("file_size_bytes", UInt64),
                ("footer_size", UInt64),
            ],
            Self::KvMetadata => &[("file_name", Utf8), ("key", Binary), ("value", Binary)],
            Self::Files => &[("file", Utf8)],
        };
        Arc::new(Schema::new(
            columns
                .iter()
                .map(|(name, data_type)| Field::new(*name, data_type.clone(), true))
                .collect::<Vec<_>>(),
        ))
    }

    /// The rows of these files' footers, in the order given.
    pub fn batch(self, footers: &[ParquetFile]) -> Result<RecordBatch> {
        let columns = match self {
            Self::Metadata => rows::metadata_columns(footers)?,
            Self::Schema => rows::schema_columns(footers),
            Self::FileMetadata => rows::file_metadata_columns(footers),
            Self::KvMetadata => rows::kv_columns(footers),
            Self::Files => {
                let paths = footers.iter().map(|f| Some(f.meta().path.clone()));
                vec![Arc::new(StringArray::from_iter(paths)) as ArrayRef]
            }
        };
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

/// A metadata table over the files a listing found; footers are read when it is scanned,
/// only for the files a `file_name` filter keeps.
#[derive(Debug)]
pub struct MetadataTable {
    kind: MetadataKind,
    files: Vec<ObjectMeta>,
}

impl MetadataTable {
    pub fn new(kind: MetadataKind, files: Vec<ObjectMeta>) -> Self {
        Self { kind, files }
    }

    /// The files whose name passes the filters on `file_name` alone.
    fn kept_files(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<ObjectMeta>> {
        let names = StringArray::from_iter(self.files.iter().map(|f| Some(f.path.as_str())));
        let schema = Schema::new(vec![Field::new("file_name", DataType::Utf8, true)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(names) as ArrayRef])?;
        let keep = files_passing(state, filters, &batch)?;
        Ok(self
            .files
            .iter()
            .zip(keep)
            .filter(|(_, keep)| *keep)
            .map(|(file, _)| file.clone())
            .collect())
    }
}

#[async_trait]
impl TableProvider for MetadataTable {
    fn schema(&self) -> SchemaRef {
        self.kind.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // A filter on file_name drops footers; DataFusion still applies it to rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = if self.kind == MetadataKind::Files {
            let paths = self.files.iter().map(|f| Some(f.path.as_str()));
            let column = Arc::new(StringArray::from_iter(paths)) as ArrayRef;
            RecordBatch::try_new(self.schema(), vec![column])?
        } else {
            let runtime = QuiverRuntime::of(state.config())?;
            let files = self.kept_files(state, filters)?;
            let footers = runtime.open_all(&files).await?;
            self.kind.batch(&footers)?
        };
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema(),
            projection.cloned(),
        )?)
    }
}
