//! `IcebergTable`: a snapshot of an Iceberg table as a DataFusion table. Its columns come
//! from the table's metadata (no footer read to plan); a scan reads the snapshot's
//! manifests, applies their bounds as a file index (files drop before their footers), finds
//! the position deletes of the data files kept, and hands the rest to a `QuiverTable` of
//! those files: one scan, with its buckets, fetch, caches and metrics.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::try_join_all;

use super::bounds::bound;
use super::manifests::{Content, ManifestEntry};
use super::partitions::manifests_to_read;
use super::{deletes, plan_error, IcebergOptions, IcebergSnapshot};
use crate::index::{FileEntry, FileIndex};
use crate::metrics::QueryMetrics;
use crate::prune::pruning_predicate;
use crate::runtime::QuiverRuntime;
use crate::scan::{ManifestCounts, FIELD_ID};
use crate::source::ObjectMeta;
use crate::table::{QuiverTable, TableOptions};

#[derive(Debug)]
pub struct IcebergTable {
    snapshot: Arc<IcebergSnapshot>,
    /// The snapshot's columns as Iceberg types them (with their field ids) ...
    iceberg_schema: SchemaRef,
    /// ... and as the table types them (view types, as the session's Parquet settings say).
    schema: SchemaRef,
    options: TableOptions,
}

impl IcebergTable {
    /// The table at `location` (a folder or a metadata file), as `iceberg` asks to read it:
    /// its metadata file and manifest list read, nothing else.
    pub async fn open(
        runtime: &QuiverRuntime,
        location: &str,
        iceberg: &IcebergOptions,
        options: TableOptions,
    ) -> Result<Self> {
        let snapshot = IcebergSnapshot::open(runtime, location, iceberg).await?;
        let schema = snapshot.metadata.schema_of(snapshot.snapshot.as_ref());
        let iceberg_schema = Arc::new(schema.and_then(|s| s.arrow_schema()).map_err(plan_error)?);
        let typed = QuiverTable::typed_schema(&iceberg_schema, &options);
        Ok(Self {
            snapshot: Arc::new(snapshot),
            iceberg_schema,
            schema: typed,
            options,
        })
    }

    /// The snapshot's row count from its summary, if no deletes apply to it.
    fn exact_rows(&self) -> Option<usize> {
        let summary = &self.snapshot.snapshot.as_ref()?.summary;
        let count = |key: &str| -> Option<i64> { summary.get(key)?.as_str()?.parse().ok() };
        let deletes = ["total-position-deletes", "total-equality-deletes"];
        match deletes.iter().all(|key| count(key).unwrap_or(0) == 0) {
            true => Some(count("total-records")?.max(0) as usize),
            false => None,
        }
    }

    /// The live entries of the manifests that `filters` may need, and how many manifests
    /// were read and pruned.
    async fn entries(
        &self,
        state: &dyn Session,
        runtime: &QuiverRuntime,
        filters: &[Expr],
    ) -> Result<(Vec<ManifestEntry>, ManifestCounts)> {
        let snapshot = &self.snapshot;
        let manifests = &snapshot.manifests;
        let keep = match pruning_predicate(state, filters, &self.schema)? {
            Some(predicate) => {
                manifests_to_read(&predicate, &snapshot.metadata, manifests, &self.schema)
            }
            None => vec![true; manifests.len()],
        };
        let kept: Vec<_> = manifests.iter().zip(&keep).filter(|(_, k)| **k).collect();
        let counts = ManifestCounts {
            read: kept.len(),
            pruned: manifests.len() - kept.len(),
        };
        let metrics = runtime.metrics();
        QueryMetrics::add(&metrics.manifests, counts.read as u64);
        QueryMetrics::add(&metrics.manifests_pruned, counts.pruned as u64);
        let read = kept.iter().map(|(m, _)| snapshot.entries(runtime, m));
        let entries = try_join_all(read).await?.into_iter().flatten().collect();
        Ok((entries, counts))
    }

