//! Any `object_store` store as a source: S3 and HTTP share this adapter, which maps paths
//! (`s3://bucket/key`) to store keys and the store's errors to ours. The store does the
//! protocol, signing, retries and backoff natively; in the browser `retry` retries.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::retry::retried;
use super::{Latencies, ObjectMeta, ObjectSource};
use crate::error::{QuiverError, Result};

#[derive(Debug, Clone)]
pub struct StoreSource {
    store: Arc<dyn ObjectStore>,
    /// What precedes the key in a path: `s3://bucket/`, `https://host:port/`.
    base: String,
    /// Whether ranged GETs send `If-Match` with the listed etag.
    checks_etag: bool,
    latencies: Arc<Latencies>,
    /// What presigns URLs for this store (S3), natively.
    #[cfg(not(target_arch = "wasm32"))]
    signer: Option<Arc<dyn object_store::signer::Signer>>,
}

impl StoreSource {
    pub fn new(store: Arc<dyn ObjectStore>, base: String, checks_etag: bool) -> Self {
        Self {
            store,
            base,
            checks_etag,
            latencies: Arc::default(),
            #[cfg(not(target_arch = "wasm32"))]
            signer: None,
        }
    }

    /// Presigns URLs with `signer` (the store itself, for S3).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_signer(mut self, signer: Arc<dyn object_store::signer::Signer>) -> Self {
        self.signer = Some(signer);
        self
    }

    pub fn key(&self, path: &str) -> Result<Path> {
        let key = path
            .strip_prefix(&self.base)
            .ok_or_else(|| QuiverError::Invalid(format!("{path} is not under {}", self.base)))?;
        Path::parse(key).map_err(|e| QuiverError::Invalid(format!("{path}: {e}")))
    }

    fn meta(&self, object: object_store::ObjectMeta) -> ObjectMeta {
        let version = object
            .e_tag
            .clone()
            .unwrap_or_else(|| format!("size {}, modified {}", object.size, object.last_modified));
        ObjectMeta {
            path: format!("{}{}", self.base, object.location),
            size: object.size,
            version,
        }
    }
}

#[async_trait]
impl ObjectSource for StoreSource {
    /// Every object under the folder `prefix` (which ends in `/`, or is the bucket root).
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let folder = prefix
            .strip_prefix(&self.base)
            .unwrap_or_default()
            .trim_end_matches('/');
        let folder = (!folder.is_empty())
            .then(|| Path::parse(folder))
            .transpose()
            .map_err(|e| QuiverError::Invalid(format!("{prefix}: {e}")))?;
        let listed: Vec<object_store::ObjectMeta> = retried(|| async {
            let pages = self.store.list(folder.as_ref()).try_collect().await;
            pages.map_err(|e| store_error(prefix, e))
        })
        .await?;
        Ok(listed.into_iter().map(|o| self.meta(o)).collect())
    }

    async fn head(&self, path: &str) -> Result<ObjectMeta> {
        let key = self.key(path)?;
        let object = retried(|| async {
            self.store
                .head(&key)
                .await
                .map_err(|e| store_error(path, e))
        })
        .await?;
        Ok(self.meta(object))
    }

    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            // Only a strong etag can be held to (a weak one fails If-Match by definition).
            if_match: (self.checks_etag && object.version.starts_with('"'))
                .then(|| object.version.clone()),
            ..Default::default()
        };
        let read_error = |e: object_store::Error| match store_error(&object.path, e) {
            QuiverError::Io { path, reason } => QuiverError::Read {
                path,
                start: range.start,
                end: range.end,
                reason,
            },
            QuiverError::Changed { path, .. } => QuiverError::Changed {
                path,
                expected: object.version.clone(),
                found: "a newer version".into(),
            },
            other => other,
        };
        let key = self.key(&object.path)?;
        retried(|| async {
            let result = self
                .store
                .get_opts(&key, options.clone())
                .await
                .map_err(read_error)?;
            result.bytes().await.map_err(read_error)
        })
        .await
    }

    fn latencies(&self) -> Option<&Latencies> {
        Some(&self.latencies)
    }

    async fn put(&self, path: &str, bytes: Bytes) -> Result<()> {
        self.store
            .put(&self.key(path)?, bytes.into())
            .await
            .map_err(|e| store_error(path, e))?;
        Ok(())
    }

    async fn put_file(&self, path: &str, staged: &std::path::Path) -> Result<()> {
        let small = std::fs::metadata(staged).is_ok_and(|m| m.len() <= PART_BYTES as u64);
        if small {
            match std::fs::read(staged) {
                Ok(bytes) => self.put(path, bytes.into()).await,
                Err(e) => Err(QuiverError::Io {
                    path: staged.display().to_string(),
                    reason: e.to_string(),
                }),
            }
        } else {
            self.put_in_parts(path, staged).await
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    async fn presigned_get(&self, path: &str, expires: std::time::Duration) -> Result<String> {
        let Some(signer) = &self.signer else {
            return Err(QuiverError::Unsupported {
                location: path.to_string(),
                reason: "this store cannot presign URLs".into(),
            });
        };
        let url = signer
            .signed_url(reqwest::Method::GET, &self.key(path)?, expires)
            .await
            .map_err(|e| store_error(path, e))?;
        Ok(url.to_string())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        match self.store.delete(&self.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(path, e)),
        }
    }
}

