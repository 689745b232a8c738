//! What a running query reaches through DataFusion's session config: sources, the footer
//! cache, the memory budget for bytes in flight, and this query's metrics.
//! Plans carry only data (paths, buckets); everything stateful lives here, so a plan that
//! travels to a worker finds the worker's own runtime.

use std::sync::{Arc, RwLock};

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionConfig;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::cache::BlockCache;
use crate::footer::FooterCache;
use crate::metrics::QueryMetrics;
use crate::options::QuiverOptions;
use crate::source::{HedgePolicy, ObjectMeta, ObjectSource, Sources};
use parquet::file::metadata::ParquetMetaData;

/// 1 GiB of fetched, not yet decoded bytes at most; buckets wait for room beyond it.
pub const MEMORY_BUDGET_BYTES: u64 = 1024 * 1024 * 1024;

/// The budget is counted in 64 KiB units to fit the semaphore's permit count.
const UNIT: u64 = 64 * 1024;

#[derive(Debug)]
pub struct QuiverRuntime {
    pub sources: Sources,
    pub footers: FooterCache,
    pub blocks: BlockCache,
    metrics: RwLock<Arc<QueryMetrics>>,
    /// The hedging of the statement running now, for its footer reads.
    hedge: RwLock<HedgePolicy>,
    memory: Arc<Semaphore>,
    memory_units: u32,
}

impl Default for QuiverRuntime {
    fn default() -> Self {
        Self::new(Sources::default(), MEMORY_BUDGET_BYTES)
    }
}

impl QuiverRuntime {
    pub fn new(sources: Sources, memory_budget_bytes: u64) -> Self {
        let memory_units = (memory_budget_bytes / UNIT).clamp(1, u32::MAX as u64 / 2) as u32;
        Self {
            sources,
            footers: FooterCache::default(),
            blocks: BlockCache::default(),
            metrics: RwLock::new(Arc::default()),
            hedge: RwLock::default(),
            memory: Arc::new(Semaphore::new(memory_units as usize)),
            memory_units,
        }
    }

    /// The runtime a plan runs with, from DataFusion's session config.
    pub fn of(config: &SessionConfig) -> Result<Arc<Self>> {
        config
            .get_extension::<Self>()
            .ok_or_else(|| DataFusionError::Internal("this session has no Quiver runtime".into()))
    }

    /// Starts a query: its metrics afresh (returned), the block cache bounded as its
    /// settings say, and to a quarter of the query's memory limit, which it sits outside of.
    pub fn begin_query(
        &self,
        options: &QuiverOptions,
        memory_limit: Option<u64>,
    ) -> Arc<QueryMetrics> {
        let share_of_limit = memory_limit.map_or(u64::MAX, |limit| limit / 4);
        self.blocks
            .set_capacity(options.block_cache_bytes.min(share_of_limit));
        *self.hedge.write().unwrap_or_else(|p| p.into_inner()) = options.hedge();
        let fresh = Arc::new(QueryMetrics::default());
        fresh.timeline.begin(); // the query's time origin
        *self.metrics.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&fresh);
        fresh
    }

    fn hedge(&self) -> HedgePolicy {
        *self.hedge.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn metrics(&self) -> Arc<QueryMetrics> {
        Arc::clone(&self.metrics.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// A file's parsed footer, read once per version; the bytes read for it go to the block
    /// cache too (for a small file, that is all of it).
    pub async fn footer(
        &self,
        source: &dyn ObjectSource,
        meta: &ObjectMeta,
        metrics: &QueryMetrics,
    ) -> datafusion::error::Result<Arc<ParquetMetaData>> {
        self.footer_of_length(source, meta, None, metrics).await
    }

    /// `footer`, for a file whose footer length the planner already knows (`ScanFile`): a
    /// cold read then takes exactly the footer.
    pub async fn footer_of_length(
        &self,
        source: &dyn ObjectSource,
        meta: &ObjectMeta,
        known_len: Option<u64>,
        metrics: &QueryMetrics,
    ) -> datafusion::error::Result<Arc<ParquetMetaData>> {
        Ok(self
            .footers
            .load(
                source,
                meta,
                known_len,
                metrics,
                &self.blocks,
                &self.hedge(),
            )
            .await?)
    }

    /// Waits until `bytes` fit in the memory budget; the room returns when the permit drops.
    /// A request larger than the whole budget takes the whole budget.
    pub async fn reserve(&self, bytes: u64) -> Result<OwnedSemaphorePermit> {
        let units = bytes.div_ceil(UNIT).clamp(1, self.memory_units as u64) as u32;
        Arc::clone(&self.memory)
            .acquire_many_owned(units)
            .await
            .map_err(|e| DataFusionError::Internal(format!("memory budget closed: {e}")))
    }
}
