//! The native binaries' allocator (the CLI, the Lambda functions): mimalloc, as DataFusion's
//! own builds use. Decoding and hashing allocate and free many buffers per batch on every
//! thread, where it is faster than glibc's allocator. Each binary declares it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: quiver_core::allocator::Allocator = quiver_core::allocator::Allocator;
//! ```
//!
//! mimalloc's defaults stay: purging freed pages at once and committing arenas on demand
//! (`MIMALLOC_PURGE_DELAY=0`, `MIMALLOC_ARENA_EAGER_COMMIT=0`) saved 1 to 4% of peak RSS on
//! TPC-H SF 1 but cost 5 to 25% of the time, in page faults on memory freed a moment before.
//! Its environment variables still apply.
//!
//! Its arenas are not advised into transparent huge pages (the crate's `no_thp`, set in the
//! workspace's Cargo.toml). Advised, a first touch of any byte of 2 MiB zeroed all of it,
//! again after each purge: TPC-DS SF 1 q23 spent 0.1 to 1.5 s in the kernel between
//! identical runs. Without, peak RSS is 12-37% lower and the total time 1-15% lower on
//! TPC-H, TPC-DS and ClickBench; queries that hash into large tables lose up to 20% of their
//! best time to TLB misses (docs/decisions.md).
//!
//! Blocks of 4 MiB and up are not mimalloc's: each is a mapping of its own, grown by
//! `mremap` and unmapped when freed (`large`).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_long};
use std::sync::OnceLock;

use mimalloc::MiMalloc;

/// Zeroed blocks from this size up are mapped writable when allocated.
const POPULATE_FROM_BYTES: usize = 1 << 20;

/// The alignment of hash tables' blocks (hashbrown's control groups; few other blocks this
/// large ask for it). A large one is mapped writable when allocated too: a table's rows land
/// at random all over it, so every page is written soon, each by a fault of its own, and one
/// madvise maps them for less. Interleaved processes, best of 3 (2026-11-29): ClickBench one
/// file 0.991x (its hashing queries 0.96-0.99x, less kernel time), TPC-DS 0.996x,
/// tpchgen-cli's TPC-H 0.996x, peak RSS the same.
const TABLE_ALIGN: usize = 16;

/// mimalloc, with blocks of 4 MiB and up mapped on their own (`large`) and the pages of a
/// large zeroed block, or of a large hash table (`TABLE_ALIGN`), mapped writable at once.
/// mimalloc hands out fresh memory as zeroed without touching it (and so does `mmap`); a
/// join's key-indexed array (DataFusion's ArrayMap, `vec![0; range]`) then reads each slot
/// before writing it, so every page was first mapped to the shared zero page and then copied
/// on write, each copy flushing the other threads' TLBs by interrupt: TPC-H q21 on
/// tpchgen-cli's files spent 0.4 of its 0.5 s in the kernel, 27% of its samples in those
/// flushes. One madvise maps the pages writable with no fault at all.
pub struct Allocator;

