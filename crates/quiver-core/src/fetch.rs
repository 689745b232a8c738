//! Read plans. For each bucket the byte ranges it needs (the projected column chunks of
//! its row groups) are planned before any I/O, merged when close and split when large;
//! `read` fetches them with bounded concurrency, and decoding then reads from memory
//! (`FetchedBytes`). Pure: nothing here does I/O.

use std::ops::Range;

use bytes::Bytes;
use datafusion::arrow::datatypes::Schema;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::SchemaDescriptor;

/// 1 MiB: a gap smaller than this costs less to read through than a request's latency
/// against object storage (about 1 MiB at 100 MB/s and 10 ms per request).
pub const COALESCE_GAP: u64 = 1024 * 1024;

/// 16 MiB: AWS advises 8-16 MiB range GETs; larger requests raise tail latency, and
/// ClickHouse caps coalesced reads at the same size.
pub const MAX_COALESCED_BYTES: u64 = 16 * 1024 * 1024;

/// 16 requests in flight: enough to fill a fast link to S3 from one machine.
pub const MAX_CONCURRENT_REQUESTS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FetchOptions {
    pub coalesce_gap: u64,
    pub max_coalesced_bytes: u64,
    pub max_concurrent_requests: usize,
}

impl FetchOptions {
    /// Only touching ranges merge, with no size cap: one read per run of adjacent column
    /// chunks, for a source read on demand (a read costs no round trip there).
    pub fn contiguous() -> Self {
        Self {
            coalesce_gap: 0,
            max_coalesced_bytes: u64::MAX,
            ..Self::default()
        }
    }
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            coalesce_gap: COALESCE_GAP,
            max_coalesced_bytes: MAX_COALESCED_BYTES,
            max_concurrent_requests: MAX_CONCURRENT_REQUESTS,
        }
    }
}

/// A file's projected columns as the Parquet leaves that store them: the one value the
/// planner sizes buckets with and the scan fetches by, so the two never disagree on which
/// bytes a bucket reads.
pub struct ProjectedColumns<'a> {
    metadata: &'a ParquetMetaData,
    /// Leaf column indexes (in the Parquet schema) under the named top-level columns.
    leaves: Vec<usize>,
}

impl<'a> ProjectedColumns<'a> {
    /// The leaves of the top-level columns `names`; `stored` is the file's Arrow schema,
    /// whose top-level fields are the Parquet schema's roots.
    pub fn new(metadata: &'a ParquetMetaData, stored: &Schema, names: &[String]) -> Self {
        let descriptor: &SchemaDescriptor = metadata.file_metadata().schema_descr();
        let roots: Vec<usize> = names
            .iter()
            .filter_map(|name| stored.index_of(name).ok())
            .collect();
        let leaves = (0..descriptor.num_columns())
            .filter(|&leaf| roots.contains(&descriptor.get_column_root_idx(leaf)))
            .collect();
        Self { metadata, leaves }
    }

    /// The leaves the planner already found for these columns (`ScanFile::leaves`); any
    /// past the file's columns are dropped, so a stale list cannot index out of bounds.
    pub fn of_leaves(metadata: &'a ParquetMetaData, mut leaves: Vec<usize>) -> Self {
        let count = metadata.file_metadata().schema_descr().num_columns();
        leaves.retain(|&leaf| leaf < count);
        Self { metadata, leaves }
    }

    /// The leaf column indexes, in schema order.
    pub fn leaves(&self) -> &[usize] {
        &self.leaves
    }

    /// The byte ranges of these columns' chunks in `row_groups`, sorted.
    pub fn ranges(&self, row_groups: &[usize]) -> Vec<Range<u64>> {
        let mut ranges: Vec<Range<u64>> = row_groups
            .iter()
            .flat_map(|&rg| {
                let row_group = self.metadata.row_group(rg);
                self.leaves.iter().map(move |&c| {
                    let (start, length) = row_group.column(c).byte_range();
                    start..start + length
                })
            })
            .filter(|r| r.end > r.start)
            .collect();
        ranges.sort_by_key(|r| r.start);
        ranges
    }

    /// The bytes these columns take in one row group.
    pub fn bytes(&self, row_group: usize) -> u64 {
        self.ranges(&[row_group])
            .iter()
            .map(|r| r.end - r.start)
            .sum()
    }
}

/// Merges sorted ranges closer than `coalesce_gap`, then splits any merged range larger
/// than `max_coalesced_bytes` into equal parts. The result covers every input byte.
pub fn coalesce(ranges: &[Range<u64>], options: &FetchOptions) -> Vec<Range<u64>> {
    let mut merged: Vec<Range<u64>> = Vec::new();
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end + options.coalesce_gap => {
                last.end = last.end.max(range.end)
            }
            _ => merged.push(range.clone()),
        }
    }
    let max = options.max_coalesced_bytes.max(1);
    merged
        .into_iter()
        .flat_map(|range| {
            let length = range.end - range.start;
            let parts = length.div_ceil(max).max(1);
            let step = length.div_ceil(parts);
            (0..parts)
                .map(move |i| range.start + i * step..(range.start + (i + 1) * step).min(range.end))
        })
        .collect()
}

