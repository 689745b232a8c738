//! The lasting cache in the browser: the origin private file system (OPFS), laid out as the
//! disk cache is (`pieces`: `<dir>/v1/<object>/<start>-<length>`, each file sealed), so a
//! reloaded page, a second tab or the next visit reads nothing an earlier one fetched.
//!
//! OPFS handles are JavaScript objects, which stay on the thread that made them: every call
//! runs on the engine worker's event loop (`on_event_loop`), where reads run, and one task
//! there writes what queries fetched, in order, after they have it. A piece is written with
//! `createWritable`, which the browser commits whole when the stream closes: two tabs
//! writing one piece leave one whole copy, and a reader sees all of it or an empty file
//! (being written, or left by a tab closed while writing: removed once stale). OPFS cannot
//! touch a file, so recency is a piece's write time and eviction removes the oldest first.
//! Where OPFS is missing (an old browser, a page not served securely) every call fails
//! quietly: nothing is held, nothing kept, and queries read the network as before.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::StreamExt;
use js_sys::Uint8Array;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions,
    FileSystemGetFileOptions, FileSystemHandle, FileSystemHandleKind, FileSystemRemoveOptions,
    FileSystemWritableFileStream,
};

use super::memory::{split, Lookup};
use super::pieces::{self, folder_name, piece_name, HEADER};
use super::LastingCache;
use crate::source::retry::sleep;
use crate::source::{on_event_loop, ObjectMeta};

/// Fetched bytes waiting to be written in this worker, at most; beyond it they are not kept.
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// Bytes waiting to be written by this worker's caches (all write on its one event loop).
static QUEUED: AtomicU64 = AtomicU64::new(0);

/// An empty piece this old was left by a tab closed while writing it.
const STALE_EMPTY_MS: f64 = 600_000.0;

/// Eviction goes down to this share of the bound, so that it runs once per many writes.
const EVICT_TO_PERCENT: u64 = 90;

type Js<T> = Result<T, JsValue>;

#[derive(Debug)]
pub struct OpfsCache {
    dir: PathBuf,
    /// The folders of `<dir>/v1`, from the origin's root.
    root: Vec<String>,
    capacity: Arc<AtomicU64>,
    /// Started by the first `keep`.
    writer: OnceLock<UnboundedSender<Job>>,
}

#[derive(Debug)]
struct Job {
    folder: Vec<String>,
    pieces: Vec<(u64, Bytes)>,
}

impl Job {
    fn bytes(&self) -> u64 {
        self.pieces.iter().map(|(_, b)| b.len() as u64).sum()
    }
}

impl OpfsCache {
    /// The cache in the folder `dir` of the origin's private file system (made at the
    /// first write), bounded to `capacity` bytes.
    pub fn open(dir: &Path, capacity: u64) -> Self {
        let mut root: Vec<String> = dir
            .components()
            .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
            .filter(|c| !c.is_empty() && c != "/" && c != ".")
            .collect();
        root.push("v1".into());
        Self {
            dir: dir.to_path_buf(),
            root,
            capacity: Arc::new(AtomicU64::new(capacity)),
            writer: OnceLock::new(),
        }
    }

    /// Bytes its files hold now (headers included); `None` where OPFS is missing.
    pub async fn size(&self) -> Option<u64> {
        let root = self.root.clone();
        on_event_loop(async move { Some(total(&entries(&root).await.ok()?)) })
            .await
            .flatten()
    }

    /// Removes every piece; returns the bytes freed.
    pub async fn clear(&self) -> u64 {
        let freed = self.size().await.unwrap_or(0);
        let root = self.root.clone();
        on_event_loop(async move {
            let (name, parents) = root.split_last().expect("the root ends in v1");
            let options = FileSystemRemoveOptions::new();
            options.set_recursive(true);
            if let Ok(parent) = folder(parents, false).await {
                let _ = JsFuture::from(parent.remove_entry_with_options(name, &options)).await;
            }
        })
        .await;
        freed
    }

    /// Waits until this worker has written (or dropped) everything queued.
    pub async fn settled() {
        while QUEUED.load(Relaxed) > 0 {
            sleep(Duration::from_millis(10)).await;
        }
    }

    fn folder_of(&self, object: &ObjectMeta) -> Vec<String> {
        let mut folder = self.root.clone();
        folder.push(folder_name(object));
        folder
    }

    /// The writer task, started on this thread's event loop if this is the first write.
    fn writer(&self) -> &UnboundedSender<Job> {
        self.writer.get_or_init(|| {
            let (jobs, receiver) = unbounded();
            let (root, capacity) = (self.root.clone(), Arc::clone(&self.capacity));
            wasm_bindgen_futures::spawn_local(write_all(root, capacity, receiver));
            jobs
        })
    }
}

