//! `QuiverTable`: a set of Parquet files as one DataFusion table. Planning a scan walks
//! the flow of DESIGN.md: listing filters drop files, footers are read once each, row
//! groups are pruned by statistics, the rest become buckets, and a `BucketScanExec` reads
//! them. A table in listing-only mode answers from the listing and opens no file.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, RecordBatchOptions, UInt32Array};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{DFSchema, ScalarValue, Statistics};
use datafusion::datasource::file_format::parquet::{
    transform_binary_to_string, transform_schema_to_view,
};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::physical_plan::ExecutionPlan;
use futures::stream::{self, StreamExt, TryStreamExt};

use crate::bucket::{group_buckets, plan_buckets, FileWork};
use crate::error::QuiverError;
use crate::fetch::ProjectedColumns;
use crate::footer::arrow_schema;
use crate::index::FileIndex;
use crate::metrics::QueryMetrics;
use crate::options::{IndexSetting, QuiverOptions};
use crate::prune::{files_to_read, row_groups_to_read};
use crate::runtime::QuiverRuntime;
use crate::scan::{BucketScanExec, ScanFile, ScanSummary};
use crate::source::{list_files, Listing, ListingOptions};
use crate::statistics;

/// 64 footers in flight while planning: listing-sized concurrency for object storage.
const FOOTER_CONCURRENCY: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    pub listing: ListingOptions,
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
    /// Options that follow the session's Parquet settings.
    pub fn for_session(config: &ConfigOptions) -> Self {
        Self {
            view_types: config.execution.parquet.schema_force_view_types,
            binary_as_string: config.execution.parquet.binary_as_string,
            listing: ListingOptions {
                hive_partitioning: None,
                s3: QuiverOptions::of(config).s3(),
            },
            index: QuiverOptions::of(config).index(),
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
        let fields: Vec<Arc<Field>> = listing_fields(&listing, &[], virtual_columns);
        Ok(Self {
            patterns,
            listing: Arc::new(listing),
            schema: Arc::new(Schema::new(fields)),
            file_columns: 0,
            virtual_columns,
            listing_only: false,
            deferred: true,
            index: None,
        })
    }

    /// The full table: file columns from the first file's footer (or from the index, when
    /// it describes that file as listed), with `schema_override`.
    pub async fn with_file_columns(
        &self,
        runtime: &QuiverRuntime,
        options: &TableOptions,
    ) -> Result<Self> {
        let listing = &self.listing;
        let first = listing.files.first().ok_or_else(|| QuiverError::NoMatch {
            pattern: self.patterns.join(", "),
        })?;
        let index = self.find_index(runtime, options).await?;
        let stored = match &index {
            _ if options.union_by_name => self.union_schema(runtime, options).await?,
            Some(index) if index.is_fresh(&first.meta) => index.data_schema().as_ref().clone(),
            _ => stored_schema(runtime, &first.meta, options).await?,
        };

        let stored = if options.binary_as_string {
            transform_binary_to_string(&stored)
        } else {
            stored
        };
        let stored = if options.view_types {
            transform_schema_to_view(&stored)
        } else {
            stored
        };
        let mut fields: Vec<Arc<Field>> = stored.fields().iter().cloned().collect();
        if let Some(wanted) = &options.schema_override {
            for field in wanted.fields() {
                match fields.iter().position(|f| f.name() == field.name()) {
                    Some(i) => {
                        fields[i] = Arc::new(
                            fields[i]
                                .as_ref()
                                .clone()
                                .with_data_type(field.data_type().clone()),
                        )
                    }
                    None => fields.push(Arc::new(Field::new(
                        field.name(),
                        field.data_type().clone(),
                        true,
                    ))),
                }
            }
        }
        let file_columns = fields.len();
        let fields = listing_fields(listing, &fields, self.virtual_columns);
        Ok(Self {
            patterns: self.patterns.clone(),
            listing: Arc::clone(listing),
            schema: Arc::new(Schema::new(fields)),
            file_columns,
            virtual_columns: self.virtual_columns,
            listing_only: false,
            deferred: false,
            index,
        })
    }

    /// Every file's columns by name, in the order they first appear, each with one type
    /// that all its files' types widen to. Reads every footer (the scan finds them cached).
    async fn union_schema(
        &self,
        runtime: &QuiverRuntime,
        options: &TableOptions,
    ) -> Result<Schema> {
        let schemas: Vec<(String, Schema)> = stream::iter(self.listing.files.iter())
            .map(|file| async move {
                let schema = stored_schema(runtime, &file.meta, options).await?;
                Ok::<_, DataFusionError>((file.meta.path.clone(), schema))
            })
            .buffered(FOOTER_CONCURRENCY)
            .try_collect()
            .await?;
        let mut fields: Vec<Field> = vec![];
        let mut first_seen: Vec<&str> = vec![];
        for (path, schema) in &schemas {
            for field in schema.fields() {
                match fields.iter().position(|f| f.name() == field.name()) {
                    None => {
                        fields.push(field.as_ref().clone().with_nullable(true));
                        first_seen.push(path);
                    }
                    Some(i) if fields[i].data_type() == field.data_type() => {}
                    Some(i) => {
                        let types = [fields[i].data_type().clone(), field.data_type().clone()];
                        let Some(wider) = type_union_resolution(&types) else {
                            return Err(DataFusionError::Plan(format!(
                                "union_by_name: column '{}' is {} in {} but {} in {path}, and \
                                 no type holds both",
                                field.name(),
                                types[0],
                                first_seen[i],
                                types[1]
                            )));
                        };
                        fields[i] = fields[i].clone().with_data_type(wider);
                    }
                }
            }
        }
        Ok(Schema::new(fields))
    }

    /// The index `options` ask for: none for a single file, an error if an index named
    /// by URI cannot be read.
    async fn find_index(
        &self,
        runtime: &QuiverRuntime,
        options: &TableOptions,
    ) -> Result<Option<Arc<FileIndex>>> {
        if self.listing.files.len() < 2 {
            return Ok(None);
        }
        let s3 = &options.listing.s3;
        let meta = match &options.index {
            IndexSetting::Off => return Ok(None),
            IndexSetting::Auto => match &self.listing.index {
                Some(meta) => meta.clone(),
                None => return Ok(None),
            },
            IndexSetting::At(uri) => runtime.sources.for_path(uri, s3)?.head(uri).await?,
        };
        Ok(Some(Arc::new(FileIndex::read(runtime, &meta, s3).await?)))
    }

    /// The listed files, in path order.
    pub fn files(&self) -> Vec<crate::source::ObjectMeta> {
        self.listing.files.iter().map(|f| f.meta.clone()).collect()
    }

    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    pub fn is_listing_only(&self) -> bool {
        self.listing_only
    }

    /// The virtual columns this table has (those a file column of the same name does not
    /// hide), which `*` leaves out.
    pub fn virtual_columns(&self) -> Vec<String> {
        self.schema.fields()[self.file_columns..]
            .iter()
            .map(|field| field.name())
            .filter(|name| {
                crate::source::VIRTUAL_COLUMNS.contains(&name.as_str())
                    && !self.listing.hive_fields.iter().any(|h| h.name() == *name)
            })
            .cloned()
            .collect()
    }

    /// Whether `column` comes from the listing (hive or virtual) rather than the files.
    pub fn is_listing_column(&self, column: &str) -> bool {
        self.schema
            .index_of(column)
            .map(|i| i >= self.file_columns)
            .unwrap_or(false)
    }

    /// The same table answering from its listing alone: one row per file. Valid only under
    /// operators that ignore duplicates (DISTINCT, min, max), which the session checks.
    pub fn listing_only(&self) -> Self {
        Self {
            listing_only: true,
            ..self.clone()
        }
    }

    fn listing_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.schema.fields()[self.file_columns..].to_vec(),
        ))
    }

    /// One row per file: the values of every listing column.
    fn listing_batch(&self) -> Result<RecordBatch> {
        let schema = self.listing_schema();
        let hive = self.listing.hive_fields.len();
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let values = self
                    .listing
                    .files
                    .iter()
                    .map(|file| match field.name().as_str() {
                        "_path" | "_file" | "_size"
                            if !self
                                .listing
                                .hive_fields
                                .iter()
                                .any(|h| h.name() == field.name()) =>
                        {
                            let index = crate::source::VIRTUAL_COLUMNS
                                .iter()
                                .position(|v| v == field.name())
                                .unwrap_or(0);
                            file.virtual_values()[index].clone()
                        }
                        name => {
                            let index = self
                                .listing
                                .hive_fields
                                .iter()
                                .position(|h| h.name() == name)
                                .unwrap_or(hive);
                            file.hive_values
                                .get(index)
                                .cloned()
                                .unwrap_or(ScalarValue::Null)
                        }
                    });
                ScalarValue::iter_to_array(values)
            })
            .collect::<Result<Vec<_>>>()?;
        // A table with no listing columns still has a row per file.
        let rows = RecordBatchOptions::new().with_row_count(Some(self.listing.files.len()));
        Ok(RecordBatch::try_new_with_options(schema, columns, &rows)?)
    }

    /// Files that pass the filters on listing columns.
    fn kept_files(
        &self,
        state: &dyn Session,
        filters: &[Expr],
    ) -> Result<(Vec<usize>, RecordBatch)> {
        let batch = self.listing_batch()?;
        let on_listing: Vec<Expr> = filters
            .iter()
            .filter(|f| {
                let columns = f.column_refs();
                !columns.is_empty() && columns.iter().all(|c| self.is_listing_column(&c.name))
            })
            .cloned()
            .collect();
        let all: Vec<usize> = (0..self.listing.files.len()).collect();
        let Some(filter) = conjunction(on_listing) else {
            return Ok((all, batch));
        };
        let df_schema = DFSchema::try_from(batch.schema().as_ref().clone())?;
        let physical = state.create_physical_expr(filter, &df_schema)?;
        let keep = files_to_read(&physical, &batch)?;
        Ok((all.into_iter().filter(|&i| keep[i]).collect(), batch))
    }
}

