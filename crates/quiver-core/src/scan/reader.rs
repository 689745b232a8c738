//! The decoder's view of a bucket's bytes, as DataFusion's Parquet reader asks for them
//! (its `ParquetFileReaderFactory`): served from the bytes the plan fetched, or read on
//! demand through the bucket's `ObjectReader`. A range the plan did not foresee is read from
//! the source (and counted as unplanned), so a gap in planning costs a request, never a
//! wrong answer.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::future::{try_join_all, BoxFuture, FutureExt};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

use super::input::BucketInput;
use crate::fetch::{coalesce, FetchOptions, FetchedBytes};
use crate::metrics::{QueryMetrics, SpanKind};

#[derive(Debug)]
pub(super) struct BucketReaderFactory;

impl ParquetFileReaderFactory for BucketReaderFactory {
    fn create_reader(
        &self,
        _partition_index: usize,
        file: PartitionedFile,
        _metadata_size_hint: Option<usize>,
        _metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let input = file.extension::<Arc<BucketInput>>().ok_or_else(|| {
            DataFusionError::Internal("a bucket file reached the reader without its bytes".into())
        })?;
        Ok(Box::new(BucketReader(Arc::clone(input))))
    }
}

struct BucketReader(Arc<BucketInput>);

impl BucketReader {
    async fn read(input: &BucketInput, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        if let Some(bytes) = input.fetched.slice(&range) {
            return Ok(bytes);
        }
        let lane = input
            .on_demand
            .as_ref()
            .map_or("unplanned", |o| o.lane.as_str());
        let bytes = (input.reader.read(range.clone(), SpanKind::Data, lane).await)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        let metrics = input.reader.metrics();
        match &input.on_demand {
            Some(on_demand) => {
                on_demand.counters.requests.add(1);
                on_demand.counters.bytes_read.add(bytes.len());
                if !on_demand.foresaw(&range) {
                    QueryMetrics::add(&metrics.unplanned_requests, 1);
                }
            }
            None => QueryMetrics::add(&metrics.unplanned_requests, 1),
        }
        Ok(bytes)
    }

    /// Several ranges (a row group's column chunks): on demand, adjacent ones are one read.
    async fn read_all(
        input: &BucketInput,
        ranges: Vec<Range<u64>>,
    ) -> parquet::errors::Result<Vec<Bytes>> {
        if input.on_demand.is_none() {
            return try_join_all(ranges.into_iter().map(|r| Self::read(input, r))).await;
        }
        let mut sorted = ranges.clone();
        sorted.sort_by_key(|r| r.start);
        let reads = coalesce(&sorted, &FetchOptions::contiguous());
        let read = try_join_all(reads.iter().map(|r| Self::read(input, r.clone()))).await?;
        let held = FetchedBytes::new(reads.iter().map(|r| r.start).zip(read).collect());
        ranges
            .iter()
            .map(|range| {
                held.slice(range).ok_or_else(|| {
                    ParquetError::General(format!(
                        "{}: bytes {range:?} were read but not held",
                        input.reader.object.path
                    ))
                })
            })
            .collect()
    }
}

impl AsyncFileReader for BucketReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        let input = Arc::clone(&self.0);
        async move { Self::read(&input, range).await }.boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let input = Arc::clone(&self.0);
        async move { Self::read_all(&input, ranges).await }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a parquet::arrow::arrow_reader::ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let metadata = Arc::clone(&self.0.metadata);
        async move { Ok(metadata) }.boxed()
    }
}