#[async_trait]
impl LastingCache for OpfsCache {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn set_capacity(&self, bytes: u64) {
        self.capacity.store(bytes, Relaxed);
    }

    async fn lookup(&self, object: &ObjectMeta, ranges: Vec<Range<u64>>) -> Lookup {
        let (folder, asked) = (self.folder_of(object), ranges.clone());
        let found = on_event_loop(async move { held(&folder, &asked).await.ok() }).await;
        found.flatten().unwrap_or(Lookup::missing(ranges))
    }

    fn keep(&self, object: &ObjectMeta, pieces: &[(u64, Bytes)]) {
        let job = Job {
            folder: self.folder_of(object),
            pieces: pieces.to_vec(),
        };
        let bytes = job.bytes();
        if bytes == 0 || QUEUED.fetch_add(bytes, Relaxed) + bytes > MAX_QUEUED_BYTES {
            QUEUED.fetch_sub(bytes, Relaxed);
            return;
        }
        if self.writer().unbounded_send(job).is_err() {
            QUEUED.fetch_sub(bytes, Relaxed);
        }
    }
}

/// What the folder `path` holds of `ranges`.
async fn held(path: &[String], ranges: &[Range<u64>]) -> Js<Lookup> {
    let folder = folder(path, false).await?;
    let named = names(&folder).await?;
    let wanted = pieces::wanted(&pieces::pieces(named), ranges);
    let reads = wanted
        .into_iter()
        .map(|(start, length)| read_piece(&folder, start, length));
    let loaded: BTreeMap<u64, Bytes> = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect();
    Ok(split(&loaded, ranges))
}

/// A piece's bytes if its file is whole and its checksum holds. A broken one is removed, an
/// empty one only once stale (it may be being written).
async fn read_piece(
    folder: &FileSystemDirectoryHandle,
    start: u64,
    length: u64,
) -> Option<(u64, Bytes)> {
    let name = piece_name(start, length);
    let handle: FileSystemFileHandle = resolve(folder.get_file_handle(&name)).await.ok()?;
    let file: web_sys::File = resolve(handle.get_file()).await.ok()?;
    let size = file.size() as u64;
    if size == HEADER as u64 + length {
        let buffer = JsFuture::from(file.array_buffer()).await.ok()?;
        let bytes = Bytes::from(Uint8Array::new(&buffer).to_vec());
        if let Some(bytes) = pieces::unseal(bytes, length) {
            return Some((start, bytes));
        }
    }
    if size > 0 || js_sys::Date::now() - file.last_modified() > STALE_EMPTY_MS {
        let _ = JsFuture::from(folder.remove_entry(&name)).await;
    }
    None
}

/// The writer task: each job's pieces written where its folder lacks them, then the cache
/// brought under its bound if it grew past it (measured at the first write and again at
/// each eviction: other tabs write to it too).
async fn write_all(root: Vec<String>, capacity: Arc<AtomicU64>, mut jobs: UnboundedReceiver<Job>) {
    let mut used = None;
    while let Some(job) = jobs.next().await {
        let capacity = capacity.load(Relaxed);
        let written = write_job(&job, capacity).await.unwrap_or(0);
        QUEUED.fetch_sub(job.bytes(), Relaxed);
        if used.is_none() {
            used = Some(measure(&root).await);
        }
        let used = used.as_mut().expect("measured above");
        *used += written;
        if *used > capacity {
            *used = evict(&root, capacity / 100 * EVICT_TO_PERCENT).await;
        }
    }
}

async fn write_job(job: &Job, capacity: u64) -> Js<u64> {
    let folder = folder(&job.folder, true).await?;
    let held = pieces::pieces(names(&folder).await?);
    let mut written = 0;
    for (start, bytes) in pieces::gaps(&held, &job.pieces, capacity) {
        written += write_piece(&folder, start, &bytes).await;
    }
    Ok(written)
}

