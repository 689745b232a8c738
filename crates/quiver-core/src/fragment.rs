//! Fragments: the parts of a physical plan that run without DataFusion's tokio machinery,
//! so that rayon threads in the browser, or a Lambda worker, can run them bucket by bucket.
//!
//! A fragment is a maximal subtree made only of per-partition operators (output partition
//! `i` depends on input partition `i` alone: scan, filter, projection, partial aggregate,
//! TopK) over exactly one `BucketScanExec`. Everything else stays on the coordinator, which
//! runs it over the fragments' outputs (final aggregate, joins, sort, limit).

use std::io::Cursor;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{
    collect, replace_children_if_necessary, ExecutionPlan, ExecutionPlanProperties,
};
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use futures::future::try_join_all;
use futures::{StreamExt, TryStreamExt};

use crate::bucket::Bucket;
use crate::compute::ComputePool;
use crate::copy::{CopyTarget, WrittenFile};
use crate::metrics::SpanKind;
use crate::options::QuiverOptions;
use crate::runtime::QuiverRuntime;
use crate::scan::{BucketScanExec, ScanFile, ScanSummary};

/// Whether output partition `i` of `plan` depends only on input partition `i`, computed
/// without spawning tasks.
fn is_per_partition(plan: &Arc<dyn ExecutionPlan>) -> bool {
    match plan.name() {
        "BucketScanExec"
        | "CooperativeExec"
        | "FilterExec"
        | "ProjectionExec"
        | "CoalesceBatchesExec"
        | "LocalLimitExec" => true,
        "AggregateExec" => plan
            .downcast_ref::<AggregateExec>()
            .is_some_and(|a| *a.mode() == AggregateMode::Partial),
        "SortExec" => plan
            .downcast_ref::<SortExec>()
            .is_some_and(|s| s.preserve_partitioning()),
        _ => false,
    }
}

/// A fragment: a chain of per-partition operators ending in one scan.
pub fn is_fragment(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut node = Arc::clone(plan);
    loop {
        if !is_per_partition(&node) {
            return false;
        }
        let children = node.children();
        match children.as_slice() {
            [] => return node.name() == "BucketScanExec",
            [only] => {
                let next = Arc::clone(only);
                node = next;
            }
            _ => return false,
        }
    }
}

fn scan_of(fragment: &Arc<dyn ExecutionPlan>) -> Option<&BucketScanExec> {
    let mut node = fragment;
    loop {
        if let Some(scan) = node.downcast_ref::<BucketScanExec>() {
            return Some(scan);
        }
        node = node.children().into_iter().next()?;
    }
}

/// Replaces the scan at the bottom of `fragment` by `scan`, rebuilding the chain above it.
fn with_scan(
    fragment: &Arc<dyn ExecutionPlan>,
    scan: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if fragment.downcast_ref::<BucketScanExec>().is_some() {
        return Ok(scan);
    }
    let child = fragment
        .children()
        .into_iter()
        .next()
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?;
    let child = with_scan(child, scan)?;
    replace_children_if_necessary(Arc::clone(fragment), vec![child])
}

