//! A range of a local file that is already in the page cache, mapped rather than copied.
//!
//! A read into a fresh buffer copies the bytes and takes a page fault for each 4 KiB of the
//! buffer, zeroed first by the kernel; in a fresh `quiver` process most buffers are fresh.
//! Mapped, the decoder reads the page cache itself, with one fault per 64 KiB (the kernel's
//! fault-around): ClickBench one file 0.956x and TPC-DS 0.965x the time of reading, hot
//! (docs/decisions.md, "Speed"). A range not wholly in the page cache is read as before: a
//! mapping faults it in 128 KiB at a time, where one read takes it in large requests (cold
//! TPC-H q15 0.31 s mapped against 0.21 s read).
//!
//! A mapped file cut short by another program while a query reads it raises SIGBUS instead
//! of a read error; [`exit_clearly_on_bus_error`] makes that a message. Files replaced by a
//! rename, as writers do, keep their old pages until the query ends.

use bytes::Bytes;

/// Ranges from this size up are mapped: below it a copy costs less than mapping, asking
/// which pages are resident and unmapping.
pub const MAP_FROM_BYTES: usize = 64 * 1024;

/// A mapping of whole pages of a file, unmapped when the last `Bytes` of it is dropped.
struct Mapping {
    base: *mut libc::c_void,
    mapped: usize,
    skip: usize,
    length: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; any thread may read it.
unsafe impl Send for Mapping {}
// SAFETY: as above, shared reads of read-only memory.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: [base + skip, base + skip + length) lies inside the live mapping.
        unsafe { std::slice::from_raw_parts(self.base.cast::<u8>().add(self.skip), self.length) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `resident_range`, unmapped once.
        unsafe { libc::munmap(self.base, self.mapped) };
    }
}

/// `length` bytes of `file` from `offset`, mapped, if they are all in the page cache; None
/// when they are not (or the file cannot be mapped), for the caller to read them.
pub fn resident_range(file: &std::fs::File, offset: u64, length: usize) -> Option<Bytes> {
    use std::os::fd::AsRawFd;
    if length == 0 {
        return None;
    }
    let page = crate::allocator::page_size() as u64;
    let start = offset / page * page;
    let skip = usize::try_from(offset - start).ok()?;
    let mapped = skip.checked_add(length)?;
    let start = libc::off_t::try_from(start).ok()?;
    // SAFETY: a new read-only mapping of an open file; nothing else refers to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            mapped,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            start,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let mapping = Mapping {
        base,
        mapped,
        skip,
        length,
    };
    crate::allocator::all_resident(mapping.base.cast(), mapping.mapped)
        .then(|| Bytes::from_owner(mapping))
}

/// Ends the process with a message and status 1 on SIGBUS, which a mapped file cut short
/// under a running query raises, instead of the shell's bare "Bus error".
pub fn exit_clearly_on_bus_error() {
    extern "C" fn on_bus_error(_signal: libc::c_int) {
        const MESSAGE: &[u8] = b"error: a file being read was cut short by another program \
(bus error); run the query again once the file is written\n";
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(1);
        }
    }
    // SAFETY: a handler that only calls async-signal-safe functions, installed once.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_bus_error as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, std::fs::File) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        file.flush().unwrap();
        let reopened = std::fs::File::open(file.path()).unwrap();
        (file, reopened)
    }

    #[test]
    fn a_range_in_the_page_cache_is_mapped_with_its_bytes() {
        // Just written, so in the page cache; an offset inside a page, a length past one.
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (_keep, file) = file_of(&bytes);
        let range = resident_range(&file, 5_000, 200_000).expect("resident, so mapped");
        assert_eq!(&range[..], &bytes[5_000..205_000]);
        // Slices of it outlive neither the mapping nor each other's view of it.
        let tail = range.slice(199_000..);
        drop(range);
        assert_eq!(&tail[..], &bytes[204_000..205_000]);
    }

    #[test]
    fn a_range_out_of_the_page_cache_is_left_to_a_read() {
        use std::os::fd::AsRawFd;
        let bytes = vec![42u8; 1 << 20];
        let (_keep, file) = file_of(&bytes);
        // SAFETY: statfs of an open file into a zeroed struct.
        let mut info: libc::statfs = unsafe { std::mem::zeroed() };
        let status = unsafe { libc::fstatfs(file.as_raw_fd(), &mut info) };
        if status == 0 && info.f_type as i64 == 0x0102_1994 {
            return; // tmpfs: its pages are the file, nothing can evict them
        }
        file.sync_all().unwrap();
        // SAFETY: advice on an open file.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert!(resident_range(&file, 0, bytes.len()).is_none());
    }

    #[test]
    fn an_empty_range_is_not_mapped() {
        let (_keep, file) = file_of(b"abc");
        assert!(resident_range(&file, 1, 0).is_none());
    }
}
