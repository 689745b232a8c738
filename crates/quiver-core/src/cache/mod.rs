//! Bytes already fetched, so that no request asks for them again: in memory for this
//! process (`memory`), and on disk for the processes after it (`disk`). `read` asks them
//! in that order before the network.

mod disk;
mod memory;

pub use disk::{default_dir, DiskCache, DISK_CACHE_BYTES};
pub use memory::{BlockCache, Lookup, BLOCK_CACHE_BYTES};
