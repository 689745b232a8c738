//! Local disk. Reads are positioned reads on a freshly opened file: no shared handle, no
//! seek state, so concurrent buckets of one file never interfere. A large range already in
//! the page cache is mapped instead of copied (`mapped`). Every file system call
//! runs on tokio's blocking pool, off the async threads: a slow disk or a large directory
//! never stalls the tasks driving other reads.

use std::ops::Range;
use std::path::Path;
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectMeta, ObjectSource};
use crate::error::{QuiverError, Result};

#[derive(Debug, Default)]
pub struct LocalSource;

fn local_path(path: &str) -> &str {
    path.strip_prefix("file://").unwrap_or(path)
}

fn io_error(path: &str, error: std::io::Error) -> QuiverError {
    match error.kind() {
        std::io::ErrorKind::NotFound => QuiverError::NotFound {
            path: path.to_string(),
        },
        _ => QuiverError::Io {
            path: path.to_string(),
            reason: error.to_string(),
        },
    }
}

fn meta_of(path: String, metadata: &std::fs::Metadata) -> ObjectMeta {
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let size = metadata.len();
    ObjectMeta {
        path,
        size,
        version: format!("size {size}, mtime {mtime}"),
    }
}

fn walk(dir: &Path, out: &mut Vec<ObjectMeta>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let metadata = std::fs::metadata(&path)?;
        if metadata.is_dir() {
            walk(&path, out)?;
        } else if metadata.is_file() {
            out.push(meta_of(path.to_string_lossy().into_owned(), &metadata));
        }
    }
    Ok(())
}

/// Runs blocking work (a file system call, a footer's parse) on tokio's blocking pool;
/// inline where no tokio runtime runs (the browser, which has no local files).
pub(crate) async fn off_async<T: Send + 'static>(
    path: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    #[cfg(not(target_arch = "wasm32"))]
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        return runtime
            .spawn_blocking(work)
            .await
            .map_err(|e| QuiverError::Io {
                path: path.to_string(),
                reason: format!("the work did not finish: {e}"),
            })?;
    }
    let _ = path;
    work()
}

#[async_trait]
impl ObjectSource for LocalSource {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let root = local_path(prefix);
        let root = if root.is_empty() { "." } else { root }.to_string();
        off_async(prefix, move || {
            let mut out = Vec::new();
            walk(Path::new(&root), &mut out).map_err(|e| io_error(&root, e))?;
            if root == "." {
                for meta in &mut out {
                    meta.path = meta.path.trim_start_matches("./").to_string();
                }
            }
            Ok(out)
        })
        .await
    }

    async fn head(&self, path: &str) -> Result<ObjectMeta> {
        let path = path.to_string();
        off_async(&path.clone(), move || {
            let metadata = std::fs::metadata(local_path(&path)).map_err(|e| io_error(&path, e))?;
            if metadata.is_dir() {
                // A folder is not an object; the listing then reads it as a prefix.
                return Err(QuiverError::NotFound { path });
            }
            Ok(meta_of(path, &metadata))
        })
        .await
    }

    async fn get_range(&self, object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
        let object = object.clone();
        off_async(&object.path.clone(), move || read_range(&object, range)).await
    }

    async fn put(&self, path: &str, bytes: Bytes) -> Result<()> {
        let path = path.to_string();
        off_async(&path.clone(), move || {
            let local = Path::new(local_path(&path));
            if let Some(parent) = local.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| io_error(&path, e))?;
            }
            // Written beside, then renamed: a reader never sees half a file.
            let partial = local.with_extension("partial");
            std::fs::write(&partial, &bytes).map_err(|e| io_error(&path, e))?;
            std::fs::rename(&partial, local).map_err(|e| io_error(&path, e))
        })
        .await
    }

    fn keeps_blocks(&self) -> bool {
        false
    }

    /// 64 KiB: a local read of more only copies pages it does not need (24 TPC-DS tables'
    /// footers read as 512 KiB each were half of a 34 ms script of views).
    fn footer_read_bytes(&self) -> u64 {
        64 * 1024
    }

    fn reads_on_demand(&self) -> bool {
        true
    }

    async fn put_file(&self, path: &str, staged: &Path) -> Result<()> {
        let (path, staged) = (path.to_string(), staged.to_path_buf());
        off_async(&path.clone(), move || {
            let local = Path::new(local_path(&path));
            if let Some(parent) = local.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| io_error(&path, e))?;
            }
            if std::fs::rename(&staged, local).is_ok() {
                return Ok(());
            }
            // Another file system: copied beside, then renamed, so still all or nothing.
            let partial = local.with_extension("partial");
            std::fs::copy(&staged, &partial)
                .and_then(|_| std::fs::rename(&partial, local))
                .map_err(|e| io_error(&path, e))
        })
        .await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let path = path.to_string();
        off_async(&path.clone(), move || {
            match std::fs::remove_file(local_path(&path)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(&path, e)),
                _ => Ok(()),
            }
        })
        .await
    }
}

/// `range` of `object`, after checking the file is still the version listed.
fn read_range(object: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
    let path = object.path.as_str();
    let file = std::fs::File::open(local_path(path)).map_err(|e| io_error(path, e))?;
    let now = meta_of(
        path.to_string(),
        &file.metadata().map_err(|e| io_error(path, e))?,
    );
    if now.version != object.version {
        return Err(QuiverError::Changed {
            path: path.to_string(),
            expected: object.version.clone(),
            found: now.version,
        });
    }
    let length = (range.end - range.start) as usize;
    #[cfg(unix)]
    if length >= super::mapped::MAP_FROM_BYTES {
        if let Some(bytes) = super::mapped::resident_range(&file, range.start, length) {
            return Ok(bytes);
        }
    }
    let buffer = read_exact_at(&file, range.start, length);
    let buffer = buffer.map_err(|e| QuiverError::Read {
        path: path.to_string(),
        start: range.start,
        end: range.end,
        reason: e.to_string(),
    })?;
    Ok(Bytes::from(buffer))
}

/// `length` bytes of `file` from `offset`, read into a buffer that is not zeroed first:
/// zeroing what the read overwrites was a twentieth of a wide scan's time (ClickBench q23).
#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, offset: u64, length: usize) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buffer = Vec::<u8>::with_capacity(length);
    let mut filled = 0;
    while filled < length {
        // SAFETY: pread writes at most `length - filled` bytes into the buffer's spare
        // capacity past `filled`; no Rust reference to the unwritten bytes is made.
        let read = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buffer.as_mut_ptr().add(filled).cast(),
                length - filled,
                (offset + filled as u64) as libc::off_t,
            )
        };
        match read {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n > 0 => filled += n as usize,
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    // SAFETY: the loop wrote all `length` bytes.
    unsafe { buffer.set_len(length) };
    Ok(buffer)
}

#[cfg(not(unix))]
fn read_exact_at(file: &std::fs::File, offset: u64, length: usize) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = file;
    let mut buffer = vec![0; length];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut buffer)?;
    Ok(buffer)
}
