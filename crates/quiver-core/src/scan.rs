//! The scan: a leaf of DataFusion's physical plan whose partitions are groups of buckets.
//! It holds only data (files, buckets, projection), so it serialises for a worker as it is.
//! Executing a partition fetches each bucket's planned byte ranges (a few buckets ahead),
//! then decodes them with DataFusion's Parquet reader, which reads from memory through
//! `BucketReaderFactory`; local files are read as the reader asks instead (the page cache
//! is their fetching ahead), so a scan of them holds no bucket whole.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::object_store::ObjectStoreUrl;
use datafusion::datasource::physical_plan::parquet::ParquetAccessPlan;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{conjunction_opt, EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::future::{try_join_all, BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::file::metadata::ParquetMetaData;
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedSemaphorePermit;

use crate::bucket::Bucket;
use crate::error::{contain_panic, QuiverError};
use crate::fetch::{cached_ranges, fetch_ranges, FetchOptions, FetchedBytes, ProjectedColumns};
use crate::footer::arrow_schema;
use crate::metrics::{file_name, QueryMetrics, SpanKind};
use crate::options::QuiverOptions;
use crate::runtime::QuiverRuntime;
use crate::source::{ObjectMeta, ObjectSource};

/// One file of a scan, with the values of its listing columns (hive, then virtual) as
/// text, typed again by the scan's partition fields: text survives serialisation as is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanFile {
    pub meta: ObjectMeta,
    pub listing_values: Vec<Option<String>>,
    /// The encoded length of the file's footer, when the planner read it: a Lambda worker,
    /// whose footer cache is cold, then reads exactly the footer instead of the file's last
    /// `FOOTER_READ_BYTES` (16 workers on one file read 8 MiB of tails otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer_len: Option<u64>,
}

impl ScanFile {
    /// The file's source and parsed footer (read now if nothing has read it yet).
    async fn open(
        &self,
        runtime: &QuiverRuntime,
        options: &QuiverOptions,
        metrics: &QueryMetrics,
    ) -> Result<(Arc<dyn ObjectSource>, Arc<ParquetMetaData>)> {
        let source = runtime.sources.for_path(&self.meta.path, &options.s3())?;
        let metadata = runtime
            .footer_of_length(source.as_ref(), &self.meta, self.footer_len, metrics)
            .await?;
        Ok((source, metadata))
    }
}

/// What the plan says it will read, for EXPLAIN.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScanSummary {
    pub files: usize,
    pub files_pruned: usize,
    /// Of those, ruled out by the persistent index (no footer read).
    pub files_index_pruned: usize,
    pub row_groups: usize,
    pub row_groups_pruned: usize,
    pub bytes_planned: u64,
}

/// The scan over buckets. Output partition `i` reads the buckets of `partitions[i]`.
#[derive(Debug, Clone)]
pub struct BucketScanExec {
    /// File columns first, then listing columns (hive, virtual).
    table_schema: SchemaRef,
    file_columns: usize,
    projection: Option<Vec<usize>>,
    files: Arc<Vec<ScanFile>>,
    partitions: Vec<Vec<Bucket>>,
    summary: ScanSummary,
    properties: Arc<PlanProperties>,
    /// Per-partition requests, bytes and cache hits, for EXPLAIN ANALYZE.
    metrics: ExecutionPlanMetricsSet,
    /// What the footers say of the scan's output (row counts, min/max, nulls), for the
    /// planner; unknown for a scan rebuilt from a travelling plan or cut to a share.
    statistics: Arc<Statistics>,
    /// Inputs fetched ahead of execution for a one-partition scan ("fetch, then compute":
    /// the fragment executor fetches outside the compute pool, then decodes on it).
    fetched: Option<Arc<Vec<PartitionedFile>>>,
    /// The dynamic filters pushed into the scan (see `pushdown`), over its output; the
    /// decoder applies those that pay to rows. Not serialised: the operators above apply
    /// them too.
    pushed_filter: Option<Arc<dyn PhysicalExpr>>,
}

