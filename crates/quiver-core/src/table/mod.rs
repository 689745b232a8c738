//! `QuiverTable`: a set of Parquet files as one DataFusion table. Planning a scan walks
//! the flow of DESIGN.md: listing filters drop files, footers are read once each, row
//! groups are pruned by statistics, the rest become buckets, and a `BucketScanExec` reads
//! them. A table in listing-only mode answers from the listing and opens no file.
//!
//! schema (its columns) · listing (what the listing alone answers) · index (the persistent
//! index) · plan (the scan); the provider here strings them together.

mod index;
mod listing;
mod plan;
mod schema;

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;

use crate::index::FileIndex;
use crate::metrics::QueryMetrics;
use crate::options::{IndexSetting, Settings};
use crate::runtime::QuiverRuntime;
use crate::scan::{ManifestCounts, ScanSummary};
use crate::source::{list_files, ListedFile, Listing, ListingOptions, ObjectMeta};

#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// Columns whose type replaces the stored one (or that the files lack).
    pub schema_override: Option<SchemaRef>,
    /// Strings and binaries as view types, as DataFusion's Parquet reader decodes them
    /// (`datafusion.execution.parquet.schema_force_view_types`): no cast after decoding.
    pub view_types: bool,
    /// Binary columns as strings (`datafusion.execution.parquet.binary_as_string`).
    pub binary_as_string: bool,
    /// Which persistent index to consult.
    pub index: IndexSetting,
    /// Columns from every file, matched by name (`read_parquet(…, union_by_name => true)`):
    /// each file's footer is read while planning, columns a file lacks read as NULL, and a
    /// column's types in different files are widened to one. Otherwise the first file's.
    pub union_by_name: bool,
}

