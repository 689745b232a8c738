//! The disk cache: bytes fetched from remote objects, kept in files so that the next process
//! (the next `quiver` run, a Lambda instance's next request) reads none of them again. It
//! sits behind the block cache: a read asks memory, then this, then the network (`read`),
//! and what the network returns is written here by a background thread after the query
//! has it, never on its critical path.
//!
//! Layout (`pieces`): `<dir>/v1/<object>/<start>-<length>`, each file sealed. Processes
//! share the folder: a piece is written to a `.part` file created exclusively (a second
//! writer of the same piece skips it) and renamed into place; a reader that loses a race
//! with eviction sees a miss. Recency is a file's modification time, touched on every hit; eviction removes the least recently used files
//! until the folder is under its bound.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;

use super::memory::{split, Lookup};
use super::pieces::{self, folder_name, piece_name, HEADER};
use super::LastingCache;
use crate::source::{off_async, ObjectMeta};

/// 4 GiB: the `quiver` command's bound unless `QUIVER_DISK_CACHE_BYTES` or
/// `quiver.disk_cache_bytes` says otherwise (a library session keeps none unless told).
pub const DISK_CACHE_BYTES: u64 = 4 << 30;

/// Fetched bytes waiting to be written, at most; beyond it they are not kept (a scan far
/// faster than the disk would otherwise hold its input in memory until the writes end).
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// A `.part` file this old was left by a process that died writing it.
const STALE_PART: Duration = Duration::from_secs(600);

/// Eviction goes down to this share of the bound, so that it runs once per many writes.
const EVICT_TO_PERCENT: u64 = 90;

#[derive(Debug)]
pub struct DiskCache {
    /// `<dir>/v1`: a new layout gets a new folder instead of misreading this one.
    root: PathBuf,
    dir: PathBuf,
    capacity: Arc<AtomicU64>,
    /// Started by the first `keep`: a process that reads only local files makes no folder
    /// and no thread. `None` inside if the thread could not start.
    writer: OnceLock<Option<Writer>>,
}

#[derive(Debug)]
struct Writer {
    jobs: Sender<Job>,
    queued: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

#[derive(Debug)]
struct Job {
    folder: PathBuf,
    pieces: Vec<(u64, Bytes)>,
}

impl Job {
    fn bytes(&self) -> u64 {
        self.pieces.iter().map(|(_, b)| b.len() as u64).sum()
    }
}

impl DiskCache {
    /// The cache in `dir`, bounded to `capacity` bytes; `None` if `dir` is there but is not
    /// a folder. The folder is made when the first bytes are kept; one that cannot be made
    /// (a read-only file system) keeps nothing, and the query runs without it.
    pub fn open(dir: &Path, capacity: u64) -> Option<Self> {
        if dir.exists() && !dir.is_dir() {
            return None;
        }
        Some(Self {
            root: dir.join("v1"),
            dir: dir.to_path_buf(),
            capacity: Arc::new(AtomicU64::new(capacity)),
            writer: OnceLock::new(),
        })
    }

    /// The writer thread, started now if this is the first write.
    fn writer(&self) -> Option<&Writer> {
        self.writer
            .get_or_init(|| {
                let queued = Arc::new(AtomicU64::new(0));
                let (jobs, receiver) = channel();
                let (root, capacity) = (self.root.clone(), Arc::clone(&self.capacity));
                let thread = std::thread::Builder::new()
                    .name("quiver-disk-cache".into())
                    .spawn({
                        let queued = Arc::clone(&queued);
                        move || write_all(&root, &capacity, &queued, receiver)
                    })
                    .ok()?;
                Some(Writer {
                    jobs,
                    queued,
                    thread,
                })
            })
            .as_ref()
    }

    /// What the disk holds of `ranges` of `object`, and what it lacks. Blocking: it reads
    /// files (a query asks through `LastingCache::lookup`, off the async threads).
    pub fn lookup_blocking(&self, object: &ObjectMeta, ranges: &[Range<u64>]) -> Lookup {
        lookup_in(&self.folder(object), ranges)
    }

