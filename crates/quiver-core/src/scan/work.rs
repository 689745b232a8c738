//! What a scan is asked to read, as plain data: the files (with their listing values and
//! what the planner learnt of their footers), and what the plan says it will read. This is
//! what travels to a worker inside a fragment (`fragment::codec`).

use serde::{Deserialize, Serialize};

use crate::source::ObjectMeta;

/// One file of a scan, with the values of its listing columns (hive, then virtual) as
/// text, typed again by the scan's partition fields: text survives serialisation as is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanFile {
    pub meta: ObjectMeta,
    pub listing_values: Vec<Option<String>>,
    /// The encoded length of the file's footer, when the planner read it: a Lambda worker,
    /// whose footer cache is cold, then reads exactly the footer instead of the file's last
    /// `footer_read_bytes` (16 workers on one file read 8 MiB of tails otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer_len: Option<u64>,
    /// The Parquet leaf columns that store the scan's projected columns in this file, as
    /// the planner found them in its footer: every bucket of the file reads these, without
    /// mapping the footer to a schema again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<Vec<usize>>,
    /// Rows of the file deleted since it was written (sorted positions in the file): an
    /// Iceberg table's position deletes, which the scan skips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_rows: Option<Vec<u64>>,
}

/// What the plan says it will read, for EXPLAIN.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScanSummary {
    /// The Iceberg manifests the files were found in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<ManifestCounts>,
    pub files: usize,
    pub files_pruned: usize,
    /// Of those, ruled out by the persistent index (no footer read).
    pub files_index_pruned: usize,
    pub row_groups: usize,
    pub row_groups_pruned: usize,
    pub bytes_planned: u64,
}

/// An Iceberg snapshot's manifests: read, and ruled out by their partitions' summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestCounts {
    pub read: usize,
    pub pruned: usize,
}