// SAFETY: a block is large (mapped on its own) or not by its layout alone, the same at
// allocation, reallocation and deallocation; every other call goes to mimalloc as it came.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if large::holds(layout.size(), layout.align()) {
            let block = large::map(layout.size());
            if !block.is_null() && layout.align() == TABLE_ALIGN {
                populate_for_writing(block, layout.size());
            }
            return block;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = if large::holds(layout.size(), layout.align()) {
            large::map(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        };
        if !block.is_null() && layout.size() >= POPULATE_FROM_BYTES {
            populate_for_writing(block, layout.size());
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if large::holds(layout.size(), layout.align()) {
            return large::unmap(block, layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { MiMalloc.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was, will) = (
            large::holds(layout.size(), layout.align()),
            large::holds(new_size, layout.align()),
        );
        match (was, will) {
            // SAFETY: the caller's contract, passed on.
            (false, false) => unsafe { MiMalloc.realloc(block, layout, new_size) },
            (true, true) => large::remap(block, layout.size(), new_size),
            _ => {
                // SAFETY: new_size is non-zero and, rounded to the alignment, fits an isize
                // (the caller's contract).
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                // SAFETY: as alloc's contract, from the caller's.
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    // SAFETY: both blocks hold the smaller size; they are distinct blocks.
                    unsafe {
                        std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                }
                moved
            }
        }
    }
}

/// Blocks of 4 MiB and up mapped on their own: hash tables and growing vectors (a GROUP
/// BY's groups and their values, a join's build side). A vector that grows is moved by
/// `mremap`, its pages and not its bytes, so the old part is neither copied nor faulted in
/// again; a freed block goes back to the kernel at once. In mimalloc a growing vector's new
/// block was fresh memory, faulted in page by page while the old bytes were copied into it,
/// and freed blocks stayed resident until purged: ClickBench one file took 16% less peak
/// RSS summed over its queries (q32 1.38 GB to 0.88), in the same time on every suite.
/// No huge pages: a fresh 2 MiB page here often costs the host's fault too
/// (docs/decisions.md).
#[cfg(target_os = "linux")]
mod large {
    /// Blocks from this size up are mapped on their own.
    const FROM_BYTES: usize = 4 << 20;
    const PAGE: usize = 4096;

    /// Whether a block of this size and alignment is mapped on its own.
    pub(super) fn holds(size: usize, align: usize) -> bool {
        size >= FROM_BYTES && align <= PAGE
    }

    /// The mapping's length: whole pages.
    fn mapped_len(size: usize) -> usize {
        size.next_multiple_of(PAGE)
    }

    pub(super) fn map(size: usize) -> *mut u8 {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let block = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_len(size),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if block == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        block.cast()
    }

    pub(super) fn unmap(block: *mut u8, size: usize) {
        // SAFETY: `block` is a mapping of this size made by `map` or `remap`.
        unsafe { libc::munmap(block.cast(), mapped_len(size)) };
    }

    pub(super) fn remap(block: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        let (len, new_len) = (mapped_len(size), mapped_len(new_size));
        if len == new_len {
            return block;
        }
        // SAFETY: `block` is a mapping of `len` bytes made by `map` or `remap`; on success the
        // old address is no longer used.
        let moved = unsafe { libc::mremap(block.cast(), len, new_len, libc::MREMAP_MAYMOVE) };
        if moved == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        moved.cast()
    }
}

/// Elsewhere every block is mimalloc's (no `mremap`).
#[cfg(not(target_os = "linux"))]
mod large {
    pub(super) fn holds(_size: usize, _align: usize) -> bool {
        false
    }

    pub(super) fn map(_size: usize) -> *mut u8 {
        unreachable!("no block is large here")
    }

    pub(super) fn unmap(_block: *mut u8, _size: usize) {
        unreachable!("no block is large here")
    }

    pub(super) fn remap(_block: *mut u8, _size: usize, _new_size: usize) -> *mut u8 {
        unreachable!("no block is large here")
    }
}

/// Maps the whole pages of `len` bytes at `block` writable (zero-filled where not yet
/// mapped; pages already mapped keep their bytes). Kernels before 5.14 refuse the advice,
/// and the pages fault in on first touch as before.
#[cfg(target_os = "linux")]
fn populate_for_writing(block: *mut u8, len: usize) {
    let page = page_size();
    let start = (block as usize).next_multiple_of(page);
    let end = (block as usize + len) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated, which nothing else
        // holds yet; populating changes no byte of memory that is already mapped.
        unsafe {
            libc::madvise(start as *mut _, end - start, libc::MADV_POPULATE_WRITE);
        }
    }
}

/// The system's memory page size in bytes (4 KiB where it cannot be read).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

#[cfg(not(target_os = "linux"))]
fn populate_for_writing(_block: *mut u8, _len: usize) {}

/// Whether every page of the `len` bytes at `start` (page-aligned) is in memory now: a
/// mapped file's pages in the page cache, say. False where the range is not mapped.
pub fn all_resident(start: *const u8, len: usize) -> bool {
    let mut resident = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: mincore only reads the page tables into `resident`, one byte per page; an
    // address outside this process's mappings is its error (ENOMEM), not undefined.
    let status = unsafe { libc::mincore(start.cast_mut().cast(), len, resident.as_mut_ptr()) };
    status == 0 && resident.iter().all(|byte| byte & 1 == 1)
}

/// Under a memory limit below this, freed pages go back to the system at once: a purge
/// delay kept 150 MB of freed pages resident in a sort of SF 1 lineitem under a 256 MB limit
/// (peak RSS 508 MB, 351 MB purging at once, for 13% more time). Above it, the time matters
/// more than the pages.
pub const PURGE_AT_ONCE_BELOW: u64 = 4 << 30;

/// `mi_option_purge_delay`: its place in mimalloc's option enum, the same in v2 and v3.
const MI_OPTION_PURGE_DELAY: c_int = 15;

extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// mimalloc's own purge delay (1 s in v3), read before it is first changed. A fixed copy went
/// stale once: we set v2's 10 ms over v3's default, and each statement of a session gave back
/// the pages it had freed just before the next asked for them again (TPC-DS q47 four times
/// in one session: 172k page faults and 2.59 s, 65k and 2.38 s at 1 s; docs/decisions.md).
fn default_purge_delay() -> c_long {
    static DEFAULT: OnceLock<c_long> = OnceLock::new();
    // SAFETY: a plain getter of one of mimalloc's options, safe from any thread.
    *DEFAULT.get_or_init(|| unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) })
}

