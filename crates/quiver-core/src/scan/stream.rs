//! A partition's batches, bucket after bucket: each bucket's bytes are fetched (up to
//! `PREFETCH_BUCKETS` ahead) and then decoded from memory. The next fetch is driven between
//! batches, so I/O overlaps decoding. What a partition may hold is admitted here: a
//! bucket's bytes count against the runtime's budget and the query's memory pool until its
//! last batch is out, and a bucket fetched ahead must fit beside what the pool holds.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Poll;

use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::error::Result;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::FutureExt;
use futures::stream::{BoxStream, Fuse, FusedStream};
use futures::{Stream, StreamExt, TryStreamExt};
use tokio::sync::{Notify, OwnedSemaphorePermit};

use super::decode::{corrupt_data, naming_the_file};
use super::input::BucketInput;
use super::late::Late;
use super::sieve::Sieve;
use super::BucketScanExec;
use crate::bucket::Bucket;
use crate::error::contain_panic;
use crate::metrics::QueryMetrics;
use crate::runtime::QuiverRuntime;

/// Buckets fetched ahead of the one being decoded: 2, so that the next bucket's requests
/// are in flight while this one decodes. With the one handed over and waiting, a partition
/// holds at most three buckets' bytes (it used to hold all of its buckets).
const PREFETCH_BUCKETS: usize = 2;

/// Partition `partition` of `scan`: `buckets` fetched a few ahead and decoded in turn.
pub(super) fn fetching(
    scan: Arc<BucketScanExec>,
    partition: usize,
    buckets: Vec<Bucket>,
    sieve: Option<Arc<Sieve>>,
    late: Arc<Late>,
    runtime: Arc<QuiverRuntime>,
    context: Arc<TaskContext>,
) -> SendableRecordBatchStream {
    let counters = ScanCounters::new(&scan.metrics, partition);
    let fetch = BucketFetch {
        scan: Arc::clone(&scan),
        runtime: Arc::clone(&runtime),
        pool: Arc::clone(context.memory_pool()),
        held: Arc::default(),
        counters: counters.clone(),
        partition,
    };
    let fetches = futures::stream::iter(buckets)
        .map(move |bucket| fetch.clone().fetch(bucket).boxed())
        .buffered(PREFETCH_BUCKETS)
        .boxed()
        .fuse();
    let metrics = runtime.metrics();
    let schema = scan.schema();
    let decode = move |input: PartitionedFile| {
        counters.record(std::slice::from_ref(&input));
        Ok(sifted(
            scan.decode(input, Arc::clone(&context), &late)?,
            sieve.clone(),
        ))
    };
    let done = move || QueryMetrics::add(&metrics.buckets_done, 1);
    Box::pin(RecordBatchStreamAdapter::new(
        schema,
        BucketStream {
            fetches,
            next: None,
            current: None,
            decode: Box::new(decode),
            done: Box::new(done),
        },
    ))
}

/// A one-partition scan over `inputs` fetched ahead (the fragments executor's), decoded
/// in turn; `buckets` are counted done at the end.
pub(super) fn decoding(
    scan: Arc<BucketScanExec>,
    inputs: &Arc<Vec<PartitionedFile>>,
    buckets: usize,
    sieve: Option<Arc<Sieve>>,
    late: Arc<Late>,
    runtime: &QuiverRuntime,
    context: Arc<TaskContext>,
) -> SendableRecordBatchStream {
    let schema = scan.schema();
    let decoded = futures::stream::iter(inputs.as_ref().clone())
        .map(move |input| {
            let decoded = scan.decode(input, Arc::clone(&context), &late)?;
            Ok::<_, datafusion::error::DataFusionError>(sifted(decoded, sieve.clone()))
        })
        .try_flatten();
    let metrics = runtime.metrics();
    let finished = futures::stream::once(async move {
        QueryMetrics::add(&metrics.buckets_done, buckets as u64);
        None
    });
    let stream = decoded
        .map(Some)
        .chain(finished)
        .filter_map(futures::future::ready);
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// `decoded` through `sieve`, if the scan has one.
fn sifted(
    decoded: SendableRecordBatchStream,
    sieve: Option<Arc<Sieve>>,
) -> SendableRecordBatchStream {
    let Some(sieve) = sieve else {
        return decoded;
    };
    let schema = decoded.schema();
    let sifted = decoded.map(move |batch| sieve.sift(batch?));
    Box::pin(RecordBatchStreamAdapter::new(schema, sifted))
}

/// `stream` with the time spent polling it (decoding, sifting and driving the fetches
/// ahead, not waiting for them) and the rows it gives, for EXPLAIN ANALYZE.
pub(super) fn measured(
    stream: SendableRecordBatchStream,
    metrics: &ExecutionPlanMetricsSet,
    partition: usize,
) -> SendableRecordBatchStream {
    Box::pin(Measured {
        inner: stream,
        baseline: BaselineMetrics::new(metrics, partition),
    })
}

struct Measured {
    inner: SendableRecordBatchStream,
    baseline: BaselineMetrics,
}

impl Stream for Measured {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _timer = this.baseline.elapsed_compute().timer();
        let polled = this.inner.poll_next_unpin(cx);
        this.baseline.record_poll(polled)
    }
}