    /// Queues `pieces` of `object`, fetched just now, to be written; dropped if the queue is
    /// full or the writer is gone.
    fn queue(&self, object: &ObjectMeta, pieces: &[(u64, Bytes)]) {
        let Some(writer) = self.writer() else { return };
        let job = Job {
            folder: self.folder(object),
            pieces: pieces.to_vec(),
        };
        let bytes = job.bytes();
        if bytes == 0 || writer.queued.fetch_add(bytes, Relaxed) + bytes > MAX_QUEUED_BYTES {
            writer.queued.fetch_sub(bytes, Relaxed);
            return;
        }
        if writer.jobs.send(job).is_err() {
            writer.queued.fetch_sub(bytes, Relaxed);
        }
    }

    /// Bytes its files hold now (headers included).
    pub fn size(&self) -> u64 {
        entries(&self.root).iter().map(|e| e.size).sum()
    }

    /// Removes every piece; returns the bytes freed. A process writing at the same time
    /// may leave a piece behind, never a broken one.
    pub fn clear(&self) -> u64 {
        let freed = self.size();
        for object in fs::read_dir(&self.root).into_iter().flatten().flatten() {
            let _ = fs::remove_dir_all(object.path());
        }
        freed
    }

    fn folder(&self, object: &ObjectMeta) -> PathBuf {
        self.root.join(folder_name(object))
    }
}

#[async_trait]
impl LastingCache for DiskCache {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn set_capacity(&self, bytes: u64) {
        self.capacity.store(bytes, Relaxed);
    }

    /// Off the async threads (tokio's blocking pool); all missing if that could not run.
    async fn lookup(&self, object: &ObjectMeta, ranges: Vec<Range<u64>>) -> Lookup {
        let (folder, asked) = (self.folder(object), ranges.clone());
        let place = folder.display().to_string();
        off_async(&place, move || Ok(lookup_in(&folder, &asked)))
            .await
            .unwrap_or(Lookup::missing(ranges))
    }