/// Sets how soon mimalloc returns freed pages, for a query under `limit`; a delay set in
/// the environment (`MIMALLOC_PURGE_DELAY`) is left alone.
pub fn follow_memory_limit(limit: Option<u64>) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // Read before any set: a first limit that purges at once must not become the default.
    let default = default_purge_delay();
    let at_once = limit.is_some_and(|bytes| bytes < PURGE_AT_ONCE_BELOW);
    let delay = if at_once { 0 } else { default };
    // SAFETY: a plain setter of one of mimalloc's options, safe from any thread.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, delay) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::alloc::{GlobalAlloc, Layout};

    use super::{Allocator, MiMalloc, TABLE_ALIGN};

    /// The address range of a mapping's first line in /proc/self/smaps
    /// (`7f12a000-7f12b000 rw-p ...`); None for its other lines.
    fn mapping_range(line: &str) -> Option<std::ops::Range<usize>> {
        let (start, end) = line.split_once(' ')?.0.split_once('-')?;
        Some(usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?)
    }

    /// The `VmFlags` of the mapping that holds `address`, from /proc/self/smaps.
    fn vm_flags(address: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some(range) = mapping_range(line) {
                inside = range.contains(&address);
            } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
                return Some(flags.trim().to_string());
            }
        }
        None
    }

    #[test]
    fn arenas_are_not_advised_into_huge_pages() {
        let layout = Layout::from_size_align(64 << 20, 4096).unwrap();
        // SAFETY: a non-zero layout; the block is freed below with the same layout.
        let block = unsafe { MiMalloc.alloc(layout) };
        assert!(!block.is_null());
        let flags = vm_flags(block as usize).expect("the block's mapping in /proc/self/smaps");
        // SAFETY: allocated above with this layout.
        unsafe { MiMalloc.dealloc(block, layout) };
        // `hg`: madvise(MADV_HUGEPAGE) was called on the mapping.
        assert!(
            !flags.split_whitespace().any(|flag| flag == "hg"),
            "mimalloc's arena is advised into huge pages: VmFlags {flags}"
        );
    }

    /// Pages of `len` bytes at `block` (page-aligned) that are in memory, by mincore.
    fn resident_pages(block: *mut u8, len: usize) -> usize {
        let page = 4096;
        let mut present = vec![0u8; len.div_ceil(page)];
        // SAFETY: the range is one allocation, page-aligned; `present` has a byte per page.
        let status = unsafe { libc::mincore(block.cast(), len, present.as_mut_ptr()) };
        assert_eq!(status, 0, "mincore");
        present.iter().filter(|&&byte| byte & 1 == 1).count()
    }

    #[test]
    fn a_large_zeroed_block_is_mapped_when_allocated_and_reads_zero() {
        let len = 32 << 20;
        let layout = Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: a non-zero layout; freed below with the same layout.
        let block = unsafe { Allocator.alloc_zeroed(layout) };
        assert!(!block.is_null());
        let resident = resident_pages(block, len);
        // SAFETY: `len` bytes allocated above.
        let bytes = unsafe { std::slice::from_raw_parts(block, len) };
        let all_zero = bytes.iter().all(|&byte| byte == 0);
        // SAFETY: allocated above with this layout.
        unsafe { Allocator.dealloc(block, layout) };
        assert!(all_zero);
        // Fresh from mimalloc, none of its pages would be in memory before the first touch.
        assert_eq!(resident, len / 4096, "pages mapped at allocation");
    }

    #[test]
    fn a_large_hash_table_is_mapped_when_allocated_a_vector_when_written() {
        let len = 16 << 20;
        for (align, mapped) in [(TABLE_ALIGN, len / 4096), (8, 0)] {
            let layout = Layout::from_size_align(len, align).unwrap();
            // SAFETY: a non-zero layout; freed below with the same layout.
            let block = unsafe { Allocator.alloc(layout) };
            assert!(!block.is_null());
            let resident = resident_pages(block, len);
            // SAFETY: allocated above with this layout.
            unsafe { Allocator.dealloc(block, layout) };
            assert_eq!(
                resident, mapped,
                "pages mapped at allocation, aligned to {align}"
            );
        }
    }

    extern "C" {
        fn mi_is_in_heap_region(block: *const std::ffi::c_void) -> bool;
    }

    #[test]
    fn a_block_of_several_mib_is_mapped_on_its_own_a_smaller_one_is_mimallocs() {
        for (len, own) in [(8 << 20, true), (4 << 20, true), ((4 << 20) - 1, false)] {
            let layout = Layout::from_size_align(len, 8).unwrap();
            // SAFETY: a non-zero layout; freed below with the same layout.
            let block = unsafe { Allocator.alloc(layout) };
            assert!(!block.is_null());
            // SAFETY: a query about an address, which mimalloc does not dereference.
            let in_mimalloc = unsafe { mi_is_in_heap_region(block.cast()) };
            // SAFETY: allocated above with this layout.
            unsafe { Allocator.dealloc(block, layout) };
            assert_eq!(in_mimalloc, !own, "{len} bytes");
        }
    }

    /// Reallocates `block` (of `size` bytes, filled with `fill`) to `new_size` and checks
    /// that the bytes both sizes hold came along.
    fn grows_or_shrinks_keeping_bytes(size: usize, new_size: usize) {
        let fill = |i: usize| (i % 251) as u8;
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: a non-zero layout; reallocated and freed below.
        let block = unsafe { Allocator.alloc(layout) };
        assert!(!block.is_null());
        // SAFETY: `size` bytes allocated above.
        let bytes = unsafe { std::slice::from_raw_parts_mut(block, size) };
        bytes
            .iter_mut()
            .enumerate()
            .for_each(|(i, byte)| *byte = fill(i));
        // SAFETY: allocated above with this layout; new_size is non-zero.
        let moved = unsafe { Allocator.realloc(block, layout, new_size) };
        assert!(!moved.is_null());
        let kept = size.min(new_size);
        // SAFETY: `new_size` bytes, of which the first `kept` came from the old block.
        let bytes = unsafe { std::slice::from_raw_parts(moved, kept) };
        let first_wrong = bytes
            .iter()
            .enumerate()
            .position(|(i, &byte)| byte != fill(i));
        // SAFETY: reallocated above to this size.
        unsafe { Allocator.dealloc(moved, Layout::from_size_align(new_size, 8).unwrap()) };
        assert_eq!(first_wrong, None, "{size} -> {new_size} bytes");
    }

    #[test]
    fn reallocation_keeps_the_bytes_across_mimalloc_and_own_mappings() {
        let mib = 1 << 20;
        grows_or_shrinks_keeping_bytes(mib, 9 * mib); // mimalloc's to a mapping
        grows_or_shrinks_keeping_bytes(6 * mib, 21 * mib + 5); // a mapping grown by mremap
        grows_or_shrinks_keeping_bytes(21 * mib, 5 * mib); // shrunk by mremap
        grows_or_shrinks_keeping_bytes(7 * mib, mib / 2); // a mapping to mimalloc's
    }
}
