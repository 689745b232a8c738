//! The one metered read. Every byte a query reads from a source passes here: the GET is
//! hedged when late (`source::Hedged`), what the block cache holds is served from it and
//! what is fetched is kept there, and each request is counted in the query's metrics and
//! drawn on its timeline. Footers, bucket fetches, the scan's on-demand reader and the
//! index all read through an `ObjectReader`, so a new layer (a disk cache) has one place
//! to go.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};

use crate::cache::{BlockCache, Lookup};
use crate::error::{QuiverError, Result};
use crate::fetch::{coalesce, FetchOptions, FetchedBytes};
use crate::metrics::{QueryMetrics, SpanKind};
use crate::source::{HedgePolicy, Hedged, ObjectMeta, ObjectSource};

/// What a read needs of the statement it serves: the runtime's block cache, the
/// statement's counters and its hedging.
#[derive(Debug, Clone)]
pub struct QueryIo {
    pub blocks: Arc<BlockCache>,
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
        self.served_from_cache(held)
    }

    /// The bytes of `ranges`: what the block cache holds is served from it, the rest is
    /// coalesced as `options` say, fetched with bounded concurrency and kept in the cache
    /// (if the source's bytes are worth keeping).
    pub async fn fetch(
        &self,
        ranges: &[Range<u64>],
        options: &FetchOptions,
        lane: &str,
    ) -> Result<FetchedBytes> {
        let Lookup { held, missing } = self.io.blocks.lookup(&self.object, ranges);
        let mut fetched = self.served_from_cache(held);
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
            self.io.blocks.insert(&self.object, &read);
        }
        fetched.stats.requests = read.len() as u64;
        fetched.stats.bytes = read.iter().map(|(_, b)| b.len() as u64).sum();
        Ok(fetched.with(read))
    }

    /// The whole object, from the block cache if it holds all of it (an index file read by
    /// a session's earlier statement), else in one GET kept there.
    pub async fn whole(&self, lane: &str) -> Result<Bytes> {
        let whole = 0..self.object.size;
        let cached = self
            .io
            .blocks
            .lookup(&self.object, std::slice::from_ref(&whole));
        if let ([(0, bytes)], true) = (cached.held.as_slice(), cached.missing.is_empty()) {
            QueryMetrics::add(&self.metrics().cache_hit_bytes, self.object.size);
            return Ok(bytes.clone());
        }
        let bytes = self.read(whole, SpanKind::Data, lane).await?;
        self.keep(0, &bytes);
        Ok(bytes)
    }

    /// Keeps `bytes`, read at `start` of the object, in the block cache.
    pub fn keep(&self, start: u64, bytes: &Bytes) {
        self.io
            .blocks
            .insert(&self.object, &[(start, bytes.clone())]);
    }

    fn served_from_cache(&self, held: Vec<(u64, Bytes)>) -> FetchedBytes {
        let cache_hit_bytes = held.iter().map(|(_, b)| b.len() as u64).sum();
        QueryMetrics::add(&self.metrics().cache_hit_bytes, cache_hit_bytes);
        let mut fetched = FetchedBytes::new(held);
        fetched.stats.cache_hit_bytes = cache_hit_bytes;
        fetched
    }
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
