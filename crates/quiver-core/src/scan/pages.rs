//! The pages a bucket need not read. Where a file has a page index (parquet-rs and Spark
//! write one), the scan's predicates, its filter's static conjuncts and its dynamic filters
//! as they stand when the bucket opens, are judged against each page's min/max, as the
//! footer's statistics are against row groups' (DataFusion's page pruning does the
//! judging). The rows of the pages ruled out are skipped (a `RowSelection` per row group),
//! and only the pages that hold the others are fetched: the decoder, given the offset
//! index, asks for exactly those. Sorted columns gain most (TPC-DS's inventory by date).

use std::ops::Range;
use std::sync::Arc;

use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccess,
};
use datafusion::error::Result;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use parquet::arrow::arrow_reader::RowSelection;
use parquet::file::metadata::ParquetMetaData;

use super::BucketScanExec;
use crate::bucket::Bucket;
use crate::pushdown::Prunable;
use crate::runtime::ParquetFile;

/// The decoder's batch size (DataFusion's default). Parquet's reader widens a selection to
/// whole batches for a column both filtered and output, so the pages fetched are widened
/// alike; a wrong guess costs an unplanned read, never a wrong answer.
const BATCH_ROWS: usize = 8192;

/// What the page index leaves of a bucket.
#[derive(Debug)]
pub(super) struct Pages {
    /// The footer with its page index: the decoder reads pages alone only with it.
    pub metadata: Arc<ParquetMetaData>,
    /// Each row group whose pages were ruled out in part, with the rows still needed.
    pub selections: Vec<(usize, RowSelection)>,
    /// Row groups whose every page was ruled out.
    pub empty: Vec<usize>,
}

impl Pages {
    /// The rows skipped, for EXPLAIN ANALYZE.
    pub fn rows_skipped(&self) -> usize {
        let groups = self.metadata.row_groups();
        let partly: usize = self
            .selections
            .iter()
            .map(|(rg, selection)| groups[*rg].num_rows() as usize - selection.row_count())
            .sum();
        let wholly: usize = self
            .empty
            .iter()
            .map(|&rg| groups[rg].num_rows() as usize)
            .sum();
        partly + wholly
    }

    /// `bucket` less the row groups whose every page was ruled out.
    pub fn left_of(&self, bucket: &Bucket) -> Bucket {
        let row_groups = bucket.row_groups.iter();
        Bucket {
            row_groups: row_groups
                .filter(|rg| !self.empty.contains(rg))
                .copied()
                .collect(),
            ..bucket.clone()
        }
    }

    /// The rows of row group `rg` still needed, where pages of it were ruled out.
    pub fn selection(&self, rg: usize) -> Option<&RowSelection> {
        let mut selections = self.selections.iter();
        selections.find(|(r, _)| *r == rg).map(|(_, s)| s)
    }

    /// The byte ranges of `leaves` in row group `rg`: its selected pages (and dictionary)
    /// where pages were ruled out, else `None` (the whole chunks).
    pub fn ranges(&self, rg: usize, leaves: &[usize]) -> Option<Vec<Range<u64>>> {
        let selection = self.selection(rg)?;
        let rows = self.metadata.row_group(rg).num_rows() as usize;
        let widened = widened_to_batches(selection, rows);
        let offsets = &self.metadata.offset_index()?[rg];
        let mut ranges = vec![];
        for &leaf in leaves {
            let chunk = self.metadata.row_group(rg).column(leaf);
            let pages = &offsets.get(leaf)?.page_locations;
            let (start, _) = chunk.byte_range();
            match pages.first() {
                Some(first) if first.offset as u64 != start => {
                    ranges.push(start..first.offset as u64)
                }
                _ => {}
            }
            ranges.extend(widened.scan_ranges(pages));
        }
        Some(ranges)
    }
}

impl BucketScanExec {
    /// What `opened`'s page index leaves of `bucket` to read, judged by the scan's
    /// predicates now (`now`); `None` where the file has no page index, nothing is pushed,
    /// or no page is ruled out.
    pub(super) async fn pages_needed(
        &self,
        opened: &ParquetFile,
        bucket: &Bucket,
        now: &Prunable,
    ) -> Result<Option<Pages>> {
        let Some(predicate) = &now.pages else {
            return Ok(None);
        };
        let files = Arc::new(self.file_schema());
        let filter = PagePruningAccessPlanFilter::new(predicate, files);
        if filter.filter_number() == 0 {
            return Ok(None);
        }
        let Some(metadata) = opened.footer.with_page_index(&opened.reader).await else {
            return Ok(None);
        };
        let mut plan = ParquetAccessPlan::new_none(metadata.num_row_groups());
        for &rg in &bucket.row_groups {
            plan.scan(rg);
        }
        let stored = opened.arrow_schema()?;
        let parquet_schema = metadata.file_metadata().schema_descr();
        let unused = ExecutionPlanMetricsSet::new();
        let metrics = ParquetFileMetrics::new(0, &opened.meta().path, &unused);
        let plan =
            filter.prune_plan_with_page_index(plan, &stored, parquet_schema, &metadata, &metrics);
        let (mut selections, mut empty) = (vec![], vec![]);
        for &rg in &bucket.row_groups {
            match &plan.inner()[rg] {
                RowGroupAccess::Selection(s) if s.row_count() == 0 => empty.push(rg),
                RowGroupAccess::Selection(s) if s.skipped_row_count() > 0 => {
                    selections.push((rg, s.clone()))
                }
                RowGroupAccess::Skip => empty.push(rg),
                _ => {}
            }
        }
        if selections.is_empty() && empty.is_empty() {
            return Ok(None);
        }
        Ok(Some(Pages {
            metadata,
            selections,
            empty,
        }))
    }
}

