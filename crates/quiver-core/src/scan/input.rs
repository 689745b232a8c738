//! A bucket made ready to decode: its file opened, its planned ranges fetched (or, for a
//! source read on demand, what the decoder will need to read them itself), the footer its
//! decoder reads, and its listing values typed; handed to DataFusion's Parquet reader as a
//! `PartitionedFile` whose extension is the `BucketInput`.

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::ParquetAccessPlan;
use datafusion::error::{DataFusionError, Result};
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::file::metadata::ParquetMetaData;

use super::pages::Pages;
use super::stream::ScanCounters;
use super::{BucketScanExec, ScanFile};
use crate::bucket::Bucket;
use crate::fetch::{coalesce, FetchOptions, FetchedBytes};
use crate::metrics::QueryMetrics;
use crate::read::ObjectReader;
use crate::runtime::QuiverRuntime;

/// A bucket ready to decode: how to read its file, the footer its decoder reads, and the
/// bytes its plan fetched, or what it needs to read them on demand.
#[derive(Debug)]
pub(super) struct BucketInput {
    pub reader: ObjectReader,
    /// The footer the decoder reads (see `fixed_decimals`).
    pub metadata: Arc<ParquetMetaData>,
    /// The file columns as the decoder is to type them, when not as the table does.
    pub file_schema: Option<SchemaRef>,
    pub fetched: FetchedBytes,
    pub on_demand: Option<OnDemand>,
}

/// A bucket read as its decoder asks (`ObjectSource::reads_on_demand`): the ranges its plan
/// foresaw (a read outside them counts as unplanned, as with fetched bytes), its partition's
/// counters and its lane on the timeline.
#[derive(Debug)]
pub(super) struct OnDemand {
    pub planned: Vec<Range<u64>>,
    pub counters: ScanCounters,
    pub lane: String,
}

impl OnDemand {
    pub fn foresaw(&self, range: &Range<u64>) -> bool {
        let index = self.planned.partition_point(|r| r.start <= range.start);
        index > 0 && self.planned[index - 1].end >= range.end
    }
}

impl BucketScanExec {
    /// Whether `bucket`'s file is read as its decoder asks rather than fetched ahead.
    pub(super) fn reads_on_demand(&self, runtime: &QuiverRuntime, bucket: &Bucket) -> Result<bool> {
        Ok(match self.files.get(bucket.file) {
            Some(file) => runtime.source_for(&file.meta.path)?.reads_on_demand(),
            None => false, // read_bucket names the error
        })
    }

    /// `planned` ready to decode, less the row groups dynamic filters now rule out: its
    /// bytes fetched, or, given its partition's counters (the streaming scan's) and a source
    /// that reads on demand, to be read as the decoder asks.
    pub(super) async fn read_bucket(
        &self,
        runtime: &QuiverRuntime,
        planned: &Bucket,
        counters: Option<&ScanCounters>,
    ) -> Result<PartitionedFile> {
        let bucket = planned;
        let file = self.file_of(bucket)?;
        let opened = runtime.open(&file.meta, file.footer_len).await?;
        let now = self.prunable_now()?;
        let bucket = &self.still_needed(bucket, &opened, &now)?;
        let pruned = planned.row_groups.len() - bucket.row_groups.len();
        QueryMetrics::add(&opened.reader.metrics().row_groups_pruned, pruned as u64);
        if let Some(counters) = counters {
            counters.row_groups_pruned_dynamic.add(pruned);
        }
        // Fixed-length decimals converted by `fixed_decimals`, where the table allows; pages
        // are pruned where they are not (the decoder then reads the footer as written).
        let plain = opened.footer.plain_decimals();
        let file_schema = plain
            .as_ref()
            .and_then(|p| p.file_schema(&self.file_schema()));
        let pages = match &file_schema {
            None => self.pages_needed(&opened, bucket, &now).await?,
            Some(_) => None,
        };
        let bucket = &match &pages {
            Some(pages) => pages.left_of(bucket),
            None => bucket.clone(),
        };
        if let (Some(pages), Some(counters)) = (&pages, counters) {
            counters.page_rows_skipped.add(pages.rows_skipped());
        }
        let ranges = self.bucket_ranges(file, &opened, bucket, pages.as_ref())?;
        let lane = self.lane(bucket);
        let reader = &opened.reader;
        let (fetched, on_demand) = match counters.filter(|_| reader.source.reads_on_demand()) {
            Some(counters) => (
                reader.cached(&ranges),
                Some(OnDemand {
                    planned: coalesce(&ranges, &FetchOptions::contiguous()),
                    counters: counters.clone(),
                    lane,
                }),
            ),
            None => {
                let options = runtime.query().settings.fetch;
                (reader.fetch(&ranges, &options, &lane).await?, None)
            }
        };
        let metadata = opened.metadata();
        let access = access_plan(file, metadata, bucket, pages.as_ref())?;
        let metadata = match (&plain, &file_schema, &pages) {
            (Some(plain), Some(_), _) => Arc::clone(&plain.metadata),
            (_, _, Some(pages)) => Arc::clone(&pages.metadata),
            _ => Arc::clone(metadata),
        };
        let meta = &file.meta;
        let input = Arc::new(BucketInput {
            reader: opened.reader,
            metadata,
            file_schema,
            fetched,
            on_demand,
        });
        Ok(PartitionedFile::new(meta.path.clone(), meta.size)
            .with_partition_values(self.listing_values(file)?)
            .with_extension(access)
            .with_extension(input))
    }

