//! `IcebergTable`: a snapshot of an Iceberg table as a DataFusion table. Its columns come
//! from the table's metadata (no footer read to plan); a scan reads the snapshot's
//! manifests, applies their bounds as a file index (files drop before their footers), finds
//! the position deletes of the data files kept, and hands the rest to a `QuiverTable` of
//! those files: one scan, with its buckets, fetch, caches and metrics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::try_join_all;

use super::bounds::bound;
use super::equality::{self, EqualityDelete};
use super::manifests::{Content, ManifestEntry};
use super::partitions::manifests_to_read;
use super::{deletes, object_meta, plan_error, IcebergOptions, IcebergSnapshot};
use crate::index::{FileEntry, FileIndex};
use crate::metrics::QueryMetrics;
use crate::prune::pruning_predicate;
use crate::runtime::QuiverRuntime;
use crate::scan::{field_id, ManifestCounts};
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

    /// The data files `filters` may need, in groups that the same equality deletes apply
    /// to: each a table of its files (with their bounds and deleted rows) and the indexes
    /// of its deletes among those returned.
    async fn file_groups(
        &self,
        state: &dyn Session,
        runtime: &QuiverRuntime,
        filters: &[Expr],
    ) -> Result<(Vec<(QuiverTable, Vec<usize>)>, Vec<EqualityDelete>)> {
        let (entries, counts) = self.entries(state, runtime, filters).await?;
        let (data, deletes): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|e| e.content == Content::Data);
        if let Some(other) = data
            .iter()
            .chain(&deletes)
            .find(|d| !d.format.eq_ignore_ascii_case("parquet"))
        {
            let (file, why) = match other.content {
                Content::Data => ("data file", "only Parquet data files are read"),
                _ => ("delete file", "format 3 deletion vectors are not read yet"),
            };
            return Err(DataFusionError::NotImplemented(format!(
                "{}: {file} {} is {} ({why})",
                self.snapshot.location, other.path, other.format
            )));
        }
        if data.is_empty() {
            return Ok((vec![], vec![]));
        }
        let (equality, positions): (Vec<_>, Vec<_>) = deletes
            .into_iter()
            .partition(|d| d.content == Content::EqualityDeletes);
        let deleted = deletes::deleted_rows(runtime, &self.snapshot, &data, &positions).await?;
        let equality = equality::read_all(runtime, &self.iceberg_schema, equality).await?;
        let metas = data
            .iter()
            .map(|d| object_meta(runtime, &d.path, Some(d.size)));
        let metas = try_join_all(metas).await?;
        let exact = deleted.is_empty() && equality.is_empty();
        let index = Arc::new(self.file_index(&data, &metas, exact)?);
        let deleted = Arc::new(deleted);
        let mut groups: BTreeMap<Vec<usize>, Vec<ObjectMeta>> = BTreeMap::new();
        for (entry, meta) in data.iter().zip(metas) {
            let metadata = &self.snapshot.metadata;
            let applying = (0..equality.len())
                .filter(|&j| equality[j].applies_to(entry, metadata))
                .collect();
            groups.entry(applying).or_default().push(meta);
        }
        let name = &self.snapshot.location;
        let tables = groups
            .into_iter()
            .map(|(applying, metas)| {
                let table = QuiverTable::of_files(
                    name.clone(),
                    metas,
                    &self.iceberg_schema,
                    Arc::clone(&index),
                    &self.options,
                );
                (table.with_snapshot(Arc::clone(&deleted), counts), applying)
            })
            .collect();
        Ok((tables, equality))
    }

    /// `table`'s scan with the key columns of `deletes`, less the rows they delete, then
    /// with the columns asked for.
    async fn scan_without_deleted(
        &self,
        state: &dyn Session,
        table: &QuiverTable,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        deletes: &[&EqualityDelete],
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let mut wide = wanted.clone();
        for key in deletes.iter().flat_map(|d| &d.columns) {
            let column = self.schema.index_of(key)?;
            if !wide.contains(&column) {
                wide.push(column);
            }
        }
        let scan = table.scan(state, Some(&wide), filters, None).await?;
        let kept = equality::without_deleted(scan, deletes)?;
        if wide.len() == wanted.len() {
            return Ok(kept);
        }
        let output = kept.schema();
        let columns = (0..wanted.len()).map(|i| {
            let name = output.field(i).name();
            (
                Arc::new(Column::new(name, i)) as Arc<dyn PhysicalExpr>,
                name.clone(),
            )
        });
        Ok(Arc::new(ProjectionExec::try_new(columns, kept)?))
    }

    /// The manifests' bounds and null counts as a file index.
    fn file_index(
        &self,
        data: &[ManifestEntry],
        metas: &[ObjectMeta],
        exact: bool,
    ) -> Result<FileIndex> {
        let columns: Vec<_> = crate::index::indexed_fields(&self.iceberg_schema)
            .into_iter()
            .map(|field| (field_id(field), field.data_type()))
            .collect();
        let statistics = |entry: &ManifestEntry| {
            let statistic = |(id, data_type): &(Option<i32>, &DataType)| {
                let bound_of = |bounds: &HashMap<i32, Vec<u8>>| {
                    id.and_then(|id| bound(bounds.get(&id)?, data_type))
                        .unwrap_or_else(|| {
                            ScalarValue::try_from(*data_type).unwrap_or(ScalarValue::Null)
                        })
                };
                let nulls = id.and_then(|id| entry.null_counts.get(&id));
                (
                    bound_of(&entry.lower),
                    bound_of(&entry.upper),
                    nulls.map(|&n| n.max(0) as u64),
                )
            };
            columns.iter().map(statistic).collect()
        };
        let files: Vec<FileEntry> = data
            .iter()
            .zip(metas)
            .map(|(entry, meta)| FileEntry {
                meta: meta.clone(),
                rows: entry.records,
                row_groups: 0,
                statistics: statistics(entry),
            })
            .collect();
        FileIndex::of_entries(Arc::clone(&self.iceberg_schema), &files, exact)
    }
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
        let (groups, equality) = self.file_groups(state, &runtime, filters).await?;
        let mut plans = Vec::with_capacity(groups.len());
        for (table, applying) in &groups {
            let plan = match applying.as_slice() {
                [] => table.scan(state, projection, filters, limit).await?,
                applying => {
                    let deletes: Vec<_> = applying.iter().map(|&j| &equality[j]).collect();
                    (self.scan_without_deleted(state, table, projection, filters, &deletes)).await?
                }
            };
            plans.push(plan);
        }
        match plans.len() {
            0 => {
                let schema = match projection {
                    Some(p) => Arc::new(self.schema.project(p)?),
                    None => Arc::clone(&self.schema),
                };
                Ok(Arc::new(EmptyExec::new(schema)))
            }
            1 => Ok(plans.remove(0)),
            _ => UnionExec::try_new(plans),
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