/// Parts of a multipart upload: S3's minimum is 5 MiB; larger parts mean fewer requests.
const PART_BYTES: usize = 16 << 20;

/// Parts in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

impl StoreSource {
    /// A staged file larger than a part uploaded in parts, read from disk a part at a time; a failed upload is
    /// aborted, so the store keeps no orphaned parts.
    async fn put_in_parts(&self, path: &str, staged: &std::path::Path) -> Result<()> {
        use std::io::Read;
        let io = |e: std::io::Error| QuiverError::Io {
            path: staged.display().to_string(),
            reason: e.to_string(),
        };
        let mut file = std::fs::File::open(staged).map_err(io)?;
        let upload = self
            .store
            .put_multipart(&self.key(path)?)
            .await
            .map_err(|e| store_error(path, e))?;
        let mut upload = object_store::WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buffer = vec![0; PART_BYTES];
        loop {
            let read = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) => {
                    let _ = upload.abort().await;
                    return Err(io(e));
                }
            };
            upload.write(&buffer[..read]);
            if let Err(e) = upload.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = upload.abort().await;
                return Err(store_error(path, e));
            }
        }
        upload.finish().await.map_err(|e| store_error(path, e))?;
        Ok(())
    }
}

/// Our error for a store's, naming the object; credentials never appear in these messages.
pub fn store_error(path: &str, error: object_store::Error) -> QuiverError {
    use object_store::Error as E;
    match error {
        E::NotFound { .. } => QuiverError::NotFound {
            path: path.to_string(),
        },
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => QuiverError::Denied {
            path: path.to_string(),
            reason: format!(
                "the server refused the request ({}); check the credentials, the region and the bucket policy",
                root_cause(&*source).trim_end_matches([':', ' '])
            ),
        },
        E::Precondition { .. } => QuiverError::Changed {
            path: path.to_string(),
            expected: "the listed version".into(),
            found: "a newer version".into(),
        },
        other => {
            // Listing errors arrive as generic ones; S3's error code says what happened.
            let text = other.to_string();
            let has = |code: &str| text.contains(code);
            if has("NoSuchBucket") {
                let bucket = path.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
                QuiverError::NoSuchBucket { bucket }
            } else if let Some(code) = ["SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403 Forbidden"]
                .into_iter()
                .find(|code| has(code))
            {
                QuiverError::Denied {
                    path: path.to_string(),
                    reason: format!("the server refused the request ({code}); check the credentials, the region and the bucket policy"),
                }
            } else {
                QuiverError::Io { path: path.to_string(), reason: text }
            }
        }
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
