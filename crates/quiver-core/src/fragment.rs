//! Fragments: the parts of a physical plan that run without DataFusion's tokio machinery,
//! so that rayon threads in the browser, or a Lambda worker, can run them bucket by bucket.
//!
//! A fragment is a maximal subtree made only of per-partition operators (output partition
//! `i` depends on input partition `i` alone: scan, filter, projection, partial aggregate,
//! TopK, a hash join probing a build side held in memory) over exactly one
//! `BucketScanExec`. Everything else stays on the coordinator, which runs it over the
//! fragments' outputs (final aggregate, other joins, sort, limit).
//!
//! Here: cutting plans into fragments, a fragment's work for one worker, and the proto codec
//! they travel with. Running them is `exec`'s.

use std::io::Cursor;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use crate::bucket::Bucket;
use crate::scan::{BucketScanExec, ScanFile, ScanSummary};

/// Whether output partition `i` of `plan` depends only on input partition `i` of its
/// probe input (see `probe_input`), computed without spawning tasks.
pub(crate) fn is_per_partition(plan: &Arc<dyn ExecutionPlan>) -> bool {
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
        // DataFusion 55 names a sort with a fetch "SortExec(TopK)".
        "SortExec" | "SortExec(TopK)" => plan
            .downcast_ref::<SortExec>()
            .is_some_and(|s| s.preserve_partitioning()),
        "HashJoinExec" => is_broadcast_join(plan),
        _ => false,
    }
}

/// A hash join whose build side is held in memory (it travels with the fragment) and
/// emits nothing for unmatched build rows, so each bucket probes it on its own.
fn is_broadcast_join(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<HashJoinExec>().is_some_and(|join| {
        *join.partition_mode() == PartitionMode::CollectLeft
            && crate::exec::broadcast::probes_alone(join)
            && crate::exec::broadcast::is_memory(join.left())
    })
}

/// The input a per-partition operator's partition `i` reads: its only child, or a
/// broadcast join's probe side. `None` for a leaf or any other operator.
pub(crate) fn probe_input(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(usize, &Arc<dyn ExecutionPlan>)> {
    match plan.children().as_slice() {
        [only] => Some((0, only)),
        [_, probe] if is_broadcast_join(plan) => Some((1, probe)),
        _ => None,
    }
}

/// A fragment: a chain of per-partition operators ending in one scan.
pub fn is_fragment(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut node = plan;
    loop {
        if !is_per_partition(node) {
            return false;
        }
        match probe_input(node) {
            Some((_, next)) => node = next,
            None => return node.children().is_empty() && node.name() == "BucketScanExec",
        }
    }
}

pub(crate) fn scan_of(fragment: &Arc<dyn ExecutionPlan>) -> Option<&BucketScanExec> {
    let mut node = fragment;
    loop {
        if let Some(scan) = node.downcast_ref::<BucketScanExec>() {
            return Some(scan);
        }
        node = probe_input(node)?.1;
    }
}

/// Replaces the scan at the bottom of `fragment` by `scan`, rebuilding the chain above it
/// (a broadcast join keeps its build side, and the hash table built from it).
pub(crate) fn with_scan(
    fragment: &Arc<dyn ExecutionPlan>,
    scan: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if fragment.downcast_ref::<BucketScanExec>().is_some() {
        return Ok(scan);
    }
    let (index, child) = probe_input(fragment)
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?;
    let mut children: Vec<_> = fragment.children().into_iter().cloned().collect();
    children[index] = with_scan(child, scan)?;
    replace_children_if_necessary(Arc::clone(fragment), children)
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

/// A fragment from its bytes. They come from the network, and datafusion-proto (with
/// Arrow under it) asserts on some malformed plans, such as a column index past its
/// schema: those are errors here, not a worker's crash.
pub fn decode(bytes: &[u8], context: &TaskContext) -> Result<Arc<dyn ExecutionPlan>> {
    crate::error::contain_panic(|| {
        physical_plan_from_bytes_with_extension_codec(bytes, context, &QuiverCodec)
    })
    .map_err(|panic| DataFusionError::Plan(format!("malformed fragment: {panic}")))?
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
        encode(&self.template_plan()?)
    }

    /// The fragment's plan with an empty scan, before it is encoded.
    pub fn template_plan(&self) -> Result<Arc<dyn ExecutionPlan>> {
        let empty = self.scan().with_work(Arc::new(vec![]), vec![])?;
        with_scan(&self.plan, Arc::new(empty))
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
/// bucket: what a worker runs partition by partition.
pub fn over_buckets(
    template: &Arc<dyn ExecutionPlan>,
    files: Vec<ScanFile>,
    buckets: Vec<Bucket>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let partitions = buckets.into_iter().map(|b| vec![b]).collect();
    over_partitions(template, files, partitions)
}

/// A decoded fragment template made to read `partitions` (buckets of `files`).
pub fn over_partitions(
    template: &Arc<dyn ExecutionPlan>,
    files: Vec<ScanFile>,
    partitions: Vec<Vec<Bucket>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let scan = scan_of(template)
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?;
    with_scan(
        template,
        Arc::new(scan.with_work(Arc::new(files), partitions)?),
    )
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
        decode_scan(buf)
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

/// A scan from its message: the table schema as Arrow IPC, then the rest as JSON.
fn decode_scan(buf: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
    let bad = |what: &str| DataFusionError::Internal(format!("malformed scan message: {what}"));
    let schema_len = u32::from_le_bytes(
        buf.get(..4)
            .ok_or_else(|| bad("too short"))?
            .try_into()
            .map_err(|_| bad("length"))?,
    ) as usize;
    let schema_end = schema_len.checked_add(4).ok_or_else(|| bad("length"))?;
    let schema_bytes = buf.get(4..schema_end).ok_or_else(|| bad("schema"))?;
    let schema: SchemaRef = StreamReader::try_new(Cursor::new(schema_bytes), None)?.schema();
    let message: ScanMessage =
        serde_json::from_slice(&buf[schema_end..]).map_err(|e| bad(&e.to_string()))?;
    Ok(Arc::new(BucketScanExec::try_new(
        schema,
        message.file_columns,
        message.projection,
        Arc::new(message.files),
        message.partitions,
        message.summary,
    )?))
}
