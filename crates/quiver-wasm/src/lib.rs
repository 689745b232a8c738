//! Quiver in the browser. The page's engine worker (web/src/engine.worker.ts) makes one
//! `Engine` and drives it: network I/O is async fetch on that worker's event loop, and
//! fragments compute on rayon's pool, which wasm-bindgen-rayon builds from more Web Workers
//! (the threads build), or on the engine worker itself (the single-threaded build, for
//! pages that are not cross-origin isolated). The API is in docs/browser.md.

mod coordinator;
mod page_files;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::writer::StreamWriter;
use futures::future::{AbortHandle, Abortable};
use quiver_core::exec::ComputePool;
use quiver_core::format::{write_batches, OutputFormat};
use quiver_core::metrics::QueryMetrics;
use quiver_core::source::S3Credentials;
#[cfg(target_arch = "wasm32")]
use quiver_core::{default_cache_dir, OpfsCache};
use quiver_core::{describe, ExecutorKind, QuiverSession, SessionOptions};
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;
use web_time::Instant;

#[cfg(target_feature = "atomics")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// Remote bytes the page keeps in this origin's private file system for the pages after
/// it (a reload, a second tab), unless `quiver.disk_cache_bytes` says otherwise: 1 GiB.
const PAGE_CACHE_BYTES: &str = "1073741824";

/// Errors reach JavaScript as `Error`s with Quiver's message.
fn js_error(error: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&error.to_string()).into()
}

/// The message of an error JavaScript threw.
fn message_of(error: &JsValue) -> String {
    match error.dyn_ref::<js_sys::Error>() {
        Some(error) => String::from(error.message()),
        None => error.as_string().unwrap_or_else(|| format!("{error:?}")),
    }
}

#[wasm_bindgen]
pub struct Engine {
    session: Rc<QuiverSession>,
    /// Stops the running query (the last one started; aborting a finished one does nothing).
    running: RefCell<Option<AbortHandle>>,
}

#[wasm_bindgen]
impl Engine {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Result<Engine, JsValue> {
        console_error_panic_hook::set_once();
        let options = SessionOptions {
            threads: Self::compute_threads(),
            executor: ExecutorKind::Fragments,
        };
        let session = QuiverSession::new(options).map_err(js_error)?;
        (session.runtime().sources).set_local(Arc::new(page_files::PageFiles));
        session
            .set("quiver.disk_cache_bytes", PAGE_CACHE_BYTES)
            .map_err(js_error)?;
        Ok(Self {
            session: Rc::new(session),
            running: RefCell::default(),
        })
    }

    /// rayon's pool in the threads build (as big as `initThreadPool` made it), else 1.
    fn compute_threads() -> usize {
        if cfg!(target_feature = "atomics") {
            ComputePool::Global.threads()
        } else {
            1
        }
    }

    /// Compute threads: the rayon pool's size, or 1.
    #[wasm_bindgen(getter)]
    pub fn threads(&self) -> usize {
        self.session.pool().threads()
    }

    /// Whether this is the threads build.
    #[wasm_bindgen(getter)]
    pub fn threaded(&self) -> bool {
        cfg!(target_feature = "atomics")
    }

    /// `SET key = value`: quiver.s3_endpoint, quiver.s3_region, quiver.s3_anonymous, …
    pub fn set(&self, key: &str, value: &str) -> Result<(), JsValue> {
        self.session.set(key, value).map_err(js_error)
    }

    /// Signs S3 requests with these keys, held in this worker's memory only.
    #[wasm_bindgen(js_name = setCredentials)]
    pub fn set_credentials(
        &self,
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
    ) {
        let credentials = S3Credentials {
            access_key_id,
            secret_access_key,
            session_token: session_token.filter(|t| !t.is_empty()),
        };
        let sources = &self.session.runtime().sources;
        sources.set_s3_credentials(Some(credentials));
    }

    #[wasm_bindgen(js_name = forgetCredentials)]
    pub fn forget_credentials(&self) {
        self.session.runtime().sources.set_s3_credentials(None);
    }

    /// Makes a file the page holds (dropped, or picked from disk) a table by its name;
    /// returns the name. Its bytes are read only as queries need them.
    #[wasm_bindgen(js_name = openFile)]
    pub fn open_file(&self, file: web_sys::File) -> String {
        page_files::open(file)
    }

    /// Runs `sql` (several `;`-separated statements: the last one's result), here or, with
    /// `quiver.function_url` set, on the coordinator when `quiver.place` says so.
    pub fn query(&self, sql: String) -> js_sys::Promise {
        let session = Rc::clone(&self.session);
        let (handle, registration) = AbortHandle::new_pair();
        *self.running.borrow_mut() = Some(handle);
        future_to_promise(async move {
            let started = Instant::now();
            let lambda = RefCell::new(None);
            let run = coordinator::run_here_or_there(&session, &sql, &lambda);
            let output = Abortable::new(run, registration)
                .await
                .map_err(|_| js_error("cancelled"))?
                .map_err(|e| js_error(describe(&e)))?;
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            Ok(QueryResult {
                schema: output.schema,
                batches: output.batches,
                metrics: output.metrics,
                elapsed_ms,
                lambda: lambda.take(),
            }
            .into())
        })
    }

    /// Stops the running query where it next waits (for bytes, or for compute threads):
    /// its promise rejects with "cancelled", and caches and settings stay.
    pub fn cancel(&self) {
        if let Some(handle) = self.running.borrow_mut().take() {
            handle.abort();
        }
    }

