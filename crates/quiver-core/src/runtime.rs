//! What a running statement reaches through DataFusion's session config: sources, the
//! footer, block and disk caches, the memory budget for bytes in flight, and the statement
//! itself (its settings, resolved once, and its metrics). Plans carry only data (paths,
//! buckets); everything stateful lives here, so a plan that travels to a worker finds the
//! worker's own runtime. Files are opened one way: `open` (a reader and its footer).

use std::sync::{Arc, RwLock};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionConfig;
use futures::stream::{self, StreamExt, TryStreamExt};
use parquet::file::metadata::ParquetMetaData;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::cache::{open_lasting, BlockCache, LastingCache};
use crate::footer::{Footer, FooterCache};
use crate::metrics::QueryMetrics;
use crate::options::{QuiverOptions, Settings};
use crate::rates::Rates;
use crate::read::{ObjectReader, QueryIo};
use crate::source::{ObjectMeta, ObjectSource, Sources};

/// 1 GiB of fetched, not yet decoded bytes at most; buckets wait for room beyond it.
pub const MEMORY_BUDGET_BYTES: u64 = 1024 * 1024 * 1024;

/// The budget is counted in 64 KiB units to fit the semaphore's permit count.
const UNIT: u64 = 64 * 1024;

/// 64 footers in flight while planning: listing-sized concurrency for object storage.
const FOOTER_CONCURRENCY: usize = 64;

/// The statement running now.
#[derive(Debug, Default)]
pub struct Query {
    pub settings: Settings,
    pub metrics: Arc<QueryMetrics>,
}

/// A Parquet file opened for a statement: how to read it, and its footer.
#[derive(Debug, Clone)]
pub struct ParquetFile {
    pub reader: ObjectReader,
    pub footer: Arc<Footer>,
}

impl ParquetFile {
    pub fn meta(&self) -> &ObjectMeta {
        &self.reader.object
    }

    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        &self.footer.metadata
    }

    /// The file's columns as Arrow types them (mapped as its footer was read: `footer`).
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        Ok(self.footer.arrow_schema(&self.meta().path)?)
    }
}

#[derive(Debug)]
pub struct QuiverRuntime {
    pub sources: Sources,
    pub footers: FooterCache,
    pub blocks: Arc<BlockCache>,
    /// What this machine's reads and threads were measured to do (see `exec::place`).
    pub rates: Rates,
    /// Behind the block cache, for the processes after this one; opened as the statement's
    /// settings say (`quiver.disk_cache_bytes`, `quiver.cache_dir`).
    disk: RwLock<Option<Arc<dyn LastingCache>>>,
    query: RwLock<Arc<Query>>,
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
            blocks: Arc::default(),
            rates: Rates::default(),
            disk: RwLock::default(),
            query: RwLock::default(),
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

    /// Starts a statement under `options`: its settings resolved, its metrics afresh
    /// (returned), the block cache bounded as its settings say, and to a quarter of the
    /// statement's memory limit, which it sits outside of, and the disk cache opened,
    /// bounded or closed as they say.
    pub fn begin_query(
        &self,
        options: &QuiverOptions,
        memory_limit: Option<u64>,
    ) -> Arc<QueryMetrics> {
        let share_of_limit = memory_limit.map_or(u64::MAX, |limit| limit / 4);
        self.blocks
            .set_capacity(options.block_cache_bytes.min(share_of_limit));
        self.open_disk_cache(options);
        let query = Query {
            settings: Settings::of(options.clone()),
            metrics: Arc::default(),
        };
        query.metrics.timeline.begin(); // the statement's time origin
        let metrics = Arc::clone(&query.metrics);
        *self.query.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(query);
        metrics
    }

    fn open_disk_cache(&self, options: &QuiverOptions) {
        let wanted = options.disk_cache_dir();
        let mut disk = self.disk.write().unwrap_or_else(|p| p.into_inner());
        if let (Some(open), Some(dir)) = (disk.as_ref(), &wanted) {
            if open.dir() == dir {
                return open.set_capacity(options.disk_cache_bytes);
            }
        }
        let opened = wanted.and_then(|dir| open_lasting(&dir, options.disk_cache_bytes));
        let replaced = std::mem::replace(&mut *disk, opened);
        drop(disk);
        // It waits for its queued writes as it drops (rare: a setting changed), so not
        // under the lock that every read takes.
        drop(replaced);
    }

    /// The statement running now.
    pub fn query(&self) -> Arc<Query> {
        Arc::clone(&self.query.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn metrics(&self) -> Arc<QueryMetrics> {
        Arc::clone(&self.query().metrics)
    }

    /// The source `path` is read from or written to, with the statement's S3 settings.
    pub fn source_for(&self, path: &str) -> Result<Arc<dyn ObjectSource>> {
        Ok(self.sources.for_path(path, &self.query().settings.s3)?)
    }

    /// How the statement running now reads `object` (see `read`).
    pub fn reader(&self, object: &ObjectMeta) -> Result<ObjectReader> {
        let query = self.query();
        Ok(ObjectReader {
            source: self.sources.for_path(&object.path, &query.settings.s3)?,
            object: object.clone(),
            io: QueryIo {
                blocks: Arc::clone(&self.blocks),
                disk: self.disk.read().unwrap_or_else(|p| p.into_inner()).clone(),
                metrics: Arc::clone(&query.metrics),
                hedge: query.settings.hedge,
            },
        })
    }

    /// A Parquet file opened: its reader, and its footer, read once per version (the
    /// bytes read for it go to the block cache too: for a small file, that is all of it).
    /// `footer_len`, the footer's encoded length when the planner knows it: a cold read
    /// then takes exactly the footer.
    pub async fn open(&self, object: &ObjectMeta, footer_len: Option<u64>) -> Result<ParquetFile> {
        let reader = self.reader(object)?;
        let footer = self.footers.load(&reader, footer_len).await?;
        Ok(ParquetFile { reader, footer })
    }

    /// `files` opened (see `open`), many footers in flight at once, in their order.
    pub async fn open_all(&self, files: &[ObjectMeta]) -> Result<Vec<ParquetFile>> {
        // By index: a closure over `&ObjectMeta` would not be `Send` for every lifetime.
        stream::iter(0..files.len())
            .map(|i| async move { self.open(&files[i], None).await })
            .buffered(FOOTER_CONCURRENCY)
            .try_collect()
            .await
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