impl BucketScanExec {
    pub fn try_new(
        table_schema: SchemaRef,
        file_columns: usize,
        projection: Option<Vec<usize>>,
        files: Arc<Vec<ScanFile>>,
        partitions: Vec<Vec<Bucket>>,
        summary: ScanSummary,
    ) -> Result<Self> {
        let projected = match &projection {
            Some(indices) => Arc::new(table_schema.project(indices)?),
            None => Arc::clone(&table_schema),
        };
        // At least one partition, so that operators above always have an input to drain.
        let partitions = if partitions.is_empty() {
            vec![vec![]]
        } else {
            partitions
        };
        let statistics = Arc::new(Statistics::new_unknown(&projected));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(projected),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            table_schema,
            file_columns,
            projection,
            files,
            partitions,
            summary,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            statistics,
            fetched: None,
            pushed_filter: None,
        })
    }

    /// The same scan with what the footers say of its output.
    pub fn with_statistics(mut self, statistics: Statistics) -> Self {
        self.statistics = Arc::new(statistics);
        self
    }

    pub fn table_schema(&self) -> &SchemaRef {
        &self.table_schema
    }
    pub fn file_columns(&self) -> usize {
        self.file_columns
    }
    pub fn projection(&self) -> Option<&Vec<usize>> {
        self.projection.as_ref()
    }
    pub fn files(&self) -> &Arc<Vec<ScanFile>> {
        &self.files
    }
    pub fn partitions(&self) -> &[Vec<Bucket>] {
        &self.partitions
    }
    pub fn summary(&self) -> &ScanSummary {
        &self.summary
    }

    /// The same scan restricted to the given partitions (one worker's share).
    pub fn with_partitions(&self, partitions: Vec<Vec<Bucket>>) -> Result<Self> {
        self.with_work(Arc::clone(&self.files), partitions)
    }

    /// The same scan over other files and buckets (a worker's share of the work).
    pub fn with_work(
        &self,
        files: Arc<Vec<ScanFile>>,
        partitions: Vec<Vec<Bucket>>,
    ) -> Result<Self> {
        if let Some(bad) = partitions.iter().flatten().find(|b| b.file >= files.len()) {
            return Err(DataFusionError::Plan(format!(
                "a bucket names file {} of {}",
                bad.file,
                files.len()
            )));
        }
        let mut scan = Self::try_new(
            Arc::clone(&self.table_schema),
            self.file_columns,
            self.projection.clone(),
            files,
            partitions,
            self.summary.clone(),
        )?;
        scan.pushed_filter = self.pushed_filter.clone();
        Ok(scan)
    }

    /// Fetches the bytes of `buckets` without decoding anything.
    pub async fn fetch(
        &self,
        buckets: &[Bucket],
        runtime: &QuiverRuntime,
        options: &QuiverOptions,
    ) -> Result<Vec<PartitionedFile>> {
        let metrics = runtime.metrics();
        try_join_all(
            buckets
                .iter()
                .map(|bucket| self.read_bucket(runtime, options, bucket, &metrics, None)),
        )
        .await
    }

    /// This scan as one partition of `buckets`, their bytes already fetched.
    pub fn with_fetched(&self, buckets: Vec<Bucket>, inputs: Vec<PartitionedFile>) -> Result<Self> {
        let mut one = self.with_partitions(vec![buckets])?;
        one.fetched = Some(Arc::new(inputs));
        Ok(one)
    }

    /// The byte ranges of `bucket`'s projected column chunks, as its read requests them.
    fn bucket_ranges(
        &self,
        meta: &ObjectMeta,
        metadata: &ParquetMetaData,
        bucket: &Bucket,
    ) -> Result<Vec<Range<u64>>> {
        let stored = arrow_schema(&meta.path, metadata)?;
        Ok(
            ProjectedColumns::new(metadata, &stored, &self.projected_file_columns())
                .ranges(&bucket.row_groups),
        )
    }

    /// What each bucket will request, before coalescing: its object, whether the source's
    /// bytes go to the block cache, and its column chunks' ranges (from the footers, read
    /// now if planning did not).
    pub async fn bucket_reads(
        &self,
        runtime: &QuiverRuntime,
        options: &QuiverOptions,
        metrics: &QueryMetrics,
    ) -> Result<Vec<BucketRead>> {
        let mut reads = Vec::new();
        for bucket in self.partitions.iter().flatten() {
            let Some(file) = self.files.get(bucket.file) else {
                continue;
            };
            let (source, metadata) = file.open(runtime, options, metrics).await?;
            reads.push(BucketRead {
                ranges: self.bucket_ranges(&file.meta, &metadata, bucket)?,
                meta: file.meta.clone(),
                cached: source.keeps_blocks(),
                planned: bucket.bytes,
            });
        }
        Ok(reads)
    }

    fn projected_file_columns(&self) -> Vec<String> {
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

impl DisplayAs for BucketScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.summary;
        let buckets: usize = self.partitions.iter().map(Vec::len).sum();
        write!(
            f,
            "BucketScanExec: files={} (pruned {}, by the index {}), row groups={} (pruned {}), buckets={} in {} partitions, bytes planned={}",
            s.files,
            s.files_pruned,
            s.files_index_pruned,
            s.row_groups,
            s.row_groups_pruned,
            buckets,
            self.partitions.len(),
            s.bytes_planned
        )?;
        let columns: Vec<&str> = match &self.projection {
            Some(p) => p
                .iter()
                .map(|&i| self.table_schema.field(i).name().as_str())
                .collect(),
            None => self
                .table_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect(),
        };
        write!(f, ", columns=[{}]", columns.join(", "))?;
        match &self.pushed_filter {
            Some(filter) => write!(f, ", filter={filter}"),
            None => Ok(()),
        }
    }
}

