//! What a query will cost, before it reads a data page, and what it did cost: GETs, bytes,
//! Lambda workers and GB-seconds, and dollars at the prices in the settings (AWS's list
//! prices by default). The estimate plans the query (reading the footers, as the run will)
//! and coalesces every bucket's column chunks exactly as the scan will request them; the
//! workers and their time come from the executor that would run them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;

use crate::fetch::coalesce;
use crate::metrics::MetricsSnapshot;
use crate::options::QuiverOptions;
use crate::runtime::QuiverRuntime;
use crate::scan::BucketScanExec;
use crate::source::remote_key;

/// What reading a scan's buckets takes: requests and bytes (after the block cache).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlannedReads {
    pub buckets: u64,
    /// Buckets of files on this machine, which no worker can read.
    pub local_buckets: u64,
    /// The buckets' planned bytes (before coalescing and the cache), as workers are counted.
    pub planned_bytes: u64,
    pub requests: u64,
    pub bytes: u64,
}

/// What running a scan on workers spends: invocations and GB-seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WorkerCost {
    pub workers: u64,
    pub gb_seconds: f64,
    /// From the first invocation to the last answer (estimated; 0 when measured).
    pub seconds: f64,
}

/// Prices in dollars, from `quiver.price_*`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub per_thousand_gets: f64,
    pub per_gb_second: f64,
    pub per_million_invocations: f64,
}

impl Prices {
    pub fn of(options: &QuiverOptions) -> Self {
        Self {
            per_thousand_gets: options.price_per_1000_gets,
            per_gb_second: options.price_per_gb_second,
            per_million_invocations: options.price_per_million_invocations,
        }
    }
}

/// A query's cost: estimated before it runs, or measured after.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    pub files: u64,
    pub buckets: u64,
    /// GETs for footers (planning reads them; a run in a fresh process reads them again).
    pub footer_gets: u64,
    /// GETs for column chunks.
    pub data_gets: u64,
    /// Bytes of both.
    pub bytes: u64,
    pub workers: WorkerCost,
}

impl Cost {
    pub fn gets(&self) -> u64 {
        self.footer_gets + self.data_gets
    }

    pub fn dollars(&self, prices: &Prices) -> f64 {
        self.gets() as f64 / 1_000.0 * prices.per_thousand_gets
            + self.workers.gb_seconds * prices.per_gb_second
            + self.workers.workers as f64 / 1_000_000.0 * prices.per_million_invocations
    }

    /// What a run spent, from its metrics (and its workers', on Lambda).
    pub fn measured(metrics: &MetricsSnapshot, workers: WorkerCost) -> Self {
        Self {
            files: metrics.files,
            buckets: metrics.buckets_total,
            footer_gets: metrics.footer_requests,
            data_gets: metrics.requests.saturating_sub(metrics.footer_requests),
            bytes: metrics.bytes_read,
            workers,
        }
    }

    /// One line for `--profile`.
    pub fn line(&self, prices: &Prices) -> String {
        let mut line = format!(
            "cost: {} GETs ({} for footers), {} bytes",
            self.gets(),
            self.footer_gets,
            self.bytes
        );
        if self.workers.workers > 0 {
            line.push_str(&format!(
                ", {} worker invocations, {:.1} GB-seconds",
                self.workers.workers, self.workers.gb_seconds
            ));
        }
        line.push_str(&format!(", ${:.6}", self.dollars(prices)));
        line
    }

    /// `EXPLAIN COST`'s answer: one row.
    pub fn batch(&self, prices: &Prices) -> Result<RecordBatch> {
        let whole = |name: &str| Field::new(name, DataType::UInt64, false);
        let real = |name: &str| Field::new(name, DataType::Float64, false);
        let schema = Schema::new(vec![
            whole("files"),
            whole("buckets"),
            whole("gets"),
            whole("footer_gets"),
            whole("bytes"),
            whole("workers"),
            real("gb_seconds"),
            real("dollars"),
        ]);
        let whole_value = |v: u64| Arc::new(UInt64Array::from(vec![v])) as _;
        let real_value = |v: f64| Arc::new(Float64Array::from(vec![v])) as _;
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![
                whole_value(self.files),
                whole_value(self.buckets),
                whole_value(self.gets()),
                whole_value(self.footer_gets),
                whole_value(self.bytes),
                whole_value(self.workers.workers),
                real_value(self.workers.gb_seconds),
                real_value(self.dollars(prices)),
            ],
        )?)
    }
}