/// Bytes of one file fetched ahead of decoding: sorted, non-overlapping pieces.
#[derive(Debug, Default, Clone)]
pub struct FetchedBytes {
    pieces: Vec<(u64, Bytes)>,
    /// What fetching them took.
    pub stats: FetchStats,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FetchStats {
    pub requests: u64,
    pub bytes: u64,
    /// Served by the block cache.
    pub cache_hit_bytes: u64,
    /// Served by the disk cache.
    pub disk_cache_hit_bytes: u64,
}

impl FetchedBytes {
    /// Pieces in any order; where two overlap, the later one is trimmed.
    pub fn new(mut pieces: Vec<(u64, Bytes)>) -> Self {
        pieces.sort_by_key(|(start, _)| *start);
        let mut kept: Vec<(u64, Bytes)> = Vec::with_capacity(pieces.len());
        for (start, bytes) in pieces {
            let covered_to = kept.last().map(|(s, b)| s + b.len() as u64).unwrap_or(0);
            let end = start + bytes.len() as u64;
            if end <= covered_to {
                continue;
            }
            let skip = covered_to.saturating_sub(start);
            kept.push((start + skip, bytes.slice(skip as usize..)));
        }
        Self {
            pieces: kept,
            stats: FetchStats::default(),
        }
    }

    /// The bytes of `range`, without copying when one piece holds all of it.
    pub fn slice(&self, range: &Range<u64>) -> Option<Bytes> {
        let index = self
            .pieces
            .partition_point(|(start, _)| *start <= range.start)
            .checked_sub(1)?;
        let (start, bytes) = &self.pieces[index];
        let end = start + bytes.len() as u64;
        if range.end <= end {
            return Some(bytes.slice((range.start - start) as usize..(range.end - start) as usize));
        }
        // A range across adjacent pieces (a coalesced range split at the size cap).
        let mut joined = Vec::with_capacity((range.end - range.start) as usize);
        let mut position = range.start;
        for (start, bytes) in &self.pieces[index..] {
            let end = start + bytes.len() as u64;
            if *start > position {
                return None;
            }
            let take_to = end.min(range.end);
            joined
                .extend_from_slice(&bytes[(position - start) as usize..(take_to - start) as usize]);
            position = take_to;
            if position == range.end {
                return Some(Bytes::from(joined));
            }
        }
        None
    }

    /// These pieces and `more`, as one (overlaps kept once); the stats stay.
    pub fn with(self, more: Vec<(u64, Bytes)>) -> Self {
        let mut pieces = self.pieces;
        pieces.extend(more);
        Self {
            stats: self.stats,
            ..Self::new(pieces)
        }
    }

    /// Bytes held (overlaps once).
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.pieces.iter().map(|(_, b)| b.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn close_ranges_merge_and_far_ones_do_not() {
        let options = FetchOptions::default();
        let plan = coalesce(&[0..100, 200..300, 300 + 2 * MIB..400 + 2 * MIB], &options);
        assert_eq!(plan, vec![0..300, 300 + 2 * MIB..400 + 2 * MIB]);
    }

    #[test]
    fn merged_ranges_are_split_at_the_size_cap() {
        let options = FetchOptions::default();
        let whole_file = [Range {
            start: 0,
            end: 40 * MIB,
        }];
        let plan = coalesce(&whole_file, &options);
        assert_eq!(plan.len(), 3);
        assert!(plan.iter().all(|r| r.end - r.start <= 16 * MIB));
        assert_eq!(plan.first().unwrap().start, 0);
        assert_eq!(plan.last().unwrap().end, 40 * MIB);
        assert!(plan.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn slices_are_served_within_and_across_pieces() {
        // Out of order and overlapping, as cache hits and fresh reads arrive.
        let fetched = FetchedBytes::new(vec![
            (30, Bytes::from_static(b"xyz")),
            (10, Bytes::from_static(b"abcde")),
            (12, Bytes::from_static(b"cd")),
            (14, Bytes::from_static(b"efgh")),
        ]);
        assert_eq!(fetched.len(), 11, "overlaps are kept once");
        assert_eq!(fetched.slice(&(11..13)).unwrap(), Bytes::from_static(b"bc"));
        assert_eq!(
            fetched.slice(&(13..17)).unwrap(),
            Bytes::from_static(b"defg")
        );
        assert!(fetched.slice(&(17..31)).is_none(), "a hole is not served");
        assert!(fetched.slice(&(0..5)).is_none());
    }
}
