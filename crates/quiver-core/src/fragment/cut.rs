//! Where a plan is cut: a fragment is a maximal subtree made only of per-partition
//! operators (output partition `i` depends on input partition `i` alone: scan, filter,
//! projection, partial aggregate, TopK, a hash join probing a build side held in memory)
//! over exactly one `BucketScanExec`. Everything else stays on the coordinator.

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};

use super::join::{is_memory, probes_alone};
use crate::scan::BucketScanExec;

/// Whether output partition `i` of `plan` depends only on input partition `i` of its
/// probe input (see `probe_input`), computed without spawning tasks.
pub fn is_per_partition(plan: &Arc<dyn ExecutionPlan>) -> bool {
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
            && probes_alone(join)
            && is_memory(join.left())
    })
}

/// The input a per-partition operator's partition `i` reads: its only child, or a
/// broadcast join's probe side. `None` for a leaf or any other operator.
pub fn probe_input(plan: &Arc<dyn ExecutionPlan>) -> Option<(usize, &Arc<dyn ExecutionPlan>)> {
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

/// The scan at the bottom of a fragment.
pub fn scan_of(fragment: &Arc<dyn ExecutionPlan>) -> Option<&BucketScanExec> {
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
pub fn with_scan(
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