impl datafusion::physical_plan::RecordBatchStream for Measured {
    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.inner.schema()
    }
}

/// What fetching one bucket of a partition needs.
#[derive(Clone)]
struct BucketFetch {
    scan: Arc<BucketScanExec>,
    runtime: Arc<QuiverRuntime>,
    pool: Arc<dyn MemoryPool>,
    held: Arc<HeldBuckets>,
    counters: ScanCounters,
    partition: usize,
}

impl BucketFetch {
    async fn fetch(self, bucket: Bucket) -> FetchedBucket {
        let (scan, runtime) = (&self.scan, &self.runtime);
        if scan.reads_on_demand(runtime, &bucket)? {
            // Nothing is fetched ahead, so nothing is held or budgeted.
            let input = scan
                .read_bucket(runtime, &bucket, Some(&self.counters))
                .await?;
            return Ok((input, None));
        }
        let held = self.held.take_one(&self.pool, bucket.bytes).await;
        // Memory for this bucket's bytes only, held until it is decoded: the runtime's
        // budget bounds every query's fetched bytes, and the query's pool counts them, so
        // that its operators spill sooner.
        let permit = runtime.reserve(bucket.bytes).await?;
        let reservation =
            MemoryConsumer::new(format!("BucketScan[{}]", self.partition)).register(&self.pool);
        reservation.grow(bucket.bytes as usize);
        let input = (scan.read_bucket(runtime, &bucket, Some(&self.counters))).await?;
        let held = HeldBytes {
            _budget: permit,
            _reservation: reservation,
            _held: held,
        };
        Ok((input, Some(held)))
    }
}

/// A bucket ready to decode, with the memory its fetched bytes hold (none when read on
/// demand).
type FetchedBucket = Result<(PartitionedFile, Option<HeldBytes>)>;

/// A fetched bucket's room in the runtime's budget and in the query's memory pool; both
/// return when it drops.
struct HeldBytes {
    _budget: OwnedSemaphorePermit,
    _reservation: MemoryReservation,
    _held: HeldBucket,
}

/// The buckets one partition holds (fetching, fetched or decoding). A partition may always
/// hold one, so decoding never waits for memory; a bucket fetched ahead must fit in half of
/// the query's memory limit beside everything already reserved, so that under a tight
/// limit fetched bytes never crowd out the operators that spill (a sort of a large file
/// under 256 MB failed for want of room when four partitions held three buckets each).
#[derive(Default)]
struct HeldBuckets {
    count: AtomicUsize,
    released: Notify,
}

impl HeldBuckets {
    async fn take_one(self: &Arc<Self>, pool: &Arc<dyn MemoryPool>, bytes: u64) -> HeldBucket {
        loop {
            let released = self.released.notified();
            let first = self.count.compare_exchange(0, 1, SeqCst, SeqCst).is_ok();
            let room = match pool.memory_limit() {
                MemoryLimit::Finite(limit) => pool.reserved() + bytes as usize <= limit / 2,
                _ => true,
            };
            if first || room {
                if !first {
                    self.count.fetch_add(1, SeqCst);
                }
                return HeldBucket(Arc::clone(self));
            }
            released.await;
        }
    }
}

/// One bucket of `HeldBuckets`, given back when dropped.
struct HeldBucket(Arc<HeldBuckets>);

impl Drop for HeldBucket {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, SeqCst);
        self.0.released.notify_waiters();
    }
}

/// A partition's batches (see the module's comment); a bucket's memory returns when its
/// last batch is out, and decoding never waits for memory, so partitions cannot starve
/// each other.
struct BucketStream {
    fetches: Fuse<BoxStream<'static, FetchedBucket>>,
    /// A fetched bucket waiting for the current one to finish.
    next: Option<FetchedBucket>,
    /// The bucket being decoded, with its file's path for errors.
    current: Option<(SendableRecordBatchStream, Option<HeldBytes>, String)>,
    decode: Box<dyn FnMut(PartitionedFile) -> Result<SendableRecordBatchStream> + Send>,
    done: Box<dyn Fn() + Send>,
}

