//! Planning a table's scan: the filters on file columns become a pruning predicate, the
//! kept files' footers are read (many at once) into per-file work (row groups kept, with
//! their projected bytes) and statistics, and the work is dealt into buckets and
//! partitions of a `BucketScanExec`.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::ExecutionPlan;

use super::QuiverTable;
use crate::bucket::{group_buckets, plan_buckets, FileWork};
use crate::fetch::ProjectedColumns;
use crate::metrics::QueryMetrics;
use crate::prune::{pruning_predicate, row_groups_to_read};
use crate::runtime::QuiverRuntime;
use crate::scan::{renamed_by_field_id, BucketScanExec, ScanFile, ScanSummary};
use crate::statistics;

/// What one kept file gives the scan, from its footer.
pub(super) struct FilePlan {
    /// Its row groups after pruning, with their projected bytes.
    work: FileWork,
    row_groups: usize,
    statistics: Statistics,
    /// The Parquet leaves of the projected columns (see `ScanFile::leaves`).
    leaves: Vec<usize>,
}

/// The scan's columns: what it outputs, and which of them the files hold.
pub(super) struct ScanColumns {
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
    pub(super) fn scan_columns(&self, projection: Option<&Vec<usize>>) -> Result<ScanColumns> {
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

    /// The filters on file columns as one predicate over row-group statistics.
    pub(super) fn pruning_predicate(
        &self,
        state: &dyn Session,
        filters: &[Expr],
    ) -> Result<Option<PruningPredicate>> {
        pruning_predicate(state, filters, &self.file_schema())
    }

    /// The kept files' footers, read concurrently, each to the work its row groups hold.
    pub(super) async fn plan_files(
        &self,
        runtime: &QuiverRuntime,
        kept: &[usize],
        predicate: Option<&PruningPredicate>,
        columns: &ScanColumns,
    ) -> Result<Vec<FilePlan>> {
        let metas: Vec<_> = kept
            .iter()
            .map(|&i| self.listing.files[i].meta.clone())
            .collect();
        let (file_schema, names) = (&self.file_schema(), &columns.names());
        let opened = runtime.open_all(&metas).await?;
        kept.iter()
            .zip(opened)
            .map(|(&index, file)| {
                let metadata = file.metadata();
                let stored = file.arrow_schema()?;
                let stored = renamed_by_field_id(file_schema, &stored).map_or(stored, Arc::new);
                let keep = row_groups_to_read(predicate, metadata, &stored, file_schema);
                let projected = ProjectedColumns::new(metadata, &stored, names);
                let row_groups = (0..metadata.num_row_groups())
                    .filter(|&rg| keep[rg])
                    .map(|rg| (rg, projected.bytes(rg)))
                    .collect();
                let described = &columns.described;
                let statistics = if keep.iter().all(|&k| k) {
                    let all = file.footer.statistics(described, &stored, || {
                        statistics::kept_row_groups(metadata, &stored, described, &keep)
                    });
                    Arc::unwrap_or_clone(all)
                } else {
                    statistics::kept_row_groups(metadata, &stored, described, &keep)
                };
                Ok(FilePlan {
                    work: FileWork {
                        file: index,
                        row_groups,
                    },
                    row_groups: metadata.num_row_groups(),
                    statistics,
                    leaves: projected.leaves().to_vec(),
                })
            })
            .collect()
    }

    /// The files' work dealt into buckets and partitions, counted in the metrics, with the
    /// statistics the planner gets.
    pub(super) fn bucket_scan(
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
        let options = runtime.query().settings.options.buckets(
            state.config().target_partitions(),
            state.runtime_env().memory_pool.as_ref(),
        );
        let mut leaves = vec![None; self.listing.files.len()];
        let mut work = Vec::with_capacity(files.len());
        let mut files_statistics = Vec::with_capacity(files.len());
        for file in files {
            leaves[file.work.file] = Some(file.leaves);
            work.push(file.work);
            files_statistics.push(file.statistics);
        }
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
        let scan_files = (self.listing.files.iter().zip(leaves).enumerate())
            .map(|(i, (file, leaves))| ScanFile {
                meta: file.meta.clone(),
                footer_len: runtime.footers.encoded_len(&file.meta),
                listing_values: (0..listing_batch.num_columns())
                    .map(|c| {
                        let value = ScalarValue::try_from_array(listing_batch.column(c), i).ok()?;
                        (!value.is_null()).then(|| value.to_string())
                    })
                    .collect(),
                leaves,
                deleted_rows: self.deleted_rows.get(&file.meta.path).cloned(),
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
