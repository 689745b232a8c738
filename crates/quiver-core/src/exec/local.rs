//! Fragments run here: each bucket's bytes fetched by the calling task, its compute
//! handed to the pool, so fetching the next bucket overlaps computing this one.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use futures::{StreamExt, TryStreamExt};

use super::{ComputePool, FragmentRunner};
use crate::bucket::{runs_within, Bucket};
use crate::fragment::{decode, scan_of, with_scan, Fragment};
use crate::metrics::SpanKind;
use crate::runtime::QuiverRuntime;

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

/// One fragment, all its buckets: fetch the next bucket while earlier ones compute.
pub async fn run_fragment(
    bytes: &[u8],
    context: &Arc<TaskContext>,
    pool: &ComputePool,
) -> Result<Vec<Vec<RecordBatch>>> {
    run_partitions(&decode(bytes, context)?, context, pool).await
}

/// Runs a decoded fragment in runs of buckets, each an output partition of its own (any
/// grouping of buckets is one the plan above accepts): a run holds at most a bucket's
/// cap of bytes, so a partition of many big buckets is never fetched whole, and small
/// buckets still share a run. Runs are fetched by the caller's task, several at once (one
/// run's round trips hide behind another's), and each is computed on `pool` as soon as
/// its bytes are in: a compute thread never waits on I/O, and the thread driving I/O
/// never computes (except with `ComputePool::Inline`).
pub async fn run_partitions(
    fragment: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    pool: &ComputePool,
) -> Result<Vec<Vec<RecordBatch>>> {
    let scan = scan_of(fragment)
        .ok_or_else(|| DataFusionError::Internal("fragment without a scan".into()))?
        .clone();
    let runtime = QuiverRuntime::of(context.session_config())?;
    let metrics = runtime.metrics();
    let cap = (runtime.query().settings.options)
        .buckets(pool.threads(), context.memory_pool().as_ref())
        .bucket_cap();
    let mut runs: Vec<Vec<Bucket>> = (scan.partitions().iter())
        .flat_map(|partition| runs_within(partition, cap))
        .collect();
    // One run over no bucket when there are none: an aggregate still answers.
    if runs.is_empty() {
        runs.push(vec![]);
    }
    let count = runs.len();
    let prefetch = (pool.threads() * 2).max(4);
    let (scan, runtime) = (&scan, &runtime);
    let mut fetches = futures::stream::iter(runs.into_iter().enumerate())
        .map(|(index, buckets)| async move {
            let inputs = scan.fetch(&buckets, runtime).await;
            (index, buckets, inputs)
        })
        .buffer_unordered(prefetch);
    let mut computing = futures::stream::FuturesUnordered::new();
    while let Some((index, buckets, inputs)) = fetches.next().await {
        let lane = buckets
            .first()
            .map_or_else(|| format!("partition {index}"), |b| scan.lane(b));
        let instance = with_scan(fragment, Arc::new(scan.with_fetched(buckets, inputs?)?))?;
        let (context, metrics) = (Arc::clone(context), Arc::clone(&metrics));
        let computed = pool.start(move || {
            let span = metrics.timeline.begin();
            let computed = instance
                .execute(0, context)
                .and_then(|stream| futures::executor::block_on(stream.try_collect::<Vec<_>>()));
            metrics.timeline.end(span, SpanKind::Compute, lane, 0);
            computed
        });
        computing.push(async move { Ok::<_, DataFusionError>((index, computed.await?)) });
    }
    let mut results: Vec<Vec<RecordBatch>> = vec![vec![]; count];
    while let Some(done) = computing.next().await {
        let (index, batches) = done?;
        results[index] = batches;
    }
    Ok(results)
}