impl Stream for BucketStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.next.is_none() && !this.fetches.is_terminated() {
                if let Poll::Ready(Some(fetched)) = this.fetches.poll_next_unpin(cx) {
                    this.next = Some(fetched);
                }
            }
            if let Some(polled) = this.poll_current(cx) {
                return polled;
            }
            match this.next.take() {
                Some(Ok((input, held))) => {
                    let path = input
                        .extension::<Arc<BucketInput>>()
                        .map(|i| i.reader.object.path.clone())
                        .unwrap_or_else(|| input.path().to_string());
                    match contain_panic(|| (this.decode)(input)) {
                        Ok(Ok(stream)) => this.current = Some((stream, held, path)),
                        Ok(Err(error)) => return Poll::Ready(Some(Err(error))),
                        Err(panic) => return Poll::Ready(Some(Err(corrupt_data(&path, &panic)))),
                    }
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None if this.fetches.is_terminated() => return Poll::Ready(None),
                None => return Poll::Pending,
            }
        }
    }
}

impl BucketStream {
    /// The current bucket's next batch, if it has one to give or is not done; `None` when
    /// there is no current bucket or it just ended (its memory is returned).
    fn poll_current(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Option<Poll<Option<Result<RecordBatch>>>> {
        let (stream, _, path) = self.current.as_mut()?;
        // Arrow's decoders assert on some corrupt pages: an error naming the file.
        match contain_panic(|| stream.poll_next_unpin(cx)) {
            Ok(Poll::Ready(None)) => {
                self.current = None;
                (self.done)();
                None
            }
            Ok(Poll::Ready(Some(Err(error)))) => {
                Some(Poll::Ready(Some(Err(naming_the_file(path, error)))))
            }
            Ok(other) => Some(other),
            Err(panic) => {
                let error = corrupt_data(path, &panic);
                self.current = None;
                (self.done)();
                Some(Poll::Ready(Some(Err(error))))
            }
        }
    }
}

/// EXPLAIN ANALYZE's view of one partition's reads.
#[derive(Debug, Clone)]
pub(super) struct ScanCounters {
    pub requests: Count,
    pub bytes_read: Count,
    pub cache_hit_bytes: Count,
    pub disk_cache_hit_bytes: Count,
    /// Row groups a dynamic filter ruled out when their bucket opened.
    pub row_groups_pruned_dynamic: Count,
    /// Rows of pages the page index ruled out when their bucket opened (see `pages`).
    pub page_rows_skipped: Count,
}

impl ScanCounters {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            requests: counter("requests"),
            bytes_read: counter("bytes_read"),
            cache_hit_bytes: counter("cache_hit_bytes"),
            disk_cache_hit_bytes: counter("disk_cache_hit_bytes"),
            row_groups_pruned_dynamic: counter("row_groups_pruned_dynamic"),
            page_rows_skipped: counter("page_rows_skipped"),
        }
    }

    fn record(&self, inputs: &[PartitionedFile]) {
        for input in inputs
            .iter()
            .filter_map(|f| f.extension::<Arc<BucketInput>>())
        {
            let stats = input.fetched.stats;
            self.requests.add(stats.requests as usize);
            self.bytes_read.add(stats.bytes as usize);
            self.cache_hit_bytes.add(stats.cache_hit_bytes as usize);
            self.disk_cache_hit_bytes
                .add(stats.disk_cache_hit_bytes as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use std::time::Duration;

    #[tokio::test]
    async fn a_partition_always_holds_one_bucket_and_more_only_beside_what_the_pool_holds() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let held = Arc::new(HeldBuckets::default());
        // The first bucket is admitted whatever its size.
        let first = held.take_one(&pool, 5000).await;
        // A second one fits in half the limit beside what is reserved: 400 <= 500.
        let second = held.take_one(&pool, 400).await;
        assert_eq!(held.count.load(SeqCst), 2);
        // With 300 reserved by an operator, 400 more does not fit; it waits for a release.
        let operator = MemoryConsumer::new("sort").register(&pool);
        operator.grow(300);
        let waiting = tokio::spawn({
            let (held, pool) = (Arc::clone(&held), Arc::clone(&pool));
            async move { held.take_one(&pool, 400).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "admitted beyond half the limit");
        drop(operator);
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a release did not wake the waiting bucket")
            .unwrap();
        assert_eq!(held.count.load(SeqCst), 2);
        drop((first, third));
        assert_eq!(held.count.load(SeqCst), 0);
    }

    #[tokio::test]
    async fn without_a_limit_every_bucket_is_admitted() {
        let pool: Arc<dyn MemoryPool> =
            Arc::new(datafusion::execution::memory_pool::UnboundedMemoryPool::default());
        let held = Arc::new(HeldBuckets::default());
        let all: Vec<_> =
            futures::future::join_all((0..4).map(|_| held.take_one(&pool, 1 << 40))).await;
        assert_eq!(held.count.load(SeqCst), all.len());
    }
}
