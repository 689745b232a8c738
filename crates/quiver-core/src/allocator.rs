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
