//! Any HTTP(S) server that answers range requests, through object_store's `HttpStore`
//! (HEAD, ranged GET, retries). Plain web servers have no listing API, so a glob is
//! expanded from the server's HTML index pages (nginx autoindex, Python's http.server…).

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::http::HttpBuilder;
use object_store::ClientOptions;

use super::remote::StoreSource;
use super::{ObjectMeta, ObjectSource};
use crate::error::{QuiverError, Result};

/// 10,000 objects and 8 folder levels at most: an index page crawl must stop somewhere.
const MAX_LISTED: usize = 10_000;
const MAX_DEPTH: usize = 8;

#[derive(Debug)]
pub struct HttpSource {
    store: StoreSource,
    /// For index pages, which object_store does not read (its HTTP listing is WebDAV).
    #[cfg(not(target_arch = "wasm32"))]
    client: reqwest::Client,
    origin: String,
}

/// `https://host:port` of a URL.
pub fn origin_of(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    let host_end = rest.find('/').unwrap_or(rest.len());
    Some(&url[..scheme.len() + 3 + host_end])
}

impl HttpSource {
    pub fn new(origin: &str) -> Result<Self> {
        let store = HttpBuilder::new()
            .with_url(origin)
            .with_retry(super::retry::store_retries(
                object_store::RetryConfig::default(),
            ))
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_connect_timeout(Duration::from_secs(10)),
            )
            .build()
            .map_err(|e| QuiverError::Invalid(format!("{origin}: {e}")))?;
        Ok(Self {
            store: StoreSource::new(Arc::new(store), format!("{origin}/"), true),
            #[cfg(not(target_arch = "wasm32"))]
            client: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| QuiverError::Invalid(format!("{origin}: {e}")))?,
            origin: origin.to_string(),
        })
    }

    /// The HTML of one index page.
    async fn index_page(&self, folder: &str) -> Result<String> {
        let (status, text) = self
            .fetch_text(folder)
            .await
            .map_err(|reason| QuiverError::Io {
                path: folder.into(),
                reason,
            })?;
        match status {
            200 => Ok(text),
            404 => Err(QuiverError::NotFound {
                path: folder.into(),
            }),
            401 | 403 => Err(QuiverError::Denied {
                path: folder.into(),
                reason: format!("HTTP {status}"),
            }),
            _ => Err(QuiverError::Io {
                path: folder.into(),
                reason: format!("HTTP {status} listing an index page"),
            }),
        }
    }

    /// A GET's status and body.
    #[cfg(not(target_arch = "wasm32"))]
    async fn fetch_text(&self, url: &str) -> std::result::Result<(u16, String), String> {
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.map_err(|e| e.to_string())?))
    }

    /// A GET's status and body, by the browser's fetch. Its futures are not `Send`, so it
    /// runs as a task of this thread's event loop and only its answer crosses over.
    #[cfg(target_arch = "wasm32")]
    async fn fetch_text(&self, url: &str) -> std::result::Result<(u16, String), String> {
        let url = url.to_string();
        super::on_event_loop(async move { browser::fetch_text(&url).await })
            .await
            .ok_or_else(|| "the fetch was dropped".to_string())?
    }

    /// The links of one index page: files and sub-folders on this server, below `folder`.
    async fn index(&self, folder: &str) -> Result<(Vec<String>, Vec<String>)> {
        let page = self.index_page(folder).await?;
        let (mut files, mut folders) = (BTreeSet::new(), BTreeSet::new());
        for href in hrefs(&page) {
            let Some(url) = self.resolve(folder, &href) else {
                continue;
            };
            if !url.starts_with(folder) || url.len() == folder.len() {
                continue; // parent links, other sites, the page itself
            }
            if url.ends_with('/') {
                folders.insert(url);
            } else {
                files.insert(url);
            }
        }
        Ok((files.into_iter().collect(), folders.into_iter().collect()))
    }

    fn resolve(&self, folder: &str, href: &str) -> Option<String> {
        let href = href.split(['?', '#']).next()?;
        if href.is_empty() {
            return None;
        }
        let url = if href.contains("://") {
            href.to_string()
        } else if let Some(absolute) = href.strip_prefix('/') {
            format!("{}/{absolute}", self.origin)
        } else {
            format!("{folder}{href}")
        };
        Some(without_dot_segments(&percent_decode(&url)))
    }
}

