//! Files the page was given (dropped on it or picked from disk): the browser's local disk.
//! A query names one by its name (`'orders.parquet'`, or a glob over the names) and reads it
//! with range reads like any source: only the footer and the column chunks it needs are
//! copied out of the file, however big the file is.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use quiver_core::error::Result;
use quiver_core::source::{ObjectMeta, ObjectSource};
use quiver_core::QuiverError;
use wasm_bindgen::JsValue;

thread_local! {
    /// By name. A `File` is a JavaScript object and stays on the engine worker's thread,
    /// which is where sources are called (compute threads never read).
    static FILES: RefCell<BTreeMap<String, web_sys::File>> = RefCell::default();
}

/// Makes `file` readable as its name; a file of the same name is replaced.
pub fn open(file: web_sys::File) -> String {
    let name = file.name();
    FILES.with(|files| files.borrow_mut().insert(name.clone(), file));
    name
}

/// Paths without a scheme: the page's files.
#[derive(Debug)]
pub struct PageFiles;

fn name_of(path: &str) -> &str {
    path.strip_prefix("file://").unwrap_or(path)
}

fn meta_of(name: &str, file: &web_sys::File) -> ObjectMeta {
    ObjectMeta {
        path: name.to_string(),
        size: file.size() as u64,
        // A file picked again after it was edited is a new File with another mtime.
        version: format!("{}-{}", file.size(), file.last_modified()),
    }
}

fn head(path: &str) -> Result<ObjectMeta> {
    let name = name_of(path);
    FILES
        .with(|files| files.borrow().get(name).map(|file| meta_of(name, file)))
        .ok_or_else(|| QuiverError::NotFound { path: path.into() })
}

/// FileReaderSync: a worker may read a file synchronously, and a range of a local file
/// comes back in about the time a copy takes.
fn read(object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
    let now = head(&object.path)?;
    if now.version != object.version {
        return Err(QuiverError::Changed {
            path: object.path.clone(),
            expected: object.version.clone(),
            found: now.version,
        });
    }
    let failed = |error: JsValue| QuiverError::Read {
        path: object.path.clone(),
        start: range.start,
        end: range.end,
        reason: crate::message_of(&error),
    };
    let buffer = FILES.with(|files| {
        let files = files.borrow();
        let file = (files.get(name_of(&object.path))).ok_or_else(|| QuiverError::NotFound {
            path: object.path.clone(),
        })?;
        let slice = file
            .slice_with_f64_and_f64(range.start as f64, range.end as f64)
            .map_err(failed)?;
        web_sys::FileReaderSync::new()
            .and_then(|reader| reader.read_as_array_buffer(&slice))
            .map_err(failed)
    })?;
    Ok(Bytes::from(js_sys::Uint8Array::new(&buffer).to_vec()))
}

#[async_trait]
impl ObjectSource for PageFiles {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let prefix = name_of(prefix);
        Ok(FILES.with(|files| {
            (files.borrow().iter())
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(name, file)| meta_of(name, file))
                .collect()
        }))
    }

    async fn head(&self, path: &str) -> Result<ObjectMeta> {
        head(path)
    }

    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
        read(object, range)
    }
}
