//! The native binaries' allocator (the CLI, the Lambda functions): mimalloc, as DataFusion's
//! own builds use. Decoding and hashing allocate and free many buffers per batch on every
//! thread, where it is faster than glibc's allocator. Each binary declares it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: quiver_core::allocator::MiMalloc = quiver_core::allocator::MiMalloc;
//! ```
//!
//! mimalloc's defaults stay: purging freed pages at once and committing arenas on demand
//! (`MIMALLOC_PURGE_DELAY=0`, `MIMALLOC_ARENA_EAGER_COMMIT=0`) saved 1 to 4% of peak RSS on
//! TPC-H SF 1 but cost 5 to 25% of the time, in page faults on memory freed a moment before.
//! Its environment variables still apply.

pub use mimalloc::MiMalloc;

use std::ffi::{c_int, c_long};

/// Under a memory limit below this, freed pages go back to the system at once: mimalloc's
/// 10 ms delay kept 150 MB of freed pages resident in a sort of SF 1 lineitem under a 256 MB
/// limit (peak RSS 508 MB, 351 MB purging at once, for 13% more time). Above it, the time
/// matters more than the pages.
pub const PURGE_AT_ONCE_BELOW: u64 = 4 << 30;

/// `mi_option_purge_delay`: its place in mimalloc's option enum, the same in v2 and v3.
const MI_OPTION_PURGE_DELAY: c_int = 15;
/// mimalloc's default purge delay, in milliseconds.
const DEFAULT_PURGE_DELAY_MS: c_long = 10;

extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// Sets how soon mimalloc returns freed pages, for a query under `limit`; a delay set in
/// the environment (`MIMALLOC_PURGE_DELAY`) is left alone.
pub fn follow_memory_limit(limit: Option<u64>) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    let at_once = limit.is_some_and(|bytes| bytes < PURGE_AT_ONCE_BELOW);
    let delay = if at_once { 0 } else { DEFAULT_PURGE_DELAY_MS };
    // SAFETY: a plain setter of one of mimalloc's options, safe from any thread.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, delay) }
}
