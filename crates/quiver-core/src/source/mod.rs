//! Sources: where Parquet files live. A source lists objects under a prefix and reads byte
//! ranges of one object; everything above it (footers, pruning, buckets, fetch) speaks only
//! this narrow trait, so local disk, S3 and HTTP are interchangeable.

mod aws_profile;
mod glob;
pub mod hedge;
pub mod hive;
mod http;
mod latency;
mod listing;
mod local;
#[cfg(unix)]
pub mod mapped;
mod remote;
pub mod retry;
mod s3;
mod signed_url;
mod sources;

use std::fmt::Debug;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{QuiverError, Result};

/// Starts `work`, whose futures are not `Send` (the browser's promises), as a task of this
/// thread's event loop, where the engine's I/O runs; what is awaited is only its output
/// (`None` if the task ended without one), so the caller's future stays `Send`.
#[cfg(target_arch = "wasm32")]
pub(crate) fn on_event_loop<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + 'static,
) -> impl std::future::Future<Output = Option<T>> + Send {
    let (sender, receiver) = futures::channel::oneshot::channel();
    wasm_bindgen_futures::spawn_local(async move {
        let _ = sender.send(work.await);
    });
    async move { receiver.await.ok() }
}

pub use glob::GlobPattern;
pub use hedge::{
    first_success, Finish, HedgePolicy, Hedged, Hedging, Winner, HEDGE_MIN_MS, HEDGE_MULTIPLE,
};
pub use http::HttpSource;
pub use latency::Latencies;
pub use listing::{
    list_files, virtual_fields as listing_virtual_fields, ListedFile, Listing, ListingOptions,
    INDEX_FILE_NAME, VIRTUAL_COLUMNS,
};
pub(crate) use local::off_async;
pub use local::LocalSource;
pub use s3::{S3Credentials, S3Options};
pub use signed_url::is_signed_url;
pub use sources::{remote_key, Sources};

/// One object as a listing sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectMeta {
    /// The path as the user would write it (`data/a.parquet`, later `s3://b/k`).
    pub path: String,
    pub size: u64,
    /// What changes when the object is rewritten: an etag, or size and mtime locally.
    pub version: String,
}

#[async_trait]
pub trait ObjectSource: Debug + Send + Sync {
    /// Every object whose path starts with `prefix`, recursively.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>>;

    /// One object's metadata; `NotFound` when it does not exist.
    async fn head(&self, path: &str) -> Result<ObjectMeta>;

    /// The bytes of `range` of `object`, which must lie inside it. An object rewritten since
    /// `object` was listed fails with `Changed` (sources check the etag or mtime), so a query
    /// never mixes two versions of a file.
    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes>;

    /// Writes a whole object (COPY's output, a worker's spilled result, a manifest).
    async fn put(&self, path: &str, _bytes: Bytes) -> Result<()> {
        Err(QuiverError::Unsupported {
            location: path.to_string(),
            reason: "this source is read-only".into(),
        })
    }

    /// Writes an object from a file on local disk (COPY's output, staged on disk as it was
    /// produced; the caller removes what is left of it): a store takes it in parts and the
    /// disk by a rename, so it is never whole in memory. This default reads it whole.
    async fn put_file(&self, path: &str, staged: &std::path::Path) -> Result<()> {
        let bytes = std::fs::read(staged).map_err(|e| QuiverError::Io {
            path: staged.display().to_string(),
            reason: e.to_string(),
        })?;
        self.put(path, bytes.into()).await
    }

    /// A URL anyone holding it may GET `path` with, until `expires` from now (S3's
    /// presigned URLs): how an answer too large for a response is handed over.
    async fn presigned_get(&self, path: &str, _expires: std::time::Duration) -> Result<String> {
        Err(QuiverError::Unsupported {
            location: path.to_string(),
            reason: "this source cannot presign URLs".into(),
        })
    }

    /// Deletes an object; deleting one that is not there is not an error.
    async fn delete(&self, path: &str) -> Result<()> {
        Err(QuiverError::Unsupported {
            location: path.to_string(),
            reason: "this source is read-only".into(),
        })
    }

    /// The bytes a footer's first read takes from the end of a file: as many as cost about
    /// what one byte costs, so that nearly every footer takes one read. Object storage: 512
    /// KiB, for a round trip's worth.
    fn footer_read_bytes(&self) -> u64 {
        512 * 1024
    }

    /// Whether fetched bytes are worth keeping in the block cache. Local disk says no: the
    /// OS's page cache keeps its hot pages, and a second copy would only take memory (a
    /// large export's peak grew with the file, up to the cache's 256 MiB).
    fn keeps_blocks(&self) -> bool {
        true
    }

    /// Whether a scan reads this source's bytes as its decoder asks for them, instead of
    /// fetching each bucket whole ahead of decoding: the local disk, whose page cache and
    /// read-ahead already do what fetching ahead does for a remote source, so that a scan
    /// holds one row group's columns per partition instead of buckets of up to 128 MiB (an
    /// export of SF 1 lineitem held the whole file).
    fn reads_on_demand(&self) -> bool {
        false
    }

    /// How long this source's reads have been taking, for sources whose reads can stall
    /// (remote ones); `hedge` hedges their late reads.
    fn latencies(&self) -> Option<&Latencies> {
        None
    }

    /// The whole object.
    async fn get(&self, path: &str) -> Result<Bytes> {
        let object = self.head(path).await?;
        self.get_range(&object, 0..object.size).await
    }
}

/// A name unique enough for objects a job writes (COPY's files, a worker's spilled output):
/// time, process and a counter, so re-running a job never overwrites another's objects.
pub fn unique_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{nanos:x}-{:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
