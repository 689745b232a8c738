//! Bytes already fetched, so that no request asks for them again: in memory for this
//! process (`memory`), and, for the processes after it, on disk (`disk`) or in the
//! browser's origin private file system (`opfs`), both laid out as `pieces` says. `read`
//! asks them in that order before the network.

mod disk;
mod memory;
#[cfg(target_arch = "wasm32")]
mod opfs;
mod pieces;

use std::fmt::Debug;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::source::ObjectMeta;

pub use disk::{DiskCache, DISK_CACHE_BYTES};
pub use memory::{BlockCache, Lookup, BLOCK_CACHE_BYTES};
#[cfg(target_arch = "wasm32")]
pub use opfs::OpfsCache;

/// Remote bytes kept beyond this process, asked after memory and before the network.
#[async_trait]
pub trait LastingCache: Debug + Send + Sync {
    /// The folder it keeps them in.
    fn dir(&self) -> &Path;

    /// Bounds it to `bytes` from the next write on.
    fn set_capacity(&self, bytes: u64);

    /// What it holds of `ranges` of `object`, and what it lacks; a piece it cannot read
    /// whole is lacking (and removed), never an error.
    async fn lookup(&self, object: &ObjectMeta, ranges: Vec<Range<u64>>) -> Lookup;

    /// Keeps `pieces` of `object`, fetched just now: written later, off the query's path,
    /// or not at all if too much waits to be written.
    fn keep(&self, object: &ObjectMeta, pieces: &[(u64, Bytes)]);
}

/// The lasting cache in `dir`, bounded to `capacity` bytes: files natively, the origin
/// private file system in the browser. `None` where `dir` cannot be one.
pub fn open_lasting(dir: &Path, capacity: u64) -> Option<Arc<dyn LastingCache>> {
    #[cfg(target_arch = "wasm32")]
    return Some(Arc::new(OpfsCache::open(dir, capacity)));
    #[cfg(not(target_arch = "wasm32"))]
    return DiskCache::open(dir, capacity).map(|cache| Arc::new(cache) as _);
}

/// Where a lasting cache is kept unless `quiver.cache_dir` says: `$XDG_CACHE_HOME/quiver`,
/// else `~/.cache/quiver` (`~/Library/Caches/quiver` on macOS), none without a home; in
/// the browser, the folder `quiver` of the origin private file system.
pub fn default_dir() -> Option<PathBuf> {
    if cfg!(target_arch = "wasm32") {
        return Some(PathBuf::from("quiver"));
    }
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("quiver"));
    }
    let caches = if cfg!(target_os = "macos") {
        "Library/Caches"
    } else {
        ".cache"
    };
    Some(
        PathBuf::from(non_empty("HOME")?)
            .join(caches)
            .join("quiver"),
    )
}