    /// The running query's progress, as JSON.
    pub fn progress(&self) -> String {
        let metrics = self.session.runtime().metrics().snapshot();
        serde_json::to_string(&metrics).unwrap_or_default()
    }

    /// Bytes the page's lasting cache holds, once what queries fetched is written; `null`
    /// where the browser has no origin private file system.
    #[cfg(target_arch = "wasm32")]
    #[wasm_bindgen(js_name = cacheSize)]
    pub fn cache_size(&self) -> js_sys::Promise {
        future_to_promise(async move {
            OpfsCache::settled().await;
            let size = page_cache().size().await;
            Ok(size.map_or(JsValue::NULL, |bytes| JsValue::from_f64(bytes as f64)))
        })
    }

    /// Empties the page's lasting cache; returns the bytes freed.
    #[cfg(target_arch = "wasm32")]
    #[wasm_bindgen(js_name = clearCache)]
    pub fn clear_cache(&self) -> js_sys::Promise {
        future_to_promise(async move {
            OpfsCache::settled().await;
            Ok(JsValue::from_f64(page_cache().clear().await as f64))
        })
    }

    /// The metadata of the files `path` names (a glob too), as JSON.
    pub fn metadata(&self, path: String) -> js_sys::Promise {
        let session = Rc::clone(&self.session);
        future_to_promise(async move {
            let files = session.describe_files(&path).await.map_err(js_error)?;
            let text = serde_json::to_string(&files).map_err(js_error)?;
            Ok(JsValue::from_str(&text))
        })
    }
}

/// The lasting cache where queries keep it (the default folder: the page does not move it).
#[cfg(target_arch = "wasm32")]
fn page_cache() -> OpfsCache {
    OpfsCache::open(&default_cache_dir().unwrap_or_default(), 0)
}

/// A statement's result, kept in wasm memory until the page frees it.
#[wasm_bindgen]
pub struct QueryResult {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    metrics: Arc<QueryMetrics>,
    elapsed_ms: f64,
    /// The coordinator's metrics, when the workers answered.
    lambda: Option<Value>,
}

#[wasm_bindgen]
impl QueryResult {
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// An Arrow IPC stream (apache-arrow's `tableFromIPC` reads it). apache-arrow cannot
    /// read view types, which DataFusion gives Parquet strings, so those become plain.
    pub fn ipc(&self) -> Result<Vec<u8>, JsValue> {
        let plain = |t: &DataType| match t {
            DataType::Utf8View => DataType::Utf8,
            DataType::BinaryView => DataType::Binary,
            other => other.clone(),
        };
        let fields: Vec<Field> = (self.schema.fields().iter())
            .map(|f| f.as_ref().clone().with_data_type(plain(f.data_type())))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut out = Vec::new();
        let mut writer = StreamWriter::try_new(&mut out, &schema).map_err(js_error)?;
        for batch in &self.batches {
            let columns = (batch.columns().iter())
                .map(|c| cast(c, &plain(c.data_type())))
                .collect::<Result<Vec<_>, _>>()
                .map_err(js_error)?;
            let batch = RecordBatch::try_new(Arc::clone(&schema), columns).map_err(js_error)?;
            writer.write(&batch).map_err(js_error)?;
        }
        writer.finish().map_err(js_error)?;
        drop(writer);
        Ok(out)
    }

    pub fn csv(&self) -> Result<String, JsValue> {
        let bytes = self.write(OutputFormat::Csv)?;
        String::from_utf8(bytes).map_err(js_error)
    }

    pub fn parquet(&self) -> Result<Vec<u8>, JsValue> {
        self.write(OutputFormat::Parquet)
    }

    /// Column names, as a JSON array.
    pub fn columns(&self) -> String {
        json!(self.column_names()).to_string()
    }

    /// The rows as a JSON array of arrays, columns in order.
    pub fn json(&self) -> Result<String, JsValue> {
        let objects: Vec<serde_json::Map<String, Value>> =
            serde_json::from_slice(&self.write(OutputFormat::Json)?).map_err(js_error)?;
        let names = self.column_names();
        let rows: Vec<Value> = objects
            .into_iter()
            .map(|mut row| {
                Value::Array(
                    names
                        .iter()
                        .map(|name| row.remove(name).unwrap_or(Value::Null))
                        .collect(),
                )
            })
            .collect();
        serde_json::to_string(&rows).map_err(js_error)
    }

    /// What the query did, as JSON: counters, phases and the timeline of requests; where
    /// it ran and why (`place`), and on Lambda what the coordinator said (`lambda`: its
    /// cost line, workers and GB-seconds).
    pub fn profile(&self) -> String {
        let mut profile = json!({
            "elapsed_ms": self.elapsed_ms,
            "rows": self.rows(),
            "spans": self.metrics.timeline.spans(),
            "place": self.metrics.placed(),
            "lambda": self.lambda,
        });
        if let (Value::Object(profile), Ok(Value::Object(counters))) =
            (&mut profile, serde_json::to_value(self.metrics.snapshot()))
        {
            profile.extend(counters);
        }
        profile.to_string()
    }

    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    fn write(&self, format: OutputFormat) -> Result<Vec<u8>, JsValue> {
        let mut out = Vec::new();
        write_batches(format, &self.schema, &self.batches, &mut out).map_err(js_error)?;
        Ok(out)
    }
}
