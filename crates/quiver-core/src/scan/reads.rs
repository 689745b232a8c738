//! The read plan: the byte ranges each bucket reads (its projected columns' chunks in its
//! row groups), known from the footers before any data page is read. The fetch and
//! `EXPLAIN COST` both take it from here, so they never disagree.

use std::ops::Range;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;

use super::pages::Pages;
use super::{BucketScanExec, ScanFile};
use crate::bucket::Bucket;
use crate::fetch::ProjectedColumns;
use crate::prune::row_groups_passing;
use crate::pushdown::{prunable, Prunable};
use crate::runtime::{ParquetFile, QuiverRuntime};
use crate::source::ObjectMeta;

/// The ranges one bucket reads from its object (see `bucket_reads`).
#[derive(Debug, Clone)]
pub struct BucketRead {
    pub meta: ObjectMeta,
    /// Whether what is fetched stays in the block cache (remote sources).
    pub cached: bool,
    pub ranges: Vec<Range<u64>>,
    /// The bucket's planned bytes, by which executors deal buckets to workers.
    pub planned: u64,
}

impl BucketScanExec {
    /// What each bucket will request, before coalescing: its object, whether the source's
    /// bytes go to the block cache, and its column chunks' ranges (from the footers, read
    /// now if planning did not).
    pub async fn bucket_reads(&self, runtime: &QuiverRuntime) -> Result<Vec<BucketRead>> {
        let mut reads = Vec::new();
        for bucket in self.partitions.iter().flatten() {
            let Some(file) = self.files.get(bucket.file) else {
                continue;
            };
            let opened = runtime.open(&file.meta, file.footer_len).await?;
            reads.push(BucketRead {
                ranges: self.bucket_ranges(file, &opened, bucket, None)?,
                meta: file.meta.clone(),
                cached: opened.reader.source.keeps_blocks(),
                planned: bucket.bytes,
            });
        }
        Ok(reads)
    }

    /// What the scan's pushed predicates rule out as a bucket opens, from one snapshot of
    /// its dynamic filters (see `pushdown::prunable`).
    pub(super) fn prunable_now(&self) -> Result<Prunable> {
        let predicates = self.pushed_predicate.iter().chain(&self.pushed_filter);
        prunable(predicates, &self.schema(), &self.file_schema())
    }