impl ExecutionPlan for BucketScanExec {
    fn name(&self) -> &'static str {
        "BucketScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        match &self.pushed_filter {
            Some(filter) => f(filter),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    /// Keeps the dynamic filters pushed to it (the joins' and TopK's), and tells the
    /// operators above to apply every filter still (`pushdown`).
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters: Vec<_> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|pushed| pushed.filter)
            .collect();
        let unapplied = vec![PushedDown::No; filters.len()];
        let dynamic = filters.into_iter().filter(crate::pushdown::is_dynamic);
        let Some(added) = conjunction_opt(dynamic) else {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                unapplied,
            ));
        };
        let mut scan = self.clone();
        scan.pushed_filter = conjunction_opt(self.pushed_filter.clone().into_iter().chain([added]));
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(unapplied)
                .with_updated_node(Arc::new(scan)),
        )
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        match partition {
            None => Ok(Arc::clone(&self.statistics)),
            // Partitions are balanced by bytes, not rows: nothing exact to say of one.
            Some(_) => Ok(Arc::new(Statistics::new_unknown(&self.schema()))),
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let buckets = self.partitions.get(partition).cloned().ok_or_else(|| {
            DataFusionError::Internal(format!("BucketScanExec has no partition {partition}"))
        })?;
        let runtime = QuiverRuntime::of(context.session_config())?;
        if let Some(inputs) = &self.fetched {
            let scan = self.clone();
            let decoded = futures::stream::iter(inputs.as_ref().clone())
                .map(move |input| scan.decode(input, Arc::clone(&context)))
                .try_flatten();
            let metrics = runtime.metrics();
            let done = buckets.len() as u64;
            let finished = futures::stream::once(async move {
                QueryMetrics::add(&metrics.buckets_done, done);
                None
            });
            let stream = decoded
                .map(Some)
                .chain(finished)
                .filter_map(futures::future::ready);
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                self.schema(),
                stream,
            )));
        }
        let scan = Arc::new(self.clone());
        let options = QuiverOptions::of(context.session_config().options());
        let counters = ScanCounters::new(&self.metrics, partition);
        let fetches = {
            let (scan, counters) = (Arc::clone(&scan), counters.clone());
            let runtime = Arc::clone(&runtime);
            let pool = Arc::clone(context.memory_pool());
            let held = Arc::new(HeldBuckets::default());
            futures::stream::iter(buckets)
                .map(move |bucket| {
                    let (scan, runtime, options, counters) = (
                        Arc::clone(&scan),
                        Arc::clone(&runtime),
                        options.clone(),
                        counters.clone(),
                    );
                    let (pool, held) = (Arc::clone(&pool), Arc::clone(&held));
                    async move {
                        let metrics = runtime.metrics();
                        if scan.reads_on_demand(&runtime, &options, &bucket)? {
                            // Nothing is fetched ahead, so nothing is held or budgeted.
                            let input = scan
                                .read_bucket(&runtime, &options, &bucket, &metrics, Some(&counters))
                                .await?;
                            return Ok((input, None));
                        }
                        let held = held.take_one(&pool, bucket.bytes).await;
                        // Memory for this bucket's bytes only, held until it is decoded:
                        // the runtime's budget bounds every query's fetched bytes, and the
                        // query's pool counts them, so that its operators spill sooner.
                        let permit = runtime.reserve(bucket.bytes).await?;
                        let reservation =
                            MemoryConsumer::new(format!("BucketScan[{partition}]")).register(&pool);
                        reservation.grow(bucket.bytes as usize);
                        let input = scan
                            .read_bucket(&runtime, &options, &bucket, &metrics, None)
                            .await?;
                        Ok((
                            input,
                            Some(HeldBytes {
                                _budget: permit,
                                _reservation: reservation,
                                _held: held,
                            }),
                        ))
                    }
                    .boxed()
                })
                .buffered(PREFETCH_BUCKETS)
                .boxed()
                .fuse()
        };
        let metrics = runtime.metrics();
        let decode = move |input: PartitionedFile| {
            counters.record(std::slice::from_ref(&input));
            scan.decode(input, Arc::clone(&context))
        };
        let done = move || QueryMetrics::add(&metrics.buckets_done, 1);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            BucketStream {
                fetches,
                next: None,
                current: None,
                decode: Box::new(decode),
                done: Box::new(done),
            },
        )))
    }
}

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