    /// `file`'s listing values (kept as text), typed as the table's listing columns.
    fn listing_values(&self, file: &ScanFile) -> Result<Vec<ScalarValue>> {
        let fields = &self.table_schema.fields()[self.file_columns..];
        fields
            .iter()
            .zip(&file.listing_values)
            .map(|(field, value)| match value {
                Some(text) => ScalarValue::try_from_string(text.clone(), field.data_type()),
                None => ScalarValue::try_from(field.data_type()),
            })
            .collect()
    }
}

/// Which rows of `file` (`metadata`) the decoder reads: `bucket`'s row groups, less the
/// rows deleted since the file was written and those of the pages `pages` ruled out.
fn access_plan(
    file: &ScanFile,
    metadata: &ParquetMetaData,
    bucket: &Bucket,
    pages: Option<&Pages>,
) -> Result<ParquetAccessPlan> {
    let mut access = ParquetAccessPlan::new_none(metadata.num_row_groups());
    for &rg in &bucket.row_groups {
        if rg >= metadata.num_row_groups() {
            return Err(DataFusionError::Plan(format!(
                "{}: bucket names row group {rg} of {}",
                file.meta.path,
                metadata.num_row_groups()
            )));
        }
        access.scan(rg);
        if let Some(deleted) = &file.deleted_rows {
            access.scan_selection(rg, kept_rows(metadata, rg, deleted));
        }
        if let Some(selection) = pages.and_then(|p| p.selection(rg)) {
            access.scan_selection(rg, selection.clone());
        }
    }
    Ok(access)
}

/// The rows of row group `rg` that `deleted` (sorted positions in the file) leaves.
fn kept_rows(metadata: &ParquetMetaData, rg: usize, deleted: &[u64]) -> RowSelection {
    let groups = metadata.row_groups();
    let start: u64 = groups[..rg].iter().map(|g| g.num_rows() as u64).sum();
    let end = start + groups[rg].num_rows() as u64;
    let from = deleted.partition_point(|&p| p < start);
    let to = deleted.partition_point(|&p| p < end);
    let mut selectors = vec![];
    let mut at = start;
    for &position in &deleted[from..to] {
        if position > at {
            selectors.push(RowSelector::select((position - at) as usize));
        }
        selectors.push(RowSelector::skip(1));
        at = position + 1;
    }
    if end > at {
        selectors.push(RowSelector::select((end - at) as usize));
    }
    RowSelection::from(selectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    #[test]
    fn deleted_positions_skip_rows_of_the_row_group_they_fall_in() {
        let batch = RecordBatch::try_from_iter([(
            "id",
            Arc::new(Int64Array::from_iter_values(0..10)) as _,
        )])
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(4))
            .build();
        let mut bytes = vec![];
        let mut writer =
            ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        let metadata = writer.close().map(|_| ()).and_then(|_| {
            parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&bytes::Bytes::from(bytes))
        });
        let metadata = metadata.unwrap();
        assert_eq!(metadata.num_row_groups(), 3, "rows 0-3, 4-7, 8-9");
        let deleted = [1, 4, 5, 9];
        let kept = |rg| -> Vec<(bool, usize)> {
            kept_rows(&metadata, rg, &deleted)
                .iter()
                .map(|s| (s.skip, s.row_count))
                .collect()
        };
        assert_eq!(kept(0), [(false, 1), (true, 1), (false, 2)]);
        assert_eq!(kept(1), [(true, 2), (false, 2)], "adjacent skips merge");
        assert_eq!(kept(2), [(false, 1), (true, 1)]);
    }
}