/// Every Quiver scan in `plan`.
pub fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<&BucketScanExec> {
    let mut found = Vec::new();
    let mut stack = vec![plan];
    while let Some(node) = stack.pop() {
        if let Some(scan) = node.downcast_ref::<BucketScanExec>() {
            found.push(scan);
        }
        stack.extend(node.children());
    }
    found
}

/// The reads `plan`'s scans will make, one entry per scan: what the block cache holds is
/// not requested, nor what an earlier scan of the plan fetches and the cache then keeps
/// (TPC-H Q18 reads lineitem's columns twice, and fetches them once).
pub async fn planned_reads(
    plan: &Arc<dyn ExecutionPlan>,
    runtime: &QuiverRuntime,
) -> Result<Vec<PlannedReads>> {
    let settings = &runtime.query().settings;
    let fetch = settings.fetch;
    let keeps = settings.options.block_cache_bytes > 0;
    let mut fetched: HashMap<String, Vec<Range<u64>>> = HashMap::new();
    let mut scans_reads = Vec::new();
    for scan in scans(plan) {
        let mut reads = PlannedReads::default();
        for bucket in scan.bucket_reads(runtime).await? {
            let missing = runtime.blocks.lookup(&bucket.meta, &bucket.ranges).missing;
            let earlier = fetched.entry(bucket.meta.path.clone()).or_default();
            let requests = coalesce(&without(&missing, earlier), &fetch);
            reads.buckets += 1;
            reads.local_buckets += u64::from(remote_key(&bucket.meta.path).is_none());
            reads.planned_bytes += bucket.planned;
            reads.requests += requests.len() as u64;
            reads.bytes += requests.iter().map(|r| r.end - r.start).sum::<u64>();
            if keeps && bucket.cached {
                earlier.extend(requests);
            }
        }
        scans_reads.push(reads);
    }
    Ok(scans_reads)
}

/// The parts of `wanted` that no range of `held` covers.
fn without(wanted: &[Range<u64>], held: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut left = Vec::new();
    for range in wanted {
        let mut pieces = vec![range.clone()];
        for hole in held {
            pieces = pieces
                .into_iter()
                .flat_map(|p| {
                    if hole.end <= p.start || p.end <= hole.start {
                        return vec![p];
                    }
                    [p.start..hole.start.max(p.start), hole.end.min(p.end)..p.end]
                        .into_iter()
                        .filter(|r| r.start < r.end)
                        .collect()
                })
                .collect();
        }
        left.extend(pieces);
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one range, not the numbers in it
    fn what_an_earlier_scan_fetched_is_not_fetched_again() {
        assert_eq!(without(&[0..10, 20..30], &[5..25]), vec![0..5, 25..30]);
        assert_eq!(without(&[0..10], &[0..3, 6..8]), vec![3..6, 8..10]);
        assert_eq!(without(&[0..10], &[]), vec![0..10]);
        assert!(without(&[2..4], &[0..10]).is_empty());
    }

    #[test]
    fn dollars_follow_aws_list_prices() {
        let prices = Prices::of(&QuiverOptions::default());
        let cost = Cost {
            footer_gets: 1_000,
            data_gets: 9_000,
            workers: WorkerCost {
                workers: 100,
                gb_seconds: 1_000.0,
                seconds: 0.0,
            },
            ..Cost::default()
        };
        // 10,000 GETs at $0.0004 per 1,000; 1,000 GB-s at $0.0000166667; 100 invocations
        // at $0.20 per million.
        let expected = 0.004 + 0.0166667 + 0.00002;
        assert!((cost.dollars(&prices) - expected).abs() < 1e-9, "{cost:?}");
        let line = cost.line(&prices);
        assert!(
            line.starts_with("cost: 10000 GETs (1000 for footers)"),
            "{line}"
        );
        assert!(
            line.contains("100 worker invocations, 1000.0 GB-seconds"),
            "{line}"
        );
        let row = cost.batch(&prices).unwrap();
        assert_eq!(row.num_rows(), 1);
        assert_eq!(row.schema().field(2).name(), "gets");
    }
}