/// Buckets fetched ahead of the one being decoded: 2, so that the next bucket's requests
/// are in flight while this one decodes. With the one handed over and waiting, a partition
/// holds at most three buckets' bytes (it used to hold all of its buckets).
const PREFETCH_BUCKETS: usize = 2;

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
    count: std::sync::atomic::AtomicUsize,
    released: tokio::sync::Notify,
}

impl HeldBuckets {
    async fn take_one(self: &Arc<Self>, pool: &Arc<dyn MemoryPool>, bytes: u64) -> HeldBucket {
        use std::sync::atomic::Ordering::SeqCst;
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
        self.0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.released.notify_waiters();
    }
}

/// A partition's batches, bucket after bucket: each bucket's bytes are fetched (up to
/// `PREFETCH_BUCKETS` ahead) and then decoded from memory. The next fetch is driven
/// between batches, so I/O overlaps decoding; a bucket's memory returns when its last batch
/// is out, and decoding never waits for memory, so partitions cannot starve each other.
struct BucketStream {
    fetches: futures::stream::Fuse<futures::stream::BoxStream<'static, FetchedBucket>>,
    /// A fetched bucket waiting for the current one to finish.
    next: Option<FetchedBucket>,
    /// The bucket being decoded, with its file's path for errors.
    current: Option<(SendableRecordBatchStream, Option<HeldBytes>, String)>,
    decode: Box<dyn FnMut(PartitionedFile) -> Result<SendableRecordBatchStream> + Send>,
    done: Box<dyn Fn() + Send>,
}