#[async_trait]
impl TableProvider for QuiverTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
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
        let files = self
            .plan_files(state, &runtime, &kept, predicate.as_ref(), &columns)
            .await?;
        metrics.record_phase("footers", started.elapsed());
        let summary = ScanSummary {
            files: kept.len(),
            files_pruned: self.listing.files.len() - kept.len(),
            files_index_pruned: index_pruned,
            ..Default::default()
        };
        self.bucket_scan(state, &runtime, summary, &listing_batch, &columns, files)
    }
}

/// What one kept file gives the scan, from its footer.
struct FilePlan {
    /// Its row groups after pruning, with their projected bytes.
    work: FileWork,
    row_groups: usize,
    statistics: Statistics,
}

/// The scan's columns: what it outputs, and which of them the files hold.
struct ScanColumns {
    /// The projection DataFusion asked for (`None`: every column) ...
    projection: Option<Vec<usize>>,
    /// ... as the table column indexes the scan outputs.
    output: Vec<usize>,
    /// The projected file columns (the footers describe them) ...
    described: SchemaRef,
    /// ... and where each output column is among them (listing columns are not).
    described_at: Vec<Option<usize>>,
}

impl ScanColumns {
    fn names(&self) -> Vec<String> {
        self.described
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

impl QuiverTable {
    /// A listing-only query's answer: the kept rows of the listing itself.
    fn listing_scan(
        &self,
        kept: &[usize],
        listing_batch: &RecordBatch,
        projection: Option<&Vec<usize>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows: Vec<u32> = kept.iter().map(|&i| i as u32).collect();
        let batch =
            datafusion::arrow::compute::take_record_batch(listing_batch, &UInt32Array::from(rows))?;
        let listing_projection =
            projection.map(|p| p.iter().map(|&i| i - self.file_columns).collect::<Vec<_>>());
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.listing_schema(),
            listing_projection,
        )?)
    }

