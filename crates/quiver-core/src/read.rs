//! The one metered read. Every byte a query reads from a source passes here: what the
//! block cache holds is served from it, then what the disk cache holds (moved into memory),
//! the rest is fetched (the GET hedged when late, `source::Hedged`) and kept in both, and
//! each request and hit is counted in the query's metrics and drawn on its timeline.
//! Footers, bucket fetches, the scan's on-demand reader and the index all read through an
//! `ObjectReader`.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};

use crate::cache::{BlockCache, LastingCache, Lookup};
use crate::error::{QuiverError, Result};
use crate::fetch::{coalesce, FetchOptions, FetchedBytes};
use crate::metrics::{QueryMetrics, SpanKind};
use crate::source::{HedgePolicy, Hedged, ObjectMeta, ObjectSource};

/// What a read needs of the statement it serves: the runtime's caches, the statement's
/// counters and its hedging.
#[derive(Debug, Clone)]
pub struct QueryIo {
    pub blocks: Arc<BlockCache>,
    /// Remote bytes kept on disk by this process and the ones before it, if it is on.
    pub disk: Option<Arc<dyn LastingCache>>,
    pub metrics: Arc<QueryMetrics>,
    pub hedge: HedgePolicy,
}

/// One object as a statement reads it: where it lives, which version, and the statement's
/// I/O (made by `QuiverRuntime::reader`).
#[derive(Debug, Clone)]
pub struct ObjectReader {
    pub source: Arc<dyn ObjectSource>,
    pub object: ObjectMeta,
    pub io: QueryIo,
}

impl ObjectReader {
    pub fn metrics(&self) -> &QueryMetrics {
        &self.io.metrics
    }

    /// The bytes of `range`, in one GET (hedged when late), counted and drawn on the
    /// timeline as a `kind` span in `lane`. The block cache is neither asked nor filled.
    pub async fn read(&self, range: Range<u64>, kind: SpanKind, lane: &str) -> Result<Bytes> {
        let metrics = self.metrics();
        let started = metrics.timeline.begin();
        let hedged = Hedged {
            source: self.source.as_ref(),
            policy: self.io.hedge,
        };
        let (read, hedging) = hedged.get_range(&self.object, range).await;
        QueryMetrics::add(&metrics.hedged_requests, hedging.hedged as u64);
        QueryMetrics::add(&metrics.abandoned_requests, hedging.abandoned as u64);
        let bytes = read?;
        let size = bytes.len() as u64;
        metrics.record_read(size);
        if kind == SpanKind::Footer {
            QueryMetrics::add(&metrics.footer_requests, 1);
        }
        metrics.timeline.end(started, kind, lane.to_string(), size);
        Ok(bytes)
    }

    /// What the block cache holds of `ranges`, counted as hits; nothing is fetched.
    pub fn cached(&self, ranges: &[Range<u64>]) -> FetchedBytes {
        let Lookup { held, .. } = self.io.blocks.lookup(&self.object, ranges);
        Held::in_memory(held).served(self.metrics())
    }

    /// The bytes of `ranges`: what the caches hold is served from them, the rest is
    /// coalesced as `options` say, fetched with bounded concurrency and kept (if the
    /// source's bytes are worth keeping).
    pub async fn fetch(
        &self,
        ranges: &[Range<u64>],
        options: &FetchOptions,
        lane: &str,
    ) -> Result<FetchedBytes> {
        let (held, missing) = self.held(ranges).await;
        let mut fetched = held.served(self.metrics());
        let plan = coalesce(&missing, options);
        let read: Vec<(u64, Bytes)> = stream::iter(plan)
            .map(|range| async move {
                let bytes = self.read(range.clone(), SpanKind::Data, lane).await?;
                Ok::<_, QuiverError>((range.start, bytes))
            })
            .buffer_unordered(options.max_concurrent_requests.max(1))
            .try_collect()
            .await?;
        if self.source.keeps_blocks() {
            self.keep_all(&read);
        }
        fetched.stats.requests = read.len() as u64;
        fetched.stats.bytes = read.iter().map(|(_, b)| b.len() as u64).sum();
        Ok(fetched.with(read))
    }

    /// The bytes of `range` in one piece: from the caches if they hold all of it, else in
    /// one GET (see `read`) kept in both. Footers are read so.
    pub async fn read_kept(&self, range: Range<u64>, kind: SpanKind, lane: &str) -> Result<Bytes> {
        let (held, missing) = self.held(std::slice::from_ref(&range)).await;
        if missing.is_empty() {
            if let Some(bytes) = held.served(self.metrics()).slice(&range) {
                return Ok(bytes);
            }
        }
        let bytes = self.read(range.clone(), kind, lane).await?;
        self.keep(range.start, &bytes);
        Ok(bytes)
    }

    /// The whole object (an index file), from the caches if they hold all of it.
    pub async fn whole(&self, lane: &str) -> Result<Bytes> {
        self.read_kept(0..self.object.size, SpanKind::Data, lane)
            .await
    }

    /// Keeps `bytes`, read at `start` of the object, in the caches.
    pub fn keep(&self, start: u64, bytes: &Bytes) {
        self.keep_all(&[(start, bytes.clone())]);
    }