    fn keep(&self, object: &ObjectMeta, pieces: &[(u64, Bytes)]) {
        self.queue(object, pieces);
    }
}

/// What `folder` holds of `ranges`; a piece that does not read whole is removed.
fn lookup_in(folder: &Path, ranges: &[Range<u64>]) -> Lookup {
    let mut loaded = BTreeMap::new();
    for (start, length) in pieces::wanted(&pieces_in(folder), ranges) {
        let path = folder.join(piece_name(start, length));
        match read_piece(&path, length) {
            Some(bytes) => {
                loaded.insert(start, bytes);
            }
            None => {
                let _ = fs::remove_file(&path);
            }
        }
    }
    split(&loaded, ranges)
}

impl Drop for DiskCache {
    /// Waits for the queued writes: the process's last query keeps what it fetched.
    fn drop(&mut self) {
        if let Some(Writer { jobs, thread, .. }) = self.writer.take().flatten() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

/// The writer thread: each job's pieces written where the folder lacks them, then the folder
/// brought under its bound if it grew past it. Its size is measured at the first write and
/// again at each eviction (other processes write to it too).
fn write_all(root: &Path, capacity: &AtomicU64, queued: &AtomicU64, jobs: Receiver<Job>) {
    let mut used = None;
    for job in jobs {
        let capacity = capacity.load(Relaxed);
        let written = write_job(&job, capacity);
        queued.fetch_sub(job.bytes(), Relaxed);
        let used = used.get_or_insert_with(|| entries(root).iter().map(|e| e.size).sum());
        *used += written;
        if *used > capacity {
            *used = evict(root, capacity / 100 * EVICT_TO_PERCENT);
        }
    }
}

/// Writes the parts of a job's pieces its folder does not hold, but none larger than
/// `capacity` (it would evict everything, then itself); returns the bytes written.
fn write_job(job: &Job, capacity: u64) -> u64 {
    if fs::create_dir_all(&job.folder).is_err() {
        return 0;
    }
    let gaps = pieces::gaps(&pieces_in(&job.folder), &job.pieces, capacity);
    gaps.iter()
        .map(|(start, bytes)| write_piece(&job.folder, *start, bytes))
        .sum()
}

/// One piece, written to a `.part` file this process alone created, then renamed into
/// place; returns the bytes written (0 if another process is writing it, or on failure).
fn write_piece(folder: &Path, start: u64, bytes: &Bytes) -> u64 {
    let name = piece_name(start, bytes.len() as u64);
    let part = folder.join(format!("{name}.part"));
    let wrote = File::options()
        .write(true)
        .create_new(true)
        .open(&part)
        .and_then(|mut file| {
            file.write_all(&pieces::seal(bytes))?;
            file.write_all(bytes)
        });
    if let Err(error) = wrote {
        if error.kind() != std::io::ErrorKind::AlreadyExists {
            let _ = fs::remove_file(&part);
        }
        return 0;
    }
    if fs::rename(&part, folder.join(&name)).is_err() {
        let _ = fs::remove_file(&part);
        return 0;
    }
    (HEADER + bytes.len()) as u64
}

/// A piece's bytes if its file is whole and its checksum holds; its modification time is
/// touched, as its last use.
fn read_piece(path: &Path, length: u64) -> Option<Bytes> {
    let mut file = File::options()
        .read(true)
        .write(true)
        .open(path)
        .or_else(|_| File::open(path))
        .ok()?;
    if file.metadata().ok()?.len() != HEADER as u64 + length {
        return None;
    }
    let mut buffer = vec![0u8; HEADER + length as usize];
    file.read_exact(&mut buffer).ok()?;
    let bytes = pieces::unseal(Bytes::from(buffer), length)?;
    let _ = file.set_modified(SystemTime::now());
    Some(bytes)
}

/// The pieces a folder holds, by start, with their lengths.
fn pieces_in(folder: &Path) -> BTreeMap<u64, u64> {
    let named = fs::read_dir(folder).into_iter().flatten().flatten();
    pieces::pieces(
        named
            .filter_map(|e| pieces::parse_name(e.file_name().to_str()?))
            .collect(),
    )
}

struct Entry {
    path: PathBuf,
    size: u64,
    used: SystemTime,
}

/// Every piece file under `root`; `.part` files left by a dead writer are removed.
fn entries(root: &Path) -> Vec<Entry> {
    let now = SystemTime::now();
    let mut found = vec![];
    for object in fs::read_dir(root).into_iter().flatten().flatten() {
        for entry in fs::read_dir(object.path()).into_iter().flatten().flatten() {
            let (path, Ok(meta)) = (entry.path(), entry.metadata()) else {
                continue;
            };
            let used = meta.modified().unwrap_or(now);
            if path.extension().is_some_and(|e| e == "part") {
                if now.duration_since(used).unwrap_or_default() > STALE_PART {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            found.push(Entry {
                path,
                size: meta.len(),
                used,
            });
        }
    }
    found
}

/// Removes the least recently used pieces until at most `target` bytes remain (and the
/// folders left empty); returns the bytes that remain.
fn evict(root: &Path, target: u64) -> u64 {
    let mut found = entries(root);
    found.sort_by_key(|e| e.used);
    let mut total: u64 = found.iter().map(|e| e.size).sum();
    for entry in found {
        if total <= target {
            break;
        }
        if fs::remove_file(&entry.path).is_ok() {
            total -= entry.size;
            if let Some(folder) = entry.path.parent() {
                let _ = fs::remove_dir(folder); // only if empty
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::single_range_in_vec_init)] // one byte range is what these lookups ask for
    use super::*;

    fn object(version: &str) -> ObjectMeta {
        ObjectMeta {
            path: "s3://b/k.parquet".into(),
            size: 1 << 20,
            version: version.into(),
        }
    }

    fn bytes(from: u64, to: u64) -> Bytes {
        (from..to).map(|i| i as u8).collect::<Vec<u8>>().into()
    }

    /// A cache in `dir` that has written everything it was given.
    fn written(dir: &Path, capacity: u64, keep: &[(&ObjectMeta, Vec<(u64, Bytes)>)]) -> DiskCache {
        let cache = DiskCache::open(dir, capacity).unwrap();
        for (object, pieces) in keep {
            cache.queue(object, pieces);
        }
        drop(cache); // waits for the writes
        DiskCache::open(dir, capacity).unwrap()
    }

    #[test]
    fn a_later_process_is_served_what_an_earlier_one_fetched_for_that_version_only() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = object("\"v1\"");
        let cache = written(dir.path(), 1 << 30, &[(&v1, vec![(100, bytes(100, 200))])]);
        let found = cache.lookup_blocking(&v1, &[50..150, 180..300]);
        assert_eq!(
            found.held,
            vec![(100, bytes(100, 150)), (180, bytes(180, 200))]
        );
        assert_eq!(found.missing, vec![50..100, 200..300]);
        assert_eq!(
            cache
                .lookup_blocking(&object("\"v2\""), &[100..200])
                .missing,
            vec![100..200]
        );
    }

    #[test]
    fn what_is_held_is_not_written_twice() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = object("\"v1\"");
        let twice = vec![(0, bytes(0, 100))];
        let cache = written(
            dir.path(),
            1 << 30,
            &[
                (&v1, twice.clone()),
                (&v1, twice),
                (&v1, vec![(50, bytes(50, 150))]),
            ],
        );
        assert_eq!(
            cache.size(),
            2 * HEADER as u64 + 150,
            "0..100 once, then 100..150"
        );
        let found = cache.lookup_blocking(&v1, &[0..150]);
        assert!(found.missing.is_empty());
        let joined: Vec<u8> = found.held.iter().flat_map(|(_, b)| b.to_vec()).collect();
        assert_eq!(joined, bytes(0, 150));
    }

    #[test]
    fn a_torn_or_corrupt_entry_is_a_miss_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = object("\"v1\"");
        let cache = written(
            dir.path(),
            1 << 30,
            &[(&v1, vec![(0, bytes(0, 100)), (200, bytes(200, 300))])],
        );
        let folder = cache.folder(&v1);
        let torn = folder.join(piece_name(0, 100));
        let file = File::options().write(true).open(&torn).unwrap();
        file.set_len(60).unwrap();
        let corrupt = folder.join(piece_name(200, 100));
        let mut flipped = fs::read(&corrupt).unwrap();
        flipped[HEADER + 7] ^= 1;
        fs::write(&corrupt, flipped).unwrap();
        let found = cache.lookup_blocking(&v1, &[0..300]);
        assert!(found.held.is_empty());
        assert_eq!(found.missing, vec![0..300]);
        assert!(!torn.exists() && !corrupt.exists());
    }

    #[test]
    fn over_its_bound_the_least_recently_used_leave_first() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (object("a"), object("b"), object("c"));
        let piece = |_: ()| vec![(0, bytes(0, 1000))];
        let cache = written(dir.path(), 1 << 30, &[(&a, piece(())), (&b, piece(()))]);
        // a is used after b was written: b is now the least recently used.
        std::thread::sleep(Duration::from_millis(20));
        assert!(cache.lookup_blocking(&a, &[0..1000]).missing.is_empty());
        drop(cache);
        let bound = 2 * (HEADER as u64 + 1000) + 500;
        let cache = written(dir.path(), bound, &[(&c, piece(()))]);
        assert!(cache.size() <= bound, "{} over {bound}", cache.size());
        assert_eq!(cache.lookup_blocking(&b, &[0..1000]).missing, vec![0..1000]);
        assert!(cache.lookup_blocking(&a, &[0..1000]).missing.is_empty());
        assert!(cache.lookup_blocking(&c, &[0..1000]).missing.is_empty());
    }

    #[test]
    fn two_writers_of_the_same_piece_leave_one_copy() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = object("\"v1\"");
        let caches: Vec<DiskCache> = (0..4)
            .map(|_| DiskCache::open(dir.path(), 1 << 30).unwrap())
            .collect();
        for cache in &caches {
            cache.queue(&v1, &[(0, bytes(0, 4096))]);
        }
        drop(caches);
        let cache = DiskCache::open(dir.path(), 1 << 30).unwrap();
        assert_eq!(cache.size(), HEADER as u64 + 4096);
        assert_eq!(
            cache.lookup_blocking(&v1, &[0..4096]).held,
            vec![(0, bytes(0, 4096))]
        );
    }
}