    fn scan_columns(&self, projection: Option<&Vec<usize>>) -> Result<ScanColumns> {
        let output: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let file_outputs: Vec<usize> = output
            .iter()
            .copied()
            .filter(|&i| i < self.file_columns)
            .collect();
        let described = Arc::new(self.schema.project(&file_outputs)?);
        let described_at = output
            .iter()
            .map(|i| file_outputs.iter().position(|f| f == i))
            .collect();
        Ok(ScanColumns {
            projection: projection.cloned(),
            output,
            described,
            described_at,
        })
    }

    /// The filters on file columns as one predicate over row-group statistics; none when
    /// no filter applies or DataFusion cannot build one.
    fn pruning_predicate(
        &self,
        state: &dyn Session,
        filters: &[Expr],
    ) -> Result<Option<PruningPredicate>> {
        let file_schema = self.file_schema();
        let on_files: Vec<Expr> = filters
            .iter()
            .filter(|f| {
                f.column_refs()
                    .iter()
                    .all(|c| file_schema.index_of(&c.name).is_ok())
            })
            .cloned()
            .collect();
        let Some(filter) = conjunction(on_files) else {
            return Ok(None);
        };
        let df_schema = DFSchema::try_from(file_schema.as_ref().clone())?;
        let physical = state.create_physical_expr(filter, &df_schema)?;
        Ok(PruningPredicateBuilder::new()
            .with_file_schema(file_schema)
            .try_build(physical)
            .ok())
    }