    /// Keeps `pieces` in the block cache, and on disk if the source is remote.
    fn keep_all(&self, pieces: &[(u64, Bytes)]) {
        self.io.blocks.insert(&self.object, pieces);
        if let Some(disk) = self.disk() {
            disk.keep(&self.object, pieces);
        }
    }

    /// The disk cache, for a remote source only: the local disk's bytes are their own cache.
    fn disk(&self) -> Option<&Arc<dyn LastingCache>> {
        self.io.disk.as_ref().filter(|_| self.source.keeps_blocks())
    }

    /// What the caches hold of `ranges`, memory first, then disk (whose hits move into
    /// memory), not yet counted; and what neither holds.
    async fn held(&self, ranges: &[Range<u64>]) -> (Held, Vec<Range<u64>>) {
        let Lookup { held, missing } = self.io.blocks.lookup(&self.object, ranges);
        let mut found = Held::in_memory(held);
        let Some(disk) = self.disk().filter(|_| !missing.is_empty()) else {
            return (found, missing);
        };
        let Lookup { held, missing } = disk.lookup(&self.object, missing).await;
        if !held.is_empty() {
            self.io.blocks.insert(&self.object, &held);
        }
        found.disk_hits = held.len() as u64;
        found.disk_bytes = total(&held);
        found.pieces.extend(held);
        (found, missing)
    }
}

/// Bytes the caches served: how many came from memory and from disk.
struct Held {
    pieces: Vec<(u64, Bytes)>,
    memory_bytes: u64,
    disk_hits: u64,
    disk_bytes: u64,
}

impl Held {
    fn in_memory(pieces: Vec<(u64, Bytes)>) -> Self {
        Self {
            memory_bytes: total(&pieces),
            pieces,
            disk_hits: 0,
            disk_bytes: 0,
        }
    }

    /// These bytes as fetched, counted as hits in `metrics`.
    fn served(self, metrics: &QueryMetrics) -> FetchedBytes {
        QueryMetrics::add(&metrics.cache_hit_bytes, self.memory_bytes);
        QueryMetrics::add(&metrics.disk_cache_hits, self.disk_hits);
        QueryMetrics::add(&metrics.disk_cache_hit_bytes, self.disk_bytes);
        let mut fetched = FetchedBytes::new(self.pieces);
        fetched.stats.cache_hit_bytes = self.memory_bytes;
        fetched.stats.disk_cache_hit_bytes = self.disk_bytes;
        fetched
    }
}

fn total(pieces: &[(u64, Bytes)]) -> u64 {
    pieces.iter().map(|(_, b)| b.len() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LocalSource;

    /// A reader of a 4 KiB local file of counting bytes, over a cache that keeps what a
    /// local read fetches (the disk's own say `keeps_blocks` is false, so it is filled by hand).
    async fn reader(dir: &std::path::Path) -> ObjectReader {
        let path = dir.join("bytes.bin");
        std::fs::write(&path, (0..4096u32).map(|i| i as u8).collect::<Vec<_>>()).unwrap();
        let object = LocalSource.head(path.to_str().unwrap()).await.unwrap();
        ObjectReader {
            source: Arc::new(LocalSource),
            object,
            io: QueryIo {
                blocks: Arc::default(),
                disk: None,
                metrics: Arc::default(),
                hedge: HedgePolicy::default(),
            },
        }
    }

    #[tokio::test]
    async fn every_read_is_counted_and_what_the_cache_holds_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader(dir.path()).await;
        let footer = reader
            .read(4000..4096, SpanKind::Footer, "f")
            .await
            .unwrap();
        assert_eq!(footer[0], (4000 % 256) as u8);
        reader.keep(4000, &footer);
        let options = FetchOptions {
            coalesce_gap: 100,
            ..FetchOptions::default()
        };
        // Two close ranges make one request; the footer's bytes come from the cache.
        let fetched = reader
            .fetch(&[0..10, 50..60, 4000..4010], &options, "rg 0")
            .await
            .unwrap();
        assert_eq!(fetched.stats.requests, 1);
        assert_eq!(fetched.stats.bytes, 60);
        assert_eq!(fetched.stats.cache_hit_bytes, 10);
        assert_eq!(fetched.slice(&(4000..4010)).unwrap()[..], footer[..10]);
        let metrics = reader.metrics().snapshot();
        assert_eq!((metrics.requests, metrics.footer_requests), (2, 1));
        assert_eq!(metrics.bytes_read, 96 + 60);
        let spans = reader.metrics().timeline.spans();
        assert_eq!(spans.len(), 2);
        assert_eq!(
            (spans[0].kind, spans[1].lane.as_str()),
            (SpanKind::Footer, "rg 0")
        );
    }

    #[tokio::test]
    async fn a_range_outside_the_object_is_an_error_and_not_a_request() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader(dir.path()).await;
        let error = reader
            .read(4000..5000, SpanKind::Data, "x")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("outside the object"), "{error}");
        assert_eq!(reader.metrics().snapshot().requests, 0);
    }

    #[tokio::test]
    async fn a_whole_object_is_read_once_then_served_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader(dir.path()).await;
        let first = reader.whole("index").await.unwrap();
        let second = reader.whole("index").await.unwrap();
        assert_eq!((first.len(), first), (4096, second));
        let metrics = reader.metrics().snapshot();
        assert_eq!((metrics.requests, metrics.cache_hit_bytes), (1, 4096));
    }
}