impl futures::Stream for BucketStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use futures::stream::FusedStream;
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if this.next.is_none() && !this.fetches.is_terminated() {
                if let Poll::Ready(Some(fetched)) = this.fetches.poll_next_unpin(cx) {
                    this.next = Some(fetched);
                }
            }
            if let Some((stream, _, path)) = &mut this.current {
                // Arrow's decoders assert on some corrupt pages: an error naming the file.
                match contain_panic(|| stream.poll_next_unpin(cx)) {
                    Ok(Poll::Ready(None)) => {
                        this.current = None; // returns the bucket's memory
                        (this.done)();
                        continue;
                    }
                    Ok(Poll::Ready(Some(Err(error)))) => {
                        return Poll::Ready(Some(Err(naming_the_file(path, error))))
                    }
                    Ok(other) => return other,
                    Err(panic) => {
                        let error = corrupt_data(path, &panic);
                        this.current = None;
                        (this.done)();
                        return Poll::Ready(Some(Err(error)));
                    }
                }
            }
            match this.next.take() {
                Some(Ok((input, held))) => {
                    let path = input
                        .extension::<Arc<BucketInput>>()
                        .map(|i| i.meta.path.clone())
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

/// A decoder's error on a file's pages (a page that does not decompress or decode) as
/// "PATH: corrupt Parquet data: ...": Arrow's and Parquet's errors name no file. Errors
/// that already name it (a failed read) pass unchanged.
fn naming_the_file(path: &str, error: DataFusionError) -> DataFusionError {
    let reason = error.to_string();
    match error {
        DataFusionError::ArrowError(..) | DataFusionError::ParquetError(..)
            if !reason.contains(path) =>
        {
            QuiverError::CorruptData {
                path: path.to_string(),
                reason,
            }
            .into()
        }
        other => other,
    }
}

/// A decoder's panic on a file's pages, as the error it should have been.
fn corrupt_data(path: &str, panic: &str) -> DataFusionError {
    QuiverError::CorruptData {
        path: path.to_string(),
        reason: format!("a decoder failed ({panic})"),
    }
    .into()
}

/// EXPLAIN ANALYZE's view of one partition's reads.
#[derive(Debug, Clone)]
struct ScanCounters {
    requests: Count,
    bytes_read: Count,
    cache_hit_bytes: Count,
}

impl ScanCounters {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            requests: counter("requests"),
            bytes_read: counter("bytes_read"),
            cache_hit_bytes: counter("cache_hit_bytes"),
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
        }
    }
}

/// A bucket read as its decoder asks (`ObjectSource::reads_on_demand`): the ranges its plan
/// foresaw (a read outside them counts as unplanned, as with fetched bytes), its partition's
/// counters and its lane on the timeline.
#[derive(Debug)]
struct OnDemand {
    planned: Vec<Range<u64>>,
    counters: ScanCounters,
    lane: String,
}

impl OnDemand {
    fn foresaw(&self, range: &Range<u64>) -> bool {
        let index = self.planned.partition_point(|r| r.start <= range.start);
        index > 0 && self.planned[index - 1].end >= range.end
    }
}

/// A bucket ready to decode: its file's parsed footer and the bytes its plan fetched, or
/// what it needs to read them on demand.
#[derive(Debug)]
struct BucketInput {
    meta: ObjectMeta,
    source: Arc<dyn ObjectSource>,
    /// The footer the decoder reads (see `fixed_decimals`).
    metadata: Arc<ParquetMetaData>,
    /// The file columns as the decoder is to type them, when not as the table does.
    file_schema: Option<SchemaRef>,
    fetched: FetchedBytes,
    on_demand: Option<OnDemand>,
    metrics: Arc<QueryMetrics>,
}