/// `selection` of a row group of `rows` rows, each selected run widened to the batches
/// it touches.
fn widened_to_batches(selection: &RowSelection, rows: usize) -> RowSelection {
    let mut runs: Vec<Range<usize>> = vec![];
    let mut at = 0;
    for selector in selection.iter() {
        let end = at + selector.row_count;
        if !selector.skip && end > at {
            let start = at / BATCH_ROWS * BATCH_ROWS;
            let end = end.div_ceil(BATCH_ROWS) * BATCH_ROWS;
            match runs.last_mut() {
                Some(last) if last.end >= start => last.end = last.end.max(end),
                _ => runs.push(start..end),
            }
        }
        at = end;
    }
    for run in &mut runs {
        run.end = run.end.min(rows);
    }
    RowSelection::from_consecutive_ranges(runs.into_iter(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit};
    use datafusion::physical_plan::ExecutionPlan;
    use parquet::arrow::arrow_reader::RowSelector;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use crate::runtime::QuiverRuntime;
    use crate::scan::{ScanFile, ScanSummary};
    use crate::source::{LocalSource, ObjectSource};

    #[tokio::test]
    async fn a_sorted_column_reads_only_the_pages_its_predicate_can_match() {
        // 100,000 sorted ids and their names in one row group, 1,000 rows a page; parquet-rs
        // writes the page index by default.
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let path = dir.path().join("sorted.parquet");
        let properties = WriterProperties::builder()
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(1000)
            .set_dictionary_enabled(false)
            .build();
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(properties)).unwrap();
        let ids = Int64Array::from_iter_values(0..100_000);
        let names = StringArray::from_iter_values((0..100_000).map(|i| format!("name {i}")));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(ids), Arc::new(names)])
            .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let meta = LocalSource.head(path.to_str().unwrap()).await.unwrap();
        let runtime = QuiverRuntime::default();
        let opened = runtime.open(&meta, None).await.unwrap();
        let file = ScanFile {
            meta: meta.clone(),
            listing_values: vec![],
            footer_len: None,
            leaves: None,
            deleted_rows: None,
        };
        let mut scan = BucketScanExec::try_new(
            schema,
            2,
            None,
            Arc::new(vec![file]),
            vec![],
            ScanSummary::default(),
        )
        .unwrap();
        let bucket = Bucket {
            file: 0,
            row_groups: vec![0],
            bytes: 1,
        };
        assert!(scan
            .pages_needed(&opened, &bucket, &scan.prunable_now().unwrap())
            .await
            .unwrap()
            .is_none());
        // WHERE id >= 50000 AND id < 50050: page 50 alone can hold such ids.
        let output = scan.schema();
        let id = || col("id", &output).unwrap();
        let from = binary(id(), Operator::GtEq, lit(50_000i64), &output).unwrap();
        let to = binary(id(), Operator::Lt, lit(50_050i64), &output).unwrap();
        scan.pushed_predicate = Some(binary(from, Operator::And, to, &output).unwrap());
        let pages = scan
            .pages_needed(&opened, &bucket, &scan.prunable_now().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pages.rows_skipped(), 99_000);
        assert!(pages.empty.is_empty());
        // Fetched: the pages of the batch of 8,192 rows that holds page 50, both columns.
        let read: u64 = (pages.ranges(0, &[0, 1]).unwrap().iter())
            .map(|r| r.end - r.start)
            .sum();
        let chunk = |leaf| opened.metadata().row_group(0).column(leaf).byte_range().1;
        let whole = chunk(0) + chunk(1);
        assert!(read * 8 < whole, "read {read} of {whole} bytes");
        // An id no page holds rules out the row group.
        let beyond = binary(id(), Operator::Gt, lit(200_000i64), &output).unwrap();
        scan.pushed_predicate = Some(beyond);
        let pages = scan
            .pages_needed(&opened, &bucket, &scan.prunable_now().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pages.empty, [0]);
    }

    #[test]
    fn a_selection_widens_to_the_batches_it_touches() {
        let selection = RowSelection::from(vec![
            RowSelector::skip(10_000),
            RowSelector::select(10),
            RowSelector::skip(30_000),
            RowSelector::select(5),
        ]);
        let widened: Vec<(bool, usize)> = widened_to_batches(&selection, 40_015)
            .iter()
            .map(|s| (s.skip, s.row_count))
            .collect();
        // Rows 10,000-10,009 lie in batch 1 (8,192-16,383); rows 40,010-40,014 in batch 4
        // (32,768-), cut at the row group's end.
        assert_eq!(
            widened,
            [(true, 8192), (false, 8192), (true, 16384), (false, 7247)]
        );
    }
}
