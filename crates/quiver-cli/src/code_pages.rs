//! Keep the command's own code in the page cache in large folios.
//!
//! `quiver` is a 150 MB executable, and one query runs code from all over its 96 MB of text.
//! When the kernel reads that code back through page faults (the first run after a reboot,
//! or after memory pressure dropped some of it), it caches the file in 4 KiB pages, and every
//! later process spends milliseconds mapping them, 16 to a fault. Read through a mapping with
//! `MADV_HUGEPAGE`, the same file is cached in 2 MiB folios that a fault maps whole
//! (docs/decisions.md, "The command keeps its own code cached in large folios").
//!
//! So when much of the mapped file is out of the page cache, the command reads all of it that
//! way before it does anything else (the first run after a reboot: 0.1 s more, once); when it
//! is in, this costs a sample of `mincore` calls. It is done first, not beside the query,
//! because the pages the query faults in meanwhile would be cached small, and those are the
//! ones every run needs. Pages already cached stay as they are.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr;

use quiver_core::allocator::{all_resident, page_size};

/// Reads what of the executable is not cached, before the command does anything else;
/// never fails (without /proc or on a kernel before 5.14 it only loses the speed).
pub fn keep_cached() {
    let _ = read_missing_code();
}

fn read_missing_code() -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let regions = code_regions(&exe)?;
    if missing_share(&regions) <= MISSING_AT_MOST {
        return Ok(());
    }
    let Some(end) = regions.iter().map(|r| r.offset + r.len).max() else {
        return Ok(());
    };
    populate_in_huge_folios(&File::open(&exe)?, end)
}

/// The share of the code that may be out of the page cache before the command reads it all
/// again. A few pages always are: memory pressure (or, on a VM, the host's proactive reclaim)
/// takes the code no query has run for a while, and faults bring it back when needed. Reading
/// everything again costs 8-11 ms even when all of it is cached, so only a start after a
/// reboot, or after most of the code was dropped, pays for it.
const MISSING_AT_MOST: f64 = 0.25;

/// Pages sampled, evenly over the code, to tell how much of it is out of the page cache: one
/// `mincore` over all 30,000 pages costs 1-2 ms, a sample tens of microseconds.
const SAMPLES: usize = 128;

fn missing_share(regions: &[Region]) -> f64 {
    let page = page_size();
    let pages: usize = regions.iter().map(|r| r.len / page).sum();
    if pages == 0 {
        return 0.0;
    }
    let step = pages.div_ceil(SAMPLES);
    let (mut sampled, mut missing) = (0, 0);
    for region in regions {
        for at in (0..region.len / page).step_by(step) {
            sampled += 1;
            missing += usize::from(!region.cached(at * page, page));
        }
    }
    missing as f64 / sampled.max(1) as f64
}

/// The read-only mappings of `exe` in this process, from /proc/self/maps read in one go
/// where it fits (a few KiB), not in the dozens of small reads `read_to_string` makes of a
/// file whose size reads as 0.
fn code_regions(exe: &Path) -> std::io::Result<Vec<Region>> {
    let mut maps = String::with_capacity(1 << 16);
    File::open("/proc/self/maps")?.read_to_string(&mut maps)?;
    Ok(maps
        .lines()
        .filter_map(|line| Region::parse(line, exe))
        .collect())
}

/// One read-only mapping of the executable in this process.
struct Region {
    start: usize,
    len: usize,
    /// Where it starts in the file.
    offset: usize,
}

impl Region {
    /// A line of /proc/self/maps: `start-end perms offset dev inode path`.
    fn parse(line: &str, exe: &Path) -> Option<Region> {
        let mut fields = line.split_ascii_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?;
        let offset = fields.next()?;
        let path = fields.nth(2)?;
        // Written pages are this process's own copies, not the file's.
        if Path::new(path) != exe || perms.contains('w') {
            return None;
        }
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        Some(Region {
            start,
            len: end.checked_sub(start)?,
            offset: usize::from_str_radix(offset, 16).ok()?,
        })
    }

    /// Whether every page of `len` bytes at `at` in the region is in the page cache.
    fn cached(&self, at: usize, len: usize) -> bool {
        let len = len.min(self.len.saturating_sub(at));
        all_resident((self.start + at) as *const u8, len)
    }
}

/// Reads `file`'s first `len` bytes into the page cache through a huge-page mapping: the
/// kernel's readahead for such a mapping allocates 2 MiB folios.
fn populate_in_huge_folios(file: &File, len: usize) -> std::io::Result<()> {
    // The last page of a mapping may run past the end of the file.
    let len = len.min(usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX));
    // SAFETY: a fresh read-only shared mapping of an open file, unmapped before returning;
    // no reference into it escapes.
    unsafe {
        let at = libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if at == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let populated = libc::madvise(at, len, libc::MADV_HUGEPAGE) == 0
            && libc::madvise(at, len, libc::MADV_POPULATE_READ) == 0;
        let error = std::io::Error::last_os_error();
        libc::munmap(at, len);
        if populated {
            Ok(())
        } else {
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_executables_read_only_mappings_from_proc_maps() {
        let exe = Path::new("/usr/bin/quiver");
        let text = "55d4a1a00000-55d4a7600000 r-xp 014a1000 fd:01 1234 /usr/bin/quiver";
        let region = Region::parse(text, exe).unwrap();
        assert_eq!(region.start, 0x55d4a1a00000);
        assert_eq!(region.len, 0x5c00000);
        assert_eq!(region.offset, 0x14a1000);
        let data = "55d4a7600000-55d4a7900000 rw-p 070ae000 fd:01 1234 /usr/bin/quiver";
        assert!(
            Region::parse(data, exe).is_none(),
            "written pages are not the file's"
        );
        let other = "7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/libc.so.6";
        assert!(Region::parse(other, exe).is_none());
        let anonymous = "7f0000000000-7f0000100000 rw-p 00000000 00:00 0";
        assert!(Region::parse(anonymous, exe).is_none());
    }

    #[test]
    fn the_running_test_binary_is_found_and_cached_after_a_populate() {
        let exe = std::env::current_exe().unwrap();
        let regions = code_regions(&exe).unwrap();
        assert!(
            regions.iter().any(|r| r.len > 0),
            "no mapping of {exe:?} in /proc/self/maps"
        );
        let end = regions.iter().map(|r| r.offset + r.len).max().unwrap();
        populate_in_huge_folios(&File::open(&exe).unwrap(), end).unwrap();
        assert!(regions.iter().all(|r| r.cached(0, r.len)));
        assert_eq!(missing_share(&regions), 0.0);
    }
}