    /// `bucket` less the row groups that the dynamic filters pushed into the scan, as they
    /// stand now (`now`, see `pushdown::prunable`), rule out by `opened`'s statistics: a
    /// join's probe side opens its buckets once the build side is in, so its key bounds are
    /// known.
    pub(super) fn still_needed(
        &self,
        bucket: &Bucket,
        opened: &ParquetFile,
        now: &Prunable,
    ) -> Result<Bucket> {
        let unchanged = || Ok(bucket.clone());
        let Some(predicate) = now.row_groups.clone() else {
            return unchanged();
        };
        let files = Arc::new(self.file_schema());
        let builder = PruningPredicateBuilder::new().with_file_schema(Arc::clone(&files));
        let Ok(pruning) = builder.try_build(predicate) else {
            return unchanged();
        };
        let stored = opened.arrow_schema()?;
        let groups = &bucket.row_groups;
        let keep = row_groups_passing(&pruning, opened.metadata(), groups, &stored, &files);
        let row_groups = groups
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(rg, _)| *rg);
        Ok(Bucket {
            row_groups: row_groups.collect(),
            ..bucket.clone()
        })
    }

    /// The byte ranges of `bucket`'s projected column chunks in `file` (`opened`), sorted:
    /// of the row groups whose pages `pages` ruled out in part, only the pages left.
    pub(super) fn bucket_ranges(
        &self,
        file: &ScanFile,
        opened: &ParquetFile,
        bucket: &Bucket,
        pages: Option<&Pages>,
    ) -> Result<Vec<Range<u64>>> {
        let columns = self.columns_in(file, opened)?;
        let Some(pages) = pages else {
            return Ok(columns.ranges(&bucket.row_groups));
        };
        let mut ranges: Vec<Range<u64>> = bucket
            .row_groups
            .iter()
            .flat_map(|&rg| {
                pages
                    .ranges(rg, columns.leaves())
                    .unwrap_or_else(|| columns.ranges(&[rg]))
            })
            .filter(|r| r.end > r.start)
            .collect();
        ranges.sort_by_key(|r| r.start);
        Ok(ranges)
    }

    /// The projected file columns as `file`'s Parquet leaves: the planner's (which read
    /// the same version of its footer), or found in the footer now.
    fn columns_in<'a>(
        &self,
        file: &ScanFile,
        opened: &'a ParquetFile,
    ) -> Result<ProjectedColumns<'a>> {
        let metadata = opened.metadata();
        Ok(match &file.leaves {
            Some(leaves) => ProjectedColumns::of_leaves(metadata, leaves.clone()),
            None => {
                let stored = opened.arrow_schema()?;
                ProjectedColumns::new(metadata, &stored, &self.projected_file_columns())
            }
        })
    }

    /// The names of the file columns this scan outputs.
    pub(crate) fn projected_file_columns(&self) -> Vec<String> {
        let all: Vec<usize> = (0..self.table_schema.fields().len()).collect();
        self.projection
            .as_ref()
            .unwrap_or(&all)
            .iter()
            .filter(|&&i| i < self.file_columns)
            .map(|&i| self.table_schema.field(i).name().clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::scan::ScanSummary;
    use crate::source::{LocalSource, ObjectSource};
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A file of three row groups of columns `id` (Int64) and `name` (Utf8).
    async fn three_row_groups(dir: &std::path::Path) -> ObjectMeta {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let path = dir.join("t.parquet");
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .build();
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(properties)).unwrap();
        let ids = Int64Array::from_iter_values(0..300);
        let names = StringArray::from_iter_values((0..300).map(|i| format!("name {i}")));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(names)]).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        LocalSource.head(path.to_str().unwrap()).await.unwrap()
    }

    /// A scan of `name` (column 1) over `buckets` of the file at `meta`.
    fn scan(meta: &ObjectMeta, leaves: Option<Vec<usize>>, buckets: Vec<Bucket>) -> BucketScanExec {
        scan_of(meta, leaves, buckets, 1)
    }

    fn scan_of(
        meta: &ObjectMeta,
        leaves: Option<Vec<usize>>,
        buckets: Vec<Bucket>,
        column: usize,
    ) -> BucketScanExec {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let file = ScanFile {
            meta: meta.clone(),
            listing_values: vec![],
            footer_len: None,
            leaves,
            deleted_rows: None,
        };
        let projection = Some(vec![column]);
        let summary = ScanSummary::default();
        BucketScanExec::try_new(
            schema,
            2,
            projection,
            Arc::new(vec![file]),
            vec![buckets],
            summary,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn each_bucket_reads_its_projected_chunks_in_its_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let meta = three_row_groups(dir.path()).await;
        let runtime = QuiverRuntime::default();
        let opened = runtime.open(&meta, None).await.unwrap();
        let chunk = |rg: usize, leaf: usize| {
            let (start, length) = opened.metadata().row_group(rg).column(leaf).byte_range();
            start..start + length
        };
        let buckets = vec![
            Bucket {
                file: 0,
                row_groups: vec![0, 1],
                bytes: 10,
            },
            Bucket {
                file: 0,
                row_groups: vec![2],
                bytes: 5,
            },
        ];
        let reads = scan(&meta, None, buckets.clone())
            .bucket_reads(&runtime)
            .await
            .unwrap();
        assert_eq!(reads.len(), 2);
        assert_eq!(reads[0].ranges, vec![chunk(0, 1), chunk(1, 1)]);
        assert_eq!(reads[1].ranges, vec![chunk(2, 1)]);
        assert_eq!((reads[0].planned, reads[1].planned), (10, 5));
        assert!(!reads[0].cached, "the disk's bytes stay in the page cache");
        // The planner's leaves are read as given (here `id`'s, leaf 0), not found again.
        let planned = scan(&meta, Some(vec![0]), buckets)
            .bucket_reads(&runtime)
            .await
            .unwrap();
        assert_eq!(planned[1].ranges, vec![chunk(2, 0)]);
    }

    #[tokio::test]
    async fn a_bucket_drops_the_row_groups_a_dynamic_filter_rules_out_when_it_opens() {
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{binary, col, lit, DynamicFilterPhysicalExpr};
        let dir = tempfile::tempdir().unwrap();
        let meta = three_row_groups(dir.path()).await;
        let runtime = QuiverRuntime::default();
        let opened = runtime.open(&meta, None).await.unwrap();
        let bucket = Bucket {
            file: 0,
            row_groups: vec![0, 1, 2],
            bytes: 30,
        };
        // The scan outputs `id` only; a join's filter on it, before its build side is in.
        let mut scan = scan_of(&meta, None, vec![bucket.clone()], 0);
        let output = scan.schema();
        let id = col("id", &output).unwrap();
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&id)],
            lit(true),
        ));
        scan.pushed_filter = Some(Arc::clone(&filter) as _);
        assert_eq!(
            scan.still_needed(&bucket, &opened, &scan.prunable_now().unwrap())
                .unwrap()
                .row_groups,
            [0, 1, 2]
        );
        // Its bounds once known: ids 150..160 lie in row group 1 (ids 100..199).
        let at_least = binary(Arc::clone(&id), Operator::GtEq, lit(150i64), &output).unwrap();
        let at_most = binary(id, Operator::LtEq, lit(160i64), &output).unwrap();
        filter
            .update(binary(at_least, Operator::And, at_most, &output).unwrap())
            .unwrap();
        assert_eq!(
            scan.still_needed(&bucket, &opened, &scan.prunable_now().unwrap())
                .unwrap()
                .row_groups,
            [1]
        );
    }
}