    fn file_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.schema.fields()[..self.file_columns].to_vec(),
        ))
    }

    /// The table's row count, if its index describes every file as listed.
    pub fn rows_from_index(&self) -> Option<i64> {
        self.index.as_ref()?.total_rows(&self.files())
    }

    /// The min and max of a file column from the index (see `FileIndex::min_max`).
    pub fn min_max_from_index(&self, column: &str) -> Option<(ScalarValue, ScalarValue)> {
        if self.is_listing_column(column) {
            return None;
        }
        self.index.as_ref()?.min_max(&self.files(), column)
    }

    /// The kept files that the index does not rule out, and how many it did.
    fn index_kept(
        &self,
        kept: Vec<usize>,
        predicate: Option<&PruningPredicate>,
    ) -> (Vec<usize>, usize) {
        let (Some(index), Some(predicate)) = (&self.index, predicate) else {
            return (kept, 0);
        };
        let files: Vec<_> = kept
            .iter()
            .map(|&i| self.listing.files[i].meta.clone())
            .collect();
        let keep = index.files_to_read(predicate, &files, &self.file_schema());
        let before = kept.len();
        let kept: Vec<usize> = kept
            .into_iter()
            .zip(keep)
            .filter_map(|(i, keep)| keep.then_some(i))
            .collect();
        let pruned = before - kept.len();
        (kept, pruned)
    }

    /// The kept files' footers, read concurrently, each to the work its row groups hold.
    async fn plan_files(
        &self,
        state: &dyn Session,
        runtime: &QuiverRuntime,
        kept: &[usize],
        predicate: Option<&PruningPredicate>,
        columns: &ScanColumns,
    ) -> Result<Vec<FilePlan>> {
        let s3 = &QuiverOptions::of(state.config().options()).s3();
        let metrics = &runtime.metrics();
        let (file_schema, names) = (&self.file_schema(), &columns.names());
        stream::iter(kept.iter().copied())
            .map(|index| async move {
                let meta = &self.listing.files[index].meta;
                let source = runtime.sources.for_path(&meta.path, s3)?;
                let metadata = runtime.footer(source.as_ref(), meta, metrics).await?;
                let stored = arrow_schema(&meta.path, &metadata)?;
                let keep = row_groups_to_read(predicate, &metadata, &stored, file_schema);
                let projected = ProjectedColumns::new(&metadata, &stored, names);
                let row_groups = (0..metadata.num_row_groups())
                    .filter(|&rg| keep[rg])
                    .map(|rg| (rg, projected.bytes(rg)))
                    .collect();
                let statistics =
                    statistics::kept_row_groups(&metadata, &stored, &columns.described, &keep);
                Ok::<_, DataFusionError>(FilePlan {
                    work: FileWork {
                        file: index,
                        row_groups,
                    },
                    row_groups: metadata.num_row_groups(),
                    statistics,
                })
            })
            .buffered(FOOTER_CONCURRENCY)
            .try_collect()
            .await
    }

    /// The files' work dealt into buckets and partitions, counted in the metrics, with the
    /// statistics the planner gets.
    fn bucket_scan(
        &self,
        state: &dyn Session,
        runtime: &QuiverRuntime,
        mut summary: ScanSummary,
        listing_batch: &RecordBatch,
        columns: &ScanColumns,
        files: Vec<FilePlan>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let metrics = &runtime.metrics();
        for file in &files {
            let read = file.work.row_groups.len();
            summary.row_groups += read;
            summary.row_groups_pruned += file.row_groups - read;
            summary.bytes_planned += file.work.row_groups.iter().map(|(_, b)| b).sum::<u64>();
        }
        let options = QuiverOptions::of(state.config().options()).buckets(
            state.config().target_partitions(),
            state.runtime_env().memory_pool.as_ref(),
        );
        let (work, files_statistics): (Vec<FileWork>, Vec<Statistics>) =
            files.into_iter().map(|f| (f.work, f.statistics)).unzip();
        let statistics = statistics::scan_statistics(
            &files_statistics,
            &columns.described,
            &columns.described_at,
            &self.schema.project(&columns.output)?,
        );
        let buckets = plan_buckets(&work, &options);
        QueryMetrics::add(&metrics.files, summary.files as u64);
        QueryMetrics::add(&metrics.row_groups, summary.row_groups as u64);
        QueryMetrics::add(&metrics.row_groups_pruned, summary.row_groups_pruned as u64);
        QueryMetrics::add(&metrics.buckets_total, buckets.len() as u64);
        QueryMetrics::add(&metrics.bytes_planned, summary.bytes_planned);
        let partitions = group_buckets(buckets, &options);
        let scan_files = self
            .listing
            .files
            .iter()
            .enumerate()
            .map(|(i, file)| ScanFile {
                meta: file.meta.clone(),
                footer_len: runtime.footers.encoded_len(&file.meta),
                listing_values: (0..listing_batch.num_columns())
                    .map(|c| {
                        let value = ScalarValue::try_from_array(listing_batch.column(c), i).ok()?;
                        (!value.is_null()).then(|| value.to_string())
                    })
                    .collect(),
            })
            .collect();
        Ok(Arc::new(
            BucketScanExec::try_new(
                Arc::clone(&self.schema),
                self.file_columns,
                columns.projection.clone(),
                Arc::new(scan_files),
                partitions,
                summary,
            )?
            .with_statistics(statistics),
        ))
    }
}

