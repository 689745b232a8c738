//! The read plan: the byte ranges each bucket reads (its projected columns' chunks in its
//! row groups), known from the footers before any data page is read. The fetch and
//! `EXPLAIN COST` both take it from here, so they never disagree.

use std::ops::Range;

use datafusion::error::Result;

use super::{BucketScanExec, ScanFile};
use crate::bucket::Bucket;
use crate::fetch::ProjectedColumns;
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
                ranges: self.bucket_ranges(file, &opened, bucket)?,
                meta: file.meta.clone(),
                cached: opened.reader.source.keeps_blocks(),
                planned: bucket.bytes,
            });
        }
        Ok(reads)
    }

    /// The byte ranges of `bucket`'s projected column chunks in `file` (`opened`), sorted.
    pub(super) fn bucket_ranges(
        &self,
        file: &ScanFile,
        opened: &ParquetFile,
        bucket: &Bucket,
    ) -> Result<Vec<Range<u64>>> {
        Ok(self.columns_in(file, opened)?.ranges(&bucket.row_groups))
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

    fn scan(meta: &ObjectMeta, leaves: Option<Vec<usize>>, buckets: Vec<Bucket>) -> BucketScanExec {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let file = ScanFile {
            meta: meta.clone(),
            listing_values: vec![],
            footer_len: None,
            leaves,
        };
        let projection = Some(vec![1]); // `name` only
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
}
