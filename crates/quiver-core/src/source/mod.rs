//! Sources: where Parquet files live. A source lists objects under a prefix and reads byte
//! ranges of one object; everything above it (footers, pruning, buckets, fetch) speaks only
//! this narrow trait, so local disk, S3 and HTTP are interchangeable.

mod glob;
mod listing;
mod local;

use std::fmt::Debug;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{QuiverError, Result};

pub use glob::GlobPattern;
pub use listing::{
    list_files, virtual_fields as listing_virtual_fields, ListedFile, Listing, ListingOptions,
    VIRTUAL_COLUMNS,
};
pub use local::LocalSource;

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

    /// The bytes of `range` in `path`, which must lie inside the object.
    async fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes>;
}

/// Picks the source for a path by its scheme.
#[derive(Debug, Clone)]
pub struct Sources {
    local: Arc<dyn ObjectSource>,
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            local: Arc::new(LocalSource),
        }
    }
}

impl Sources {
    pub fn for_path(&self, path: &str) -> Result<Arc<dyn ObjectSource>> {
        match path.split_once("://") {
            None => Ok(Arc::clone(&self.local)),
            Some(("file", _)) => Ok(Arc::clone(&self.local)),
            Some((scheme, _)) => Err(QuiverError::Unsupported {
                location: path.to_string(),
                reason: format!("the '{scheme}://' scheme is not supported yet; use a local path"),
            }),
        }
    }
}