/// One piece, sealed, committed whole when its stream closes; returns the bytes written (0
/// on failure, a full quota say, which leaves no file behind).
async fn write_piece(folder: &FileSystemDirectoryHandle, start: u64, bytes: &Bytes) -> u64 {
    let name = piece_name(start, bytes.len() as u64);
    let written = async {
        let options = FileSystemGetFileOptions::new();
        options.set_create(true);
        let handle: FileSystemFileHandle =
            resolve(folder.get_file_handle_with_options(&name, &options)).await?;
        let stream: FileSystemWritableFileStream = resolve(handle.create_writable()).await?;
        // A copy the browser owns: a view of the threads build's shared memory is refused.
        let sealed = Uint8Array::new_with_length((HEADER + bytes.len()) as u32);
        sealed
            .subarray(0, HEADER as u32)
            .copy_from(&pieces::seal(bytes));
        sealed
            .subarray(HEADER as u32, sealed.length())
            .copy_from(&bytes[..]);
        if let Err(error) = write_and_close(&stream, &sealed).await {
            let _ = JsFuture::from(stream.abort()).await;
            return Err(error);
        }
        Ok::<_, JsValue>((HEADER + bytes.len()) as u64)
    }
    .await;
    match written {
        Ok(written) => written,
        Err(_) => {
            let _ = JsFuture::from(folder.remove_entry(&name)).await;
            0
        }
    }
}

async fn write_and_close(stream: &FileSystemWritableFileStream, sealed: &Uint8Array) -> Js<()> {
    JsFuture::from(stream.write_with_js_u8_array(sealed)?).await?;
    JsFuture::from(stream.close()).await?;
    Ok(())
}

struct Entry {
    folder: FileSystemDirectoryHandle,
    name: String,
    size: u64,
    written: f64,
}

/// Bytes the cache's files hold (0 where it cannot be read).
async fn measure(root: &[String]) -> u64 {
    entries(root).await.map_or(0, |e| total(&e))
}

fn total(entries: &[Entry]) -> u64 {
    entries.iter().map(|e| e.size).sum()
}

/// Every piece file under `root`.
async fn entries(root: &[String]) -> Js<Vec<Entry>> {
    let mut found = vec![];
    let Ok(root) = folder(root, false).await else {
        return Ok(found); // nothing written yet
    };
    for object in handles(&root).await? {
        let Ok(object) = object.dyn_into::<FileSystemDirectoryHandle>() else {
            continue;
        };
        for piece in handles(&object).await? {
            let Ok(piece) = piece.dyn_into::<FileSystemFileHandle>() else {
                continue;
            };
            let file: web_sys::File = resolve(piece.get_file()).await?;
            found.push(Entry {
                folder: object.clone(),
                name: piece.name(),
                size: file.size() as u64,
                written: file.last_modified(),
            });
        }
    }
    Ok(found)
}

/// Removes the oldest pieces until at most `target` bytes remain (and the folders left
/// empty); returns the bytes that remain.
async fn evict(root: &[String], target: u64) -> u64 {
    let Ok(mut found) = entries(root).await else {
        return 0;
    };
    found.sort_by(|a, b| a.written.total_cmp(&b.written));
    let mut total = total(&found);
    let mut emptied = vec![];
    for entry in found {
        if total <= target {
            break;
        }
        if JsFuture::from(entry.folder.remove_entry(&entry.name))
            .await
            .is_ok()
        {
            total -= entry.size;
            emptied.push(entry.folder.name());
        }
    }
    if let Ok(root) = folder(root, false).await {
        for name in emptied {
            let _ = JsFuture::from(root.remove_entry(&name)).await; // only if empty
        }
    }
    total
}

/// The folder at `path` from the origin's root, made where missing if `create`.
async fn folder(path: &[String], create: bool) -> Js<FileSystemDirectoryHandle> {
    let scope: web_sys::WorkerGlobalScope = js_sys::global().dyn_into()?;
    let storage = scope.navigator().storage();
    let mut folder: FileSystemDirectoryHandle = resolve(storage.get_directory()).await?;
    let options = FileSystemGetDirectoryOptions::new();
    options.set_create(create);
    for name in path {
        folder = resolve(folder.get_directory_handle_with_options(name, &options)).await?;
    }
    Ok(folder)
}

/// The pieces a folder's file names give (start, length).
async fn names(folder: &FileSystemDirectoryHandle) -> Js<Vec<(u64, u64)>> {
    let handles = handles(folder).await?;
    Ok(handles
        .iter()
        .filter(|h| h.kind() == FileSystemHandleKind::File)
        .filter_map(|h| pieces::parse_name(&h.name()))
        .collect())
}

/// What a folder holds, files and folders.
async fn handles(folder: &FileSystemDirectoryHandle) -> Js<Vec<FileSystemHandle>> {
    let iterator = folder.values();
    let mut found = vec![];
    loop {
        let step: js_sys::IteratorNext = JsFuture::from(iterator.next()?).await?.unchecked_into();
        if step.done() {
            return Ok(found);
        }
        found.push(step.value().unchecked_into());
    }
}

async fn resolve<T: JsCast>(promise: js_sys::Promise) -> Js<T> {
    Ok(JsFuture::from(promise).await?.unchecked_into())
}