/// The fragments of `plan`, outermost first.
pub fn fragments(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn ExecutionPlan>> {
    if is_fragment(plan) {
        return vec![Arc::clone(plan)];
    }
    plan.children().into_iter().flat_map(fragments).collect()
}

/// Serialises a fragment as a worker receives it: datafusion-proto with our codec.
pub fn encode(fragment: &Arc<dyn ExecutionPlan>) -> Result<Vec<u8>> {
    Ok(physical_plan_to_bytes_with_extension_codec(Arc::clone(fragment), &QuiverCodec)?.to_vec())
}

pub fn decode(bytes: &[u8], context: &TaskContext) -> Result<Arc<dyn ExecutionPlan>> {
    physical_plan_from_bytes_with_extension_codec(bytes, context, &QuiverCodec)
}

/// A fragment ready to travel: its plan and the plan's bytes (which decode again).
#[derive(Debug, Clone)]
pub struct Fragment {
    pub plan: Arc<dyn ExecutionPlan>,
    pub bytes: Vec<u8>,
}

impl Fragment {
    /// The scan at the bottom of the fragment.
    pub fn scan(&self) -> &BucketScanExec {
        scan_of(&self.plan).expect("a fragment ends in a scan")
    }

    /// Every bucket of the scan, with the file each one reads.
    pub fn buckets(&self) -> Vec<Bucket> {
        self.scan().partitions().iter().flatten().cloned().collect()
    }

    /// The files and buckets one worker receives (see `work_for`).
    pub fn work_for(&self, buckets: &[Bucket]) -> (Vec<ScanFile>, Vec<Bucket>) {
        work_for(self.scan().files(), buckets)
    }

    /// The fragment's bytes with an empty scan: the same for every worker, which adds
    /// its own files and buckets (`over_buckets`).
    pub fn template(&self) -> Result<Vec<u8>> {
        let empty = self.scan().with_work(Arc::new(vec![]), vec![])?;
        encode(&with_scan(&self.plan, Arc::new(empty))?)
    }
}

/// The files `buckets` read, and the buckets renumbered to index them: what one worker
/// receives.
pub fn work_for(all: &[ScanFile], buckets: &[Bucket]) -> (Vec<ScanFile>, Vec<Bucket>) {
    let mut files = Vec::new();
    let mut index_of = std::collections::HashMap::new();
    let buckets = buckets
        .iter()
        .map(|bucket| {
            let file = *index_of.entry(bucket.file).or_insert_with(|| {
                files.push(all[bucket.file].clone());
                files.len() - 1
            });
            Bucket {
                file,
                ..bucket.clone()
            }
        })
        .collect();
    (files, buckets)
}

/// A decoded fragment template made to read `buckets` of `files`, one partition per
/// bucket: what a worker runs.
pub fn over_buckets(
    template: &Arc<dyn ExecutionPlan>,
    files: Vec<ScanFile>,
    buckets: Vec<Bucket>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let scan = scan_of(template)
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?;
    let partitions = buckets.into_iter().map(|b| vec![b]).collect();
    with_scan(
        template,
        Arc::new(scan.with_work(Arc::new(files), partitions)?),
    )
}

/// Who runs fragments: rayon threads here, or Lambda workers.
#[async_trait::async_trait]
pub trait FragmentRunner: Send + Sync {
    /// All partitions of `fragment`'s output; the coordinator merges them.
    async fn run(
        &self,
        fragment: &Fragment,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>>;

    /// Runs `fragment` and writes its output where it runs, under `target` (each worker
    /// its own files, no manifest); `None` when this runner only returns outputs.
    async fn write(
        &self,
        _fragment: &Fragment,
        _target: &CopyTarget,
        _context: &Arc<TaskContext>,
    ) -> Option<Result<Vec<WrittenFile>>> {
        None
    }
}

/// Fragments on a local rayon pool, as the browser runs them.
pub struct RayonRunner<'a>(pub &'a ComputePool);

#[async_trait::async_trait]
impl FragmentRunner for RayonRunner<'_> {
    async fn run(
        &self,
        fragment: &Fragment,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        run_fragment(&fragment.bytes, context, self.0).await
    }
}

/// Runs `plan` the way the browser and Lambda do: every fragment travels as bytes to
/// `runner`, and the rest of the plan merges their outputs here. Fragments run
/// concurrently (the two sides of a join fan out at once).
pub async fn execute_with_fragments(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    runner: &dyn FragmentRunner,
) -> Result<Vec<RecordBatch>> {
    let mut found = Vec::new();
    travelling_fragments(&plan, &context, &mut found)?;
    let outputs = try_join_all(found.iter().map(|f| runner.run(f, &context))).await?;
    let coordinator = substitute(plan, &found, &outputs)?;
    merge(coordinator, context).await
}

