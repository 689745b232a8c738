//! The native binaries' allocator (the CLI, the Lambda functions): mimalloc, as DataFusion's
//! own builds use. Decoding and hashing allocate and free many buffers per batch on every
//! thread, where it is faster than glibc's allocator. Each binary declares it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: quiver_core::allocator::MiMalloc = quiver_core::allocator::MiMalloc;
//! // and first thing in main:
//! quiver_core::allocator::give_memory_back_at_once();
//! ```

pub use mimalloc::MiMalloc;

// mimalloc 3's option numbers (`mi_option_e` in its mimalloc.h).
const ARENA_EAGER_COMMIT: i32 = 4;
const PURGE_DELAY: i32 = 15;

extern "C" {
    fn mi_option_set(option: i32, value: std::ffi::c_long);
}

/// By default mimalloc commits whole arenas up front and keeps freed pages for 10 ms; on
/// TPC-H SF 1 that raised peak RSS by up to half over glibc's (q09: 437 MB against 285).
/// Committing on demand and purging freed pages at once brings it back near glibc's.
pub fn give_memory_back_at_once() {
    // SAFETY: mi_option_set only stores a value in mimalloc's option table.
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}