impl BucketScanExec {
    /// A bucket's name on the profile's timeline: its file and row groups.
    pub fn lane(&self, bucket: &Bucket) -> String {
        let file = self
            .files
            .get(bucket.file)
            .map_or("?", |f| file_name(&f.meta.path));
        match (bucket.row_groups.first(), bucket.row_groups.last()) {
            (Some(first), Some(last)) => format!("{file} rg {first}-{last}"),
            _ => file.to_string(),
        }
    }

    /// Whether `bucket`'s file is read as its decoder asks rather than fetched ahead.
    fn reads_on_demand(
        &self,
        runtime: &QuiverRuntime,
        options: &QuiverOptions,
        bucket: &Bucket,
    ) -> Result<bool> {
        Ok(match self.files.get(bucket.file) {
            Some(file) => runtime
                .sources
                .for_path(&file.meta.path, &options.s3())?
                .reads_on_demand(),
            None => false, // read_bucket names the error
        })
    }

    /// `bucket` ready to decode: its bytes fetched, or, given its partition's counters and
    /// a source that reads on demand, to be read as the decoder asks.
    async fn read_bucket(
        &self,
        runtime: &QuiverRuntime,
        options: &QuiverOptions,
        bucket: &Bucket,
        metrics: &Arc<QueryMetrics>,
        counters: Option<&ScanCounters>,
    ) -> Result<PartitionedFile> {
        let file = self.files.get(bucket.file).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "bucket names file {} of {}",
                bucket.file,
                self.files.len()
            ))
        })?;
        let meta = &file.meta;
        let (source, metadata) = file.open(runtime, options, metrics).await?;
        let ranges = self.bucket_ranges(meta, &metadata, bucket)?;
        let lane = self.lane(bucket);
        let (fetched, on_demand) = match counters.filter(|_| source.reads_on_demand()) {
            Some(counters) => (
                cached_ranges(meta, &ranges, &runtime.blocks, metrics),
                Some(OnDemand {
                    planned: crate::fetch::coalesce(&ranges, &FetchOptions::contiguous()),
                    counters: counters.clone(),
                    lane,
                }),
            ),
            None => {
                let fetch = options.fetch();
                let fetched = fetch_ranges(
                    source.as_ref(),
                    meta,
                    &ranges,
                    &fetch,
                    &runtime.blocks,
                    metrics,
                    &lane,
                )
                .await?;
                (fetched, None)
            }
        };

        let mut access = ParquetAccessPlan::new_none(metadata.num_row_groups());
        for &rg in &bucket.row_groups {
            if rg >= metadata.num_row_groups() {
                return Err(DataFusionError::Plan(format!(
                    "{}: bucket names row group {rg} of {}",
                    meta.path,
                    metadata.num_row_groups()
                )));
            }
            access.scan(rg);
        }
        // Fixed-length decimals converted by `fixed_decimals`, where the table allows.
        let plain = runtime.footers.plain_decimals(meta, &metadata);
        let file_schema = plain
            .as_ref()
            .and_then(|p| p.file_schema(&self.file_schema()));
        let metadata = match (&plain, &file_schema) {
            (Some(plain), Some(_)) => Arc::clone(&plain.metadata),
            _ => metadata,
        };
        let input = Arc::new(BucketInput {
            meta: meta.clone(),
            source,
            metadata,
            file_schema,
            fetched,
            on_demand,
            metrics: Arc::clone(metrics),
        });
        Ok(PartitionedFile::new(meta.path.clone(), meta.size)
            .with_partition_values(self.listing_values(file)?)
            .with_extension(access)
            .with_extension(input))
    }

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

    /// What of the pushed filters the decoder applies to rows when `decoding` is how it
    /// decodes the file columns: nothing unless DataFusion's
    /// `datafusion.execution.parquet.pushdown_filters` is on (Quiver's default).
    fn row_filter(
        &self,
        decoding: &Schema,
        config: &ConfigOptions,
    ) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        match &self.pushed_filter {
            Some(filter) if config.execution.parquet.pushdown_filters => {
                crate::pushdown::decodable(filter, &self.schema(), decoding)
            }
            _ => Ok(None),
        }
    }

    /// The table's file columns, as the footers type them.
    fn file_schema(&self) -> Schema {
        Schema::new(self.table_schema.fields()[..self.file_columns].to_vec())
    }

    /// One fetched (or on-demand) bucket decoded by DataFusion's Parquet reader, its
    /// fixed-length decimals converted as they come out (see `fixed_decimals`).
    fn decode(
        &self,
        file: PartitionedFile,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let decoding_schema = file
            .extension::<Arc<BucketInput>>()
            .and_then(|input| input.file_schema.clone());
        let file_schema = decoding_schema
            .clone()
            .unwrap_or_else(|| Arc::new(self.file_schema()));
        let listing_fields = self.table_schema.fields()[self.file_columns..].to_vec();
        let config = context.session_config().options();
        let row_filter = self.row_filter(&file_schema, config)?;
        let mut source = ParquetSource::new(
            TableSchema::builder(file_schema)
                .with_table_partition_cols(listing_fields)
                .build(),
        )
        .with_parquet_file_reader_factory(Arc::new(BucketReaderFactory))
        .with_enable_page_index(false);
        if let Some(filter) = row_filter {
            // The footers' statistics pruned the row groups already, and bloom filters are
            // bytes no bucket planned: the decoder only filters rows.
            source = source
                .with_predicate(filter)
                .with_pushdown_filters(true)
                .with_reorder_filters(config.execution.parquet.reorder_filters)
                .with_bloom_filter_on_read(false);
        }
        let config =
            FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
                .with_projection_indices(self.projection.clone())?
                .with_file_group(FileGroup::new(vec![file]))
                .build();
        let decoded = DataSourceExec::from_data_source(config).execute(0, context)?;
        if decoding_schema.is_none() {
            return Ok(decoded);
        }
        let schema = self.schema();
        let restored = {
            let schema = Arc::clone(&schema);
            decoded.map(move |batch| crate::fixed_decimals::restore(batch?, &schema))
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, restored)))
    }
}