/// `file_fields`, then the listing's hive and (if asked) virtual columns that the files do
/// not have.
fn listing_fields(
    listing: &Listing,
    file_fields: &[Arc<Field>],
    virtual_columns: bool,
) -> Vec<Arc<Field>> {
    let mut fields = file_fields.to_vec();
    let virtual_fields = crate::source::listing_virtual_fields();
    let virtual_fields: &[Arc<Field>] = if virtual_columns {
        &virtual_fields
    } else {
        &[]
    };
    for field in listing.hive_fields.iter().chain(virtual_fields) {
        if !fields.iter().any(|f| f.name() == field.name()) {
            fields.push(Arc::clone(field));
        }
    }
    fields
}

/// A file's columns as its footer stores them (read through the footer cache).
async fn stored_schema(
    runtime: &QuiverRuntime,
    meta: &crate::source::ObjectMeta,
    options: &TableOptions,
) -> Result<Schema> {
    let source = runtime.sources.for_path(&meta.path, &options.listing.s3)?;
    let metadata = runtime
        .footer(source.as_ref(), meta, &runtime.metrics())
        .await?;
    Ok(arrow_schema(&meta.path, &metadata)?)
}

/// The Quiver table behind a DataFusion table provider, if it is one.
pub fn as_quiver_table(provider: &dyn TableProvider) -> Option<&QuiverTable> {
    (provider as &dyn Any).downcast_ref::<QuiverTable>()
}