    /// The table of the data files `filters` may need, each with its manifest's bounds and
    /// deleted rows.
    async fn files_table(
        &self,
        state: &dyn Session,
        runtime: &QuiverRuntime,
        filters: &[Expr],
    ) -> Result<Option<QuiverTable>> {
        let (entries, counts) = self.entries(state, runtime, filters).await?;
        let (data, deletes): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|e| e.content == Content::Data);
        if let Some(equality) = deletes
            .iter()
            .find(|d| d.content == Content::EqualityDeletes)
        {
            return Err(DataFusionError::NotImplemented(format!(
                "{}: equality delete files ({}) are not read yet; position deletes are",
                self.snapshot.location, equality.path
            )));
        }
        if let Some(other) = data
            .iter()
            .find(|d| !d.format.eq_ignore_ascii_case("parquet"))
        {
            return Err(DataFusionError::NotImplemented(format!(
                "{}: data file {} is {}; only Parquet data files are read",
                self.snapshot.location, other.path, other.format
            )));
        }
        if data.is_empty() {
            return Ok(None);
        }
        let deleted = deletes::deleted_rows(runtime, &self.snapshot, &data, &deletes).await?;
        let metas = try_join_all(data.iter().map(|d| object_meta(runtime, d))).await?;
        let index = self.file_index(&data, &metas, deleted.is_empty())?;
        let name = self.snapshot.location.clone();
        let table = QuiverTable::of_files(name, metas, &self.iceberg_schema, index, &self.options);
        Ok(Some(table.with_snapshot(deleted, counts)))
    }

    /// The manifests' bounds and null counts as a file index.
    fn file_index(
        &self,
        data: &[ManifestEntry],
        metas: &[ObjectMeta],
        exact: bool,
    ) -> Result<FileIndex> {
        let columns: Vec<_> = crate::index::indexed_fields(&self.iceberg_schema);
        let files: Vec<FileEntry> = data
            .iter()
            .zip(metas)
            .map(|(entry, meta)| FileEntry {
                meta: meta.clone(),
                rows: entry.records,
                row_groups: 0,
                statistics: columns
                    .iter()
                    .map(|field| {
                        let id: Option<i32> = field
                            .metadata()
                            .get(FIELD_ID)
                            .and_then(|id| id.parse().ok());
                        let unknown = || {
                            ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null)
                        };
                        let bound_of = |bounds: &HashMap<i32, Vec<u8>>| {
                            id.and_then(|id| bound(bounds.get(&id)?, field.data_type()))
                                .unwrap_or_else(unknown)
                        };
                        let nulls = id.and_then(|id| entry.null_counts.get(&id));
                        (
                            bound_of(&entry.lower),
                            bound_of(&entry.upper),
                            nulls.map(|&n| n.max(0) as u64),
                        )
                    })
                    .collect(),
            })
            .collect();
        FileIndex::of_entries(Arc::clone(&self.iceberg_schema), &files, exact)
    }
}

/// A data file as the sources know it: locally its size and time (the local source holds
/// reads to them); remotely from the manifest alone, as Iceberg's files never change.
async fn object_meta(runtime: &QuiverRuntime, entry: &ManifestEntry) -> Result<ObjectMeta> {
    let remote = entry.path.contains("://") && !entry.path.starts_with("file://");
    if !remote {
        return Ok(runtime.source_for(&entry.path)?.head(&entry.path).await?);
    }
    Ok(ObjectMeta {
        path: entry.path.clone(),
        size: entry.size,
        version: format!("iceberg {}", entry.size),
    })
}

#[async_trait]
impl TableProvider for IcebergTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn statistics(&self) -> Option<Statistics> {
        let rows = self.exact_rows()?;
        let mut statistics = Statistics::new_unknown(&self.schema);
        statistics.num_rows = Precision::Exact(rows);
        Some(statistics)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let runtime = QuiverRuntime::of(state.config())?;
        // A count: the snapshot's summary holds it, when no deletes apply.
        if let (Some(rows), Some([])) = (self.exact_rows(), projection.map(Vec::as_slice)) {
            return rows_only(rows);
        }
        match self.files_table(state, &runtime, filters).await? {
            Some(table) => table.scan(state, projection, filters, limit).await,
            None => {
                let schema = match projection {
                    Some(p) => Arc::new(self.schema.project(p)?),
                    None => Arc::clone(&self.schema),
                };
                Ok(Arc::new(EmptyExec::new(schema)))
            }
        }
    }
}

/// `rows` rows of no columns, in batches of a million at most.
fn rows_only(rows: usize) -> Result<Arc<dyn ExecutionPlan>> {
    const BATCH: usize = 1 << 20;
    let schema = Arc::new(Schema::empty());
    let batches = (0..rows.div_ceil(BATCH))
        .map(|i| {
            let count = BATCH.min(rows - i * BATCH);
            let options = RecordBatchOptions::new().with_row_count(Some(count));
            RecordBatch::try_new_with_options(Arc::clone(&schema), vec![], &options)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(MemorySourceConfig::try_new_exec(&[batches], schema, None)?)
}