#[async_trait]
impl ObjectSource for HttpSource {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let root = if prefix.ends_with('/') {
            prefix.to_string()
        } else {
            format!("{}/", origin_of(prefix).unwrap_or(prefix))
        };
        let mut folders = vec![(root, 0)];
        let mut files = vec![];
        while let Some((folder, depth)) = folders.pop() {
            let (found, below) = self.index(&folder).await?;
            files.extend(found);
            if depth < MAX_DEPTH {
                folders.extend(below.into_iter().map(|f| (f, depth + 1)));
            }
            if files.len() > MAX_LISTED {
                return Err(QuiverError::Invalid(format!(
                    "{prefix}: more than {MAX_LISTED} files in its index pages"
                )));
            }
        }
        let mut metas: Vec<ObjectMeta> = stream::iter(files)
            .map(|url| async move { self.head(&url).await })
            .buffer_unordered(16)
            .try_collect()
            .await?;
        metas.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(metas)
    }

    async fn head(&self, path: &str) -> Result<ObjectMeta> {
        self.store.head(path).await
    }

    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
        self.store.get_range(object, range).await
    }

    fn latencies(&self) -> Option<&super::Latencies> {
        self.store.latencies()
    }
}

#[cfg(target_arch = "wasm32")]
mod browser {
    use wasm_bindgen::{JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;

    fn message(error: JsValue) -> String {
        match error.dyn_ref::<js_sys::Error>() {
            Some(error) => String::from(error.message()),
            None => error.as_string().unwrap_or_else(|| format!("{error:?}")),
        }
    }

    /// The engine runs in a Web Worker: its global scope fetches.
    pub async fn fetch_text(url: &str) -> Result<(u16, String), String> {
        let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let response: web_sys::Response = JsFuture::from(scope.fetch_with_str(url))
            .await
            .map_err(message)?
            .unchecked_into();
        let text = JsFuture::from(response.text().map_err(message)?)
            .await
            .map_err(message)?;
        Ok((response.status(), text.as_string().unwrap_or_default()))
    }
}

/// A URL with its `.` and `..` path segments resolved (`/a/b/../c/` is `/a/c/`), so that
/// an index page's parent link points above its folder and is left out.
fn without_dot_segments(url: &str) -> String {
    let Some(origin) = origin_of(url) else {
        return url.to_string();
    };
    let path = &url[origin.len()..];
    let mut segments: Vec<&str> = vec![];
    for segment in path.split('/').skip(1) {
        match segment {
            "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut resolved = format!("{origin}/{}", segments.join("/"));
    if (path.ends_with("/..") || path.ends_with("/.")) && !resolved.ends_with('/') {
        resolved.push('/');
    }
    resolved
}

/// Every `href="…"` (or `'…'`) value in an HTML page.
fn hrefs(page: &str) -> Vec<String> {
    let mut found = vec![];
    let mut rest = page;
    while let Some(at) = rest.find("href=") {
        rest = &rest[at + 5..];
        let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        rest = &rest[1..];
        if let Some(end) = rest.find(quote) {
            found.push(rest[..end].replace("&amp;", "&"));
            rest = &rest[end..];
        }
    }
    found
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(value) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_links_are_found_and_decoded() {
        let page = r#"<a href="a.parquet">a</a> <a href='sub/'>sub</a> <a href="../">up</a> <a href="x%20y.parquet">"#;
        assert_eq!(
            hrefs(page),
            vec!["a.parquet", "sub/", "../", "x%20y.parquet"]
        );
        assert_eq!(percent_decode("x%20y.parquet"), "x y.parquet");
        assert_eq!(
            origin_of("http://127.0.0.1:8000/d/a.parquet"),
            Some("http://127.0.0.1:8000")
        );
        assert_eq!(without_dot_segments("http://h/a/b/../"), "http://h/a/");
        assert_eq!(
            without_dot_segments("http://h/a/b/../b/x.parquet"),
            "http://h/a/b/x.parquet"
        );
        assert_eq!(without_dot_segments("http://h/a/./x"), "http://h/a/x");
    }
}
