//! Quiver's engine: SQL over Parquet files on local disk, S3 and HTTP, through one narrow
//! source trait. Data flows one way: each room below imports only rooms on lower floors
//! (a check in CI, `scripts/check-house.py`, reads this list and holds the code to it).
//!
//! Floors, lowest first:
//!
//! 1. error · metrics · rates · sql_types · memory · allocator · format: ground, no imports
//! 2. source: where files live (sources, retries and hedging of their reads)
//! 3. cache → fetch → read: the block and disk caches, read plans, the one metered read
//! 4. fixed_decimals → footer: footers read once per file
//! 5. bucket → options → runtime: a statement's settings and the one way to open a file
//! 6. prune · statistics · pushdown · in_turn · filter_order · running_window ·
//!    co_partitioned · first_groups · rollup_levels · row_sieve → distinct_probes →
//!    adjacent_repeats · join_order: planning
//!    helpers and the plan rules after DataFusion's
//! 7. index → scan → table → metadata → text → iceberg: the persistent index, the scan
//!    node, tables (Parquet, its metadata, CSV and JSON, Iceberg)
//! 8. copy → cost: writing results, pricing reads
//! 9. fragment → exec: what travels, and who runs it
//! 10. session: statements, planned and run
//!
//! floors: error metrics rates sql_types memory allocator format source cache fetch read
//! fixed_decimals footer bucket options runtime prune statistics pushdown in_turn filter_order
//! running_window co_partitioned first_groups rollup_levels row_sieve distinct_probes adjacent_repeats join_order index scan table metadata text iceberg copy cost fragment
//! exec session
//!
//! Public are the rooms the faces (the command, the browser module, the Lambda executor
//! and functions) use, each exporting what they need; the rest is private.

mod adjacent_repeats;
#[cfg(not(target_arch = "wasm32"))]
pub mod allocator;
pub mod bucket;
mod cache;
mod co_partitioned;
pub mod copy;
pub mod cost;
mod distinct_probes;
pub mod error;
pub mod exec;
mod fetch;
mod filter_order;
mod first_groups;
mod fixed_decimals;
mod footer;
pub mod format;
pub mod fragment;
mod iceberg;
mod in_turn;
pub mod index;
mod join_order;
pub mod memory;
pub mod metadata;
pub mod metrics;
pub mod options;
mod prune;
mod pushdown;
pub mod rates;
mod read;
mod rollup_levels;
mod row_sieve;
mod running_window;
pub mod runtime;
pub mod scan;
pub mod session;
pub mod source;
pub mod sql_types;
mod statistics;
mod table;
mod text;

#[cfg(target_arch = "wasm32")]
pub use cache::OpfsCache;
pub use cache::{default_dir as default_cache_dir, DiskCache, DISK_CACHE_BYTES};
pub use error::{describe, QuiverError};
pub use exec::ExecutorKind;
pub use fetch::{coalesce, FetchOptions};
pub use session::{QueryOutput, QueryStream, QuiverSession, SessionOptions};