#[derive(Debug)]
struct BucketReaderFactory;

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

/// Serves the decoder from fetched bytes, or reads on demand; a range the plan did not
/// foresee is read from the source (and counted), so a gap in planning costs a request,
/// never a wrong answer.
struct BucketReader(Arc<BucketInput>);

impl BucketReader {
    async fn read(input: &BucketInput, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        if let Some(bytes) = input.fetched.slice(&range) {
            return Ok(bytes);
        }
        let started = input.metrics.timeline.begin();
        let bytes = input
            .source
            .get_range(&input.meta, range.clone())
            .await
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        let size = bytes.len() as u64;
        input.metrics.record_read(size);
        match &input.on_demand {
            Some(on_demand) => {
                on_demand.counters.requests.add(1);
                on_demand.counters.bytes_read.add(size as usize);
                let lane = on_demand.lane.clone();
                (input.metrics.timeline).end(started, SpanKind::Data, lane, size);
                if !on_demand.foresaw(&range) {
                    QueryMetrics::add(&input.metrics.unplanned_requests, 1);
                }
            }
            None => QueryMetrics::add(&input.metrics.unplanned_requests, 1),
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
        let reads = crate::fetch::coalesce(&sorted, &FetchOptions::contiguous());
        let read = try_join_all(reads.iter().map(|r| Self::read(input, r.clone()))).await?;
        let held = FetchedBytes::new(reads.iter().map(|r| r.start).zip(read).collect());
        ranges
            .iter()
            .map(|range| {
                held.slice(range).ok_or_else(|| {
                    parquet::errors::ParquetError::General(format!(
                        "{}: bytes {range:?} were read but not held",
                        input.meta.path
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
