//! Quiver's engine: SQL over Parquet files on local disk (and, through the same narrow
//! source trait, object storage). Modules follow the flow of a query, top to bottom;
//! none imports one above it.
//!
//! source → tail → cache → footer → prune → statistics → bucket → fetch → scan → copy → table →
//! metadata → index → fragment → exec → session → format
//!
//! Public are the modules the faces (the command, the browser module, the Lambda executor
//! and functions) use; the planning internals between a listing and a scan (cache, footer,
//! prune, statistics, fetch, table) are not.

#[cfg(not(target_arch = "wasm32"))]
pub mod allocator;
pub mod bucket;
mod cache;
pub mod copy;
pub mod cost;
pub mod error;
pub mod exec;
mod fetch;
mod filter_order;
mod fixed_decimals;
mod footer;
pub mod format;
pub mod fragment;
#[cfg(test)]
mod hostile_input;
pub mod index;
pub mod inspect;
pub mod memory;
pub mod metadata;
pub mod metrics;
pub mod options;
mod prune;
mod pushdown;
pub mod runtime;
pub mod scan;
pub mod session;
pub mod source;
pub mod sql_types;
mod statistics;
mod table;
mod tail;

pub use error::{describe, QuiverError};
pub use session::{ExecutorKind, QueryOutput, QueryStream, QuiverSession, SessionOptions};