/// The coordinator's part of a plan, over the fragments' outputs in memory.
#[cfg(not(target_arch = "wasm32"))]
async fn merge(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Vec<RecordBatch>> {
    collect(plan, context).await
}

/// In the browser no tokio runtime drives the event loop, and DataFusion's exchanges spawn
/// tokio tasks; with every input already in memory, a current-thread runtime runs this part
/// to its end without waiting on anything outside it.
#[cfg(target_arch = "wasm32")]
async fn merge(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Vec<RecordBatch>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    runtime.block_on(collect(plan, context))
}

/// The fragments of `plan` that travel, outermost first.
pub fn travelling_fragments(
    plan: &Arc<dyn ExecutionPlan>,
    context: &TaskContext,
    found: &mut Vec<Fragment>,
) -> Result<()> {
    if is_fragment(plan) {
        // A fragment whose expressions depend on something above it (a scalar subquery's
        // value) does not travel; a bare scan always does, so cut lower instead.
        let bytes = encode(plan).and_then(|bytes| decode(&bytes, context).map(|_| bytes));
        match bytes {
            Ok(bytes) => {
                found.push(Fragment {
                    plan: Arc::clone(plan),
                    bytes,
                });
                return Ok(());
            }
            Err(error) if plan.downcast_ref::<BucketScanExec>().is_some() => return Err(error),
            Err(_) => {}
        }
    }
    for child in plan.children() {
        travelling_fragments(child, context, found)?;
    }
    Ok(())
}

/// `plan` with each fragment replaced by its output, held in memory.
fn substitute(
    plan: Arc<dyn ExecutionPlan>,
    fragments: &[Fragment],
    outputs: &[Vec<Vec<RecordBatch>>],
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(i) = fragments.iter().position(|f| Arc::ptr_eq(&f.plan, &plan)) {
        let partitions = if outputs[i].is_empty() {
            vec![vec![]]
        } else {
            outputs[i].clone()
        };
        let count = partitions.len();
        let exec: Arc<dyn ExecutionPlan> =
            MemorySourceConfig::try_new_exec(&partitions, plan.schema(), None)?;
        // Operators above were planned for the fragment's partition count. Any count
        // serves those that repartition or merge; one that wanted a single partition (a
        // final aggregate over a one-bucket scan) gets the partitions merged, in order
        // if the fragment's output was sorted.
        if plan.output_partitioning().partition_count() == 1 && count > 1 {
            return Ok(match plan.output_ordering() {
                Some(ordering) => Arc::new(SortPreservingMergeExec::new(ordering.clone(), exec)),
                None => Arc::new(CoalescePartitionsExec::new(exec)),
            });
        }
        return Ok(exec);
    }
    let children = plan
        .children()
        .into_iter()
        .map(|child| substitute(Arc::clone(child), fragments, outputs))
        .collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(plan, children)
}

/// One fragment, all its partitions: fetch the next partition while earlier ones compute.
pub async fn run_fragment(
    bytes: &[u8],
    context: &Arc<TaskContext>,
    pool: &ComputePool,
) -> Result<Vec<Vec<RecordBatch>>> {
    run_partitions(&decode(bytes, context)?, context, pool).await
}

/// Runs every partition of a decoded fragment. Partitions are fetched by the caller's
/// task, several at once (one bucket's round trips hide behind another's), and each is
/// computed on `pool` as soon as its bytes are in: a compute thread never waits on I/O,
/// and the thread driving I/O never computes (except with `ComputePool::Inline`).
/// Fetched bytes are bounded by the runtime's memory budget.
pub async fn run_partitions(
    fragment: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    pool: &ComputePool,
) -> Result<Vec<Vec<RecordBatch>>> {
    let scan = scan_of(fragment)
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?
        .clone();
    let runtime = QuiverRuntime::of(context.session_config())?;
    let options = QuiverOptions::of(context.session_config().options());
    let metrics = runtime.metrics();
    let count = scan.partitions().len();
    let prefetch = (pool.threads() * 2).max(4);
    let (scan, runtime, options) = (&scan, &runtime, &options);
    let mut fetches = futures::stream::iter(0..count)
        .map(|partition| async move {
            (
                partition,
                scan.fetch_partition(partition, runtime, options).await,
            )
        })
        .buffer_unordered(prefetch);
    let mut computing = futures::stream::FuturesUnordered::new();
    while let Some((partition, inputs)) = fetches.next().await {
        let instance = with_scan(fragment, Arc::new(scan.with_fetched(partition, inputs?)?))?;
        let (context, metrics) = (Arc::clone(context), Arc::clone(&metrics));
        let lane = scan.partitions()[partition]
            .first()
            .map_or_else(|| format!("partition {partition}"), |b| scan.lane(b));
        let computed = pool.start(move || {
            let span = metrics.timeline.begin();
            let computed = instance
                .execute(0, context)
                .and_then(|stream| futures::executor::block_on(stream.try_collect::<Vec<_>>()));
            metrics.timeline.end(span, SpanKind::Compute, lane, 0);
            computed
        });
        computing.push(async move { Ok::<_, DataFusionError>((partition, computed.await?)) });
    }
    let mut results: Vec<Vec<RecordBatch>> = vec![vec![]; count];
    while let Some(done) = computing.next().await {
        let (partition, batches) = done?;
        results[partition] = batches;
    }
    Ok(results)
}

/// datafusion-proto codec for our scan: the scan is data (schema, files, buckets), so it
/// travels as Arrow IPC (schema) and JSON (the rest).
#[derive(Debug)]
pub struct QuiverCodec;

#[derive(serde::Serialize, serde::Deserialize)]
struct ScanMessage {
    file_columns: usize,
    projection: Option<Vec<usize>>,
    files: Vec<ScanFile>,
    partitions: Vec<Vec<Bucket>>,
    summary: ScanSummary,
}

impl PhysicalExtensionCodec for QuiverCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let bad = |what: &str| DataFusionError::Internal(format!("malformed scan message: {what}"));
        let schema_len = u32::from_le_bytes(
            buf.get(..4)
                .ok_or_else(|| bad("too short"))?
                .try_into()
                .map_err(|_| bad("length"))?,
        ) as usize;
        let schema_bytes = buf.get(4..4 + schema_len).ok_or_else(|| bad("schema"))?;
        let schema: SchemaRef = StreamReader::try_new(Cursor::new(schema_bytes), None)?.schema();
        let message: ScanMessage =
            serde_json::from_slice(&buf[4 + schema_len..]).map_err(|e| bad(&e.to_string()))?;
        Ok(Arc::new(BucketScanExec::try_new(
            schema,
            message.file_columns,
            message.projection,
            Arc::new(message.files),
            message.partitions,
            message.summary,
        )?))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let scan = node.downcast_ref::<BucketScanExec>().ok_or_else(|| {
            DataFusionError::NotImplemented(format!("cannot serialise {}", node.name()))
        })?;
        let mut schema_bytes = Vec::new();
        StreamWriter::try_new(&mut schema_bytes, scan.table_schema())?.finish()?;
        let message = ScanMessage {
            file_columns: scan.file_columns(),
            projection: scan.projection().cloned(),
            files: scan.files().as_ref().clone(),
            partitions: scan.partitions().to_vec(),
            summary: scan.summary().clone(),
        };
        buf.extend_from_slice(&(schema_bytes.len() as u32).to_le_bytes());
        buf.extend_from_slice(&schema_bytes);
        serde_json::to_writer(buf, &message).map_err(|e| DataFusionError::Internal(e.to_string()))
    }
}
