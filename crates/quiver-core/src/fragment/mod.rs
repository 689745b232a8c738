//! Fragments: the parts of a physical plan that run without DataFusion's tokio machinery,
//! so that rayon threads in the browser, or a Lambda worker, can run them bucket by bucket.
//! What travels is decided here, below every executor: where a plan is cut (`cut`), how it
//! travels (`codec`), which joins run where their sides are read and how a join is rebuilt
//! over new inputs (`join`), and the exchange stages of joins of two big sides (`stage`).
//! Running them is `exec`'s.

mod codec;
mod cut;
mod join;
mod stage;

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::ExecutionPlan;

use crate::bucket::Bucket;
use crate::scan::{BucketScanExec, ScanFile};

pub use codec::{decode, encode, travelling_bytes, QuiverCodec};
pub use cut::{fragments, is_fragment, is_per_partition, probe_input, scan_of, with_scan};
pub use join::{
    below_exchange, distributed_as_required, held_output, is_memory, keeps_one_side, memory_bytes,
    partitionable, probes_alone, reduces_rows, rejoin,
};
pub use stage::{hash_parts, over_parts, sides, split_side, stage_of, ExchangeSide, ExchangeStage};

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

    /// The bytes the fragment's output will hold, from the footers' statistics; where they
    /// give no size (string columns have no fixed width), the Parquet bytes its buckets
    /// read, which decoding rarely makes smaller.
    pub fn estimated_output_bytes(&self) -> u64 {
        let statistics =
            StatisticsContext::new().compute(self.plan.as_ref(), &StatisticsArgs::new());
        match statistics
            .ok()
            .and_then(|s| s.total_byte_size.get_value().copied())
        {
            Some(bytes) => bytes as u64,
            None => self.buckets().iter().map(|bucket| bucket.bytes).sum(),
        }
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
