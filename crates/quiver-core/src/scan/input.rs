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
use parquet::file::metadata::ParquetMetaData;

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
        let bucket = &self.still_needed(bucket, &opened)?;
        let pruned = planned.row_groups.len() - bucket.row_groups.len();
        QueryMetrics::add(&opened.reader.metrics().row_groups_pruned, pruned as u64);
        if let Some(counters) = counters {
            counters.row_groups_pruned_dynamic.add(pruned);
        }
        let ranges = self.bucket_ranges(file, &opened, bucket)?;
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
        }
        // Fixed-length decimals converted by `fixed_decimals`, where the table allows.
        let plain = opened.footer.plain_decimals();
        let file_schema = plain
            .as_ref()
            .and_then(|p| p.file_schema(&self.file_schema()));
        let metadata = match (&plain, &file_schema) {
            (Some(plain), Some(_)) => Arc::clone(&plain.metadata),
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