impl TableOptions {
    /// Options that follow the session's Parquet settings and the statement's own.
    pub fn for_statement(config: &ConfigOptions, settings: &Settings) -> Self {
        Self {
            view_types: config.execution.parquet.schema_force_view_types,
            binary_as_string: config.execution.parquet.binary_as_string,
            index: settings.index.clone(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone)]
pub struct QuiverTable {
    patterns: Vec<String>,
    listing: Arc<Listing>,
    /// File columns, then hive columns, then virtual columns (when `virtual_columns`).
    schema: SchemaRef,
    file_columns: usize,
    /// Whether `_path`, `_file` and `_size` are columns: only for statements that name one
    /// (see `session::virtual_columns`).
    virtual_columns: bool,
    listing_only: bool,
    /// Made from the listing alone: the file columns are not known yet.
    deferred: bool,
    /// The persistent index, when one is in use: it drops files before their footers.
    index: Option<Arc<FileIndex>>,
    /// Rows deleted since their files were written, by path (an Iceberg table's position
    /// deletes): the scan skips them.
    deleted_rows: Arc<HashMap<String, Vec<u64>>>,
    /// The manifests its files were found in (an Iceberg table's), for EXPLAIN.
    manifests: Option<ManifestCounts>,
    /// The `CREATE VIEW` that named it, when a view is this table (see
    /// `session::lazy_views`): it is then a view to the information schema.
    definition: Option<Arc<str>>,
}

impl QuiverTable {
    /// The table as the listing alone knows it: hive columns, and the virtual columns if
    /// `virtual_columns`; no file read. It can only answer listing-only queries;
    /// `with_file_columns` completes it.
    pub async fn list(
        runtime: &QuiverRuntime,
        patterns: Vec<String>,
        options: &ListingOptions,
        virtual_columns: bool,
    ) -> Result<Self> {
        let listing = list_files(&runtime.sources, &patterns, options).await?;
        let fields = schema::listing_fields(&listing, &[], virtual_columns);
        Ok(Self {
            patterns,
            listing: Arc::new(listing),
            schema: Arc::new(Schema::new(fields)),
            file_columns: 0,
            virtual_columns,
            listing_only: false,
            deferred: true,
            index: None,
            deleted_rows: Arc::default(),
            manifests: None,
            definition: None,
        })
    }

    /// A table of known files (an Iceberg snapshot's) with the columns `file_schema` gives
    /// and the statistics `index` holds: nothing listed, no footer read to plan.
    pub fn of_files(
        name: String,
        files: Vec<ObjectMeta>,
        file_schema: &Schema,
        index: Arc<FileIndex>,
        options: &TableOptions,
    ) -> Self {
        let files = files
            .into_iter()
            .map(|meta| ListedFile {
                meta,
                hive_values: vec![],
            })
            .collect();
        let listing = Listing {
            files,
            hive_fields: vec![],
            index: None,
        };
        let schema = Self::typed_schema(file_schema, options);
        Self {
            patterns: vec![name],
            listing: Arc::new(listing),
            file_columns: schema.fields().len(),
            schema,
            virtual_columns: false,
            listing_only: false,
            deferred: false,
            index: Some(index),
            deleted_rows: Arc::default(),
            manifests: None,
            definition: None,
        }
    }

    /// Stored columns as a table of `options` types them (see `schema::typed_fields`).
    pub fn typed_schema(stored: &Schema, options: &TableOptions) -> SchemaRef {
        Arc::new(Schema::new(schema::typed_fields(stored.clone(), options)))
    }

    /// The table as a snapshot's manifests give it: rows of its files deleted (sorted
    /// positions, by path), and how many manifests were read to find them.
    pub fn with_snapshot(
        self,
        deleted_rows: Arc<HashMap<String, Vec<u64>>>,
        manifests: ManifestCounts,
    ) -> Self {
        Self {
            deleted_rows,
            manifests: Some(manifests),
            ..self
        }
    }

    /// The table as the view `definition` (a `CREATE VIEW … AS SELECT * FROM` it) names it.
    pub fn named_by_view(self, definition: String) -> Self {
        Self {
            definition: Some(definition.into()),
            ..self
        }
    }

    /// The listed files, in path order.
    pub fn files(&self) -> Vec<ObjectMeta> {
        self.listing.files.iter().map(|f| f.meta.clone()).collect()
    }

    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    pub fn is_listing_only(&self) -> bool {
        self.listing_only
    }

    /// The same table answering from its listing alone: one row per file. Valid only under
    /// operators that ignore duplicates (DISTINCT, min, max), which the session checks.
    pub fn listing_only(&self) -> Self {
        Self {
            listing_only: true,
            ..self.clone()
        }
    }
}

#[async_trait]
impl TableProvider for QuiverTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// A view when a view is this table, as DuckDB lists `CREATE VIEW v AS SELECT * FROM
    /// 'path'`, and as DROP VIEW finds it.
    fn table_type(&self) -> TableType {
        match self.definition {
            Some(_) => TableType::View,
            None => TableType::Base,
        }
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.definition.as_deref()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Filters prune files and row groups; DataFusion still applies them to rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    /// Plans the scan in named steps: prune files on the listing, answer from the listing
    /// alone if the query reads no file column, else build the pruning predicate, read the
    /// kept files' footers into per-file work, and deal that work into buckets.
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let runtime = QuiverRuntime::of(state.config())?;
        let metrics = runtime.metrics();
        let started = web_time::Instant::now();
        let (kept, listing_batch) = self.kept_files(state, filters)?;
        QueryMetrics::add(
            &metrics.files_pruned,
            (self.listing.files.len() - kept.len()) as u64,
        );
        if self.listing_only {
            let plan = self.listing_scan(&kept, &listing_batch, projection)?;
            metrics.record_phase("list", started.elapsed());
            return Ok(plan);
        }
        if self.deferred {
            return Err(DataFusionError::Internal(format!(
                "table {} was planned from its listing alone but needs its files",
                self.patterns.join(", ")
            )));
        }
        let columns = self.scan_columns(projection)?;
        let predicate = self.pruning_predicate(state, filters)?;
        let (kept, index_pruned) = self.index_kept(kept, predicate.as_ref());
        QueryMetrics::add(&metrics.files_pruned, index_pruned as u64);
        QueryMetrics::add(&metrics.files_index_pruned, index_pruned as u64);
        let files = (self.plan_files(&runtime, &kept, predicate.as_ref(), &columns)).await?;
        metrics.record_phase("footers", started.elapsed());
        let summary = ScanSummary {
            manifests: self.manifests,
            files: kept.len(),
            files_pruned: self.listing.files.len() - kept.len(),
            files_index_pruned: index_pruned,
            ..Default::default()
        };
        self.bucket_scan(state, &runtime, summary, &listing_batch, &columns, files)
    }
}

/// The Quiver table behind a DataFusion table provider, if it is one.
pub fn as_quiver_table(provider: &dyn TableProvider) -> Option<&QuiverTable> {
    (provider as &dyn Any).downcast_ref::<QuiverTable>()
}
