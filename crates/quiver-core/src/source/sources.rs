//! The registry of sources: picks the source for a path by its scheme, and keeps one per
//! bucket or server so that connections (and credentials) are reused across queries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::http::{self, HttpSource};
use super::s3::{s3_source, S3Credentials, S3Options};
use super::signed_url::{is_signed_url, SignedUrlSource};
use super::{LocalSource, ObjectSource};
use crate::error::{QuiverError, Result};

/// Picks the source for a path by its scheme, and keeps one per bucket or server so that
/// connections (and credentials) are reused across queries.
#[derive(Debug)]
pub struct Sources {
    remote: Mutex<HashMap<(String, S3Options), Arc<dyn ObjectSource>>>,
    credentials: Mutex<Option<S3Credentials>>,
    /// Where paths without a scheme are read: the disk, or in the browser the files the page
    /// was given (which has no disk).
    local: Mutex<Arc<dyn ObjectSource>>,
}

/// The remote source a path is read from (`s3://bucket`, an HTTP server's origin, a signed
/// URL itself, since its query string is its credentials); `None` for this machine's files.
pub fn remote_key(path: &str) -> Option<String> {
    let (scheme, rest) = path.split_once("://")?;
    match scheme {
        "s3" | "s3a" => Some(format!(
            "s3://{}",
            rest.split('/').next().unwrap_or_default()
        )),
        "http" | "https" if is_signed_url(path) => Some(path.to_string()),
        "http" | "https" => Some(http::origin_of(path).unwrap_or(path).to_string()),
        _ => None,
    }
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            remote: Mutex::default(),
            credentials: Mutex::default(),
            local: Mutex::new(Arc::new(LocalSource)),
        }
    }
}

impl Sources {
    /// Reads paths without a scheme (and `file://`) from `source` from now on.
    pub fn set_local(&self, source: Arc<dyn ObjectSource>) {
        *self.local.lock().unwrap_or_else(|p| p.into_inner()) = source;
    }

    /// The keys a program handed over, if any (the page signs its coordinator calls with
    /// them too).
    pub fn s3_credentials(&self) -> Option<S3Credentials> {
        self.credentials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Signs S3 requests with these keys from now on (`None` forgets them); sources made
    /// with the old keys are dropped.
    pub fn set_s3_credentials(&self, credentials: Option<S3Credentials>) {
        *self.credentials.lock().unwrap_or_else(|p| p.into_inner()) = credentials;
        let mut sources = self.remote.lock().unwrap_or_else(|p| p.into_inner());
        sources.retain(|(key, _), _| !key.starts_with("s3://"));
    }

    /// Writes one object through the source its path names (so the query's S3 settings
    /// apply).
    pub async fn put(&self, path: &str, s3: &S3Options, bytes: Bytes) -> Result<()> {
        self.for_path(path, s3)?.put(path, bytes).await
    }

    /// Writes one object from a staged file on local disk (see `ObjectSource::put_file`).
    pub async fn put_file(
        &self,
        path: &str,
        s3: &S3Options,
        staged: &std::path::Path,
    ) -> Result<()> {
        self.for_path(path, s3)?.put_file(path, staged).await
    }

    pub fn for_path(&self, path: &str, s3: &S3Options) -> Result<Arc<dyn ObjectSource>> {
        let (scheme, _) = match path.split_once("://") {
            None | Some(("file", _)) => {
                let local = self.local.lock().unwrap_or_else(|p| p.into_inner());
                return Ok(Arc::clone(&local));
            }
            Some(parts) => parts,
        };
        let key = remote_key(path).unwrap_or_default();
        let (key, s3) = match scheme {
            "s3" | "s3a" => {
                if key.len() == "s3://".len() {
                    return Err(QuiverError::invalid(format!("{path}: no bucket name")));
                }
                (key, s3.clone())
            }
            "http" | "https" => (key, S3Options::default()),
            other => {
                return Err(QuiverError::Unsupported {
                    location: path.to_string(),
                    reason: format!("the '{other}://' scheme is not supported (local paths, s3://, http://, https://)"),
                })
            }
        };
        let mut sources = self.remote.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = sources.get(&(key.clone(), s3.clone())) {
            return Ok(Arc::clone(found));
        }
        let made: Arc<dyn ObjectSource> = if is_signed_url(path) {
            Arc::new(SignedUrlSource::new(path)?)
        } else if scheme.starts_with("http") {
            Arc::new(HttpSource::new(&key)?)
        } else {
            let credentials = self.credentials.lock().unwrap_or_else(|p| p.into_inner());
            Arc::new(s3_source(&key["s3://".len()..], &s3, credentials.as_ref())?)
        };
        sources.insert((key, s3), Arc::clone(&made));
        Ok(made)
    }

    /// Deletes `paths`, best effort: what a failed job or a losing attempt left behind is
    /// in no manifest, so a delete that fails leaves litter, never a wrong answer.
    /// The deletes go out at once.
    pub async fn discard<'a>(&self, paths: impl IntoIterator<Item = &'a str>, s3: &S3Options) {
        let deletes = paths.into_iter().map(|path| async move {
            if let Ok(source) = self.for_path(path, s3) {
                let _ = source.delete(path).await;
            }
        });
        futures::future::join_all(deletes).await;
    }
}
