//! One object behind a signed URL: an `https://…?X-Amz-Signature=…` presigned by S3 (or any
//! URL whose query string grants access). The URL is used exactly as given, and since its
//! signature covers GET only, the object's size comes from a one-byte ranged GET
//! (`Content-Range: bytes 0-0/SIZE`) instead of a HEAD.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore};

use super::remote::store_error;
use super::{ObjectMeta, ObjectSource};
use crate::error::{QuiverError, Result};

/// Whether `path` is an HTTP(S) URL with a query string (`?key=value…`): one object, never
/// a glob. A `?` without a `key=` after it stays the glob's one-character wildcard.
pub fn is_signed_url(path: &str) -> bool {
    let web = path.starts_with("https://") || path.starts_with("http://");
    web && path
        .split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|pair| pair.contains('=')))
}

#[derive(Debug)]
pub struct SignedUrlSource {
    /// A store whose base is the whole URL: the empty key is the object itself.
    store: Arc<dyn ObjectStore>,
    url: String,
}

impl SignedUrlSource {
    pub fn new(url: &str) -> Result<Self> {
        let store = HttpBuilder::new()
            .with_url(url)
            .with_client_options(ClientOptions::new().with_allow_http(true))
            .build()
            .map_err(|e| QuiverError::Invalid(format!("{url}: {e}")))?;
        Ok(Self {
            store: Arc::new(store),
            url: url.to_string(),
        })
    }

    async fn get(
        &self,
        range: Range<u64>,
        if_match: Option<String>,
    ) -> Result<(u64, Option<String>, Bytes)> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match,
            ..Default::default()
        };
        let result = self
            .store
            .get_opts(&Path::default(), options)
            .await
            .map_err(|e| store_error(&self.url, e))?;
        let (size, etag) = (result.meta.size, result.meta.e_tag.clone());
        let bytes = result
            .bytes()
            .await
            .map_err(|e| store_error(&self.url, e))?;
        Ok((size, etag, bytes))
    }
}

#[async_trait]
impl ObjectSource for SignedUrlSource {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        Err(QuiverError::Unsupported {
            location: prefix.to_string(),
            reason: "a signed URL names one object; it cannot be listed".into(),
        })
    }

    async fn head(&self, path: &str) -> Result<ObjectMeta> {
        let (size, etag, _) = self.get(0..1, None).await?;
        Ok(ObjectMeta {
            path: path.to_string(),
            size,
            version: etag.unwrap_or_else(|| format!("size {size}")),
        })
    }

    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
        let if_match = object
            .version
            .starts_with('"')
            .then(|| object.version.clone());
        let read = super::retry::retried(|| self.get(range.clone(), if_match.clone()));
        Ok(read.await?.2)
    }
}

#[cfg(test)]
mod tests {
    use super::is_signed_url;

    #[test]
    fn a_query_string_makes_a_signed_url_and_a_lone_question_mark_a_glob() {
        let presigned = "https://b.s3.amazonaws.com/t.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab";
        assert!(is_signed_url(presigned));
        assert!(is_signed_url(
            "http://127.0.0.1:9000/b/k.parquet?AWSAccessKeyId=a&Signature=b"
        ));
        assert!(!is_signed_url("http://h/data/part-?.parquet"));
        assert!(!is_signed_url("https://h/data/*.parquet"));
        assert!(!is_signed_url("s3://b/k?x=1"));
    }
}
