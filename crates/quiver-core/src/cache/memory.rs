//! The block cache: bytes already fetched, kept in memory per object version so that a hot re-run
//! makes no request for bytes it holds. Bounded by bytes; the oldest pieces leave first.
//! Lookups split a request into what is held and what is missing, so the fetch layer can
//! coalesce adjacent misses into one request. The cache owns its bound: a query sets it
//! from `quiver.block_cache_bytes` when it starts (`QuiverRuntime::begin_query`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use bytes::Bytes;

use crate::source::ObjectMeta;

/// 256 MiB: a TPC-H SF 1 scan's hot columns fit; settable as `quiver.block_cache_bytes`.
pub const BLOCK_CACHE_BYTES: u64 = 256 * 1024 * 1024;

type ObjectKey = (String, String);

#[derive(Debug)]
pub struct BlockCache {
    state: Mutex<State>,
    /// Bytes it may hold; 0 turns it off.
    capacity: AtomicU64,
}

impl Default for BlockCache {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            capacity: AtomicU64::new(BLOCK_CACHE_BYTES),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Non-overlapping pieces per object, by start offset.
    objects: HashMap<ObjectKey, BTreeMap<u64, Bytes>>,
    /// Insertion order, for eviction.
    order: VecDeque<(ObjectKey, u64)>,
    bytes: u64,
}

/// What the cache holds of some ranges, and what it lacks.
#[derive(Debug, Default)]
pub struct Lookup {
    pub held: Vec<(u64, Bytes)>,
    pub missing: Vec<Range<u64>>,
}

impl Lookup {
    /// Nothing held: all of `ranges` missing.
    pub fn missing(ranges: Vec<Range<u64>>) -> Self {
        Self {
            held: vec![],
            missing: ranges,
        }
    }
}

impl BlockCache {
    /// Bounds the cache to `bytes` from now on, evicting the oldest pieces beyond it; 0
    /// turns it off (it neither keeps nor serves, and lets go of what it held).
    pub fn set_capacity(&self, bytes: u64) {
        if self.capacity.swap(bytes, Relaxed) != bytes {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.evict_to(bytes);
        }
    }

    /// What is held of `ranges`, and what is missing (everything while the cache is off).
    pub fn lookup(&self, object: &ObjectMeta, ranges: &[Range<u64>]) -> Lookup {
        if self.capacity.load(Relaxed) == 0 {
            return Lookup::missing(ranges.to_vec());
        }
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(pieces) = state.objects.get(&key(object)) else {
            return Lookup::missing(ranges.to_vec());
        };
        split(pieces, ranges)
    }

    /// Keeps the parts of `pieces` not already held, then evicts down to the bound.
    pub fn insert(&self, object: &ObjectMeta, pieces: &[(u64, Bytes)]) {
        let capacity = self.capacity.load(Relaxed);
        if capacity == 0 {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let key = key(object);
        let mut added = vec![];
        {
            let held = state.objects.entry(key.clone()).or_default();
            for (start, bytes) in pieces {
                let range = *start..start + bytes.len() as u64;
                let mut gaps = vec![];
                walk(held, &range, |position, end, piece| {
                    if piece.is_none() {
                        gaps.push(position..end);
                    }
                });
                for gap in gaps {
                    let slice =
                        bytes.slice((gap.start - start) as usize..(gap.end - start) as usize);
                    held.insert(gap.start, slice);
                    added.push((gap.start, gap.end - gap.start));
                }
            }
        }
        for (start, length) in added {
            state.order.push_back((key.clone(), start));
            state.bytes += length;
        }
        state.evict_to(capacity);
    }
}

impl State {
    /// Drops the oldest pieces until at most `capacity` bytes are held.
    fn evict_to(&mut self, capacity: u64) {
        while self.bytes > capacity {
            let Some((oldest, start)) = self.order.pop_front() else {
                break;
            };
            let removed = self
                .objects
                .get_mut(&oldest)
                .and_then(|pieces| pieces.remove(&start));
            if let Some(bytes) = removed {
                self.bytes -= bytes.len() as u64;
            }
            if self.objects.get(&oldest).is_some_and(BTreeMap::is_empty) {
                self.objects.remove(&oldest);
            }
        }
    }
}

fn key(object: &ObjectMeta) -> ObjectKey {
    (object.path.clone(), object.version.clone())
}

/// What `pieces` hold of `ranges` (served as slices of them), and what they lack.
pub(super) fn split(pieces: &BTreeMap<u64, Bytes>, ranges: &[Range<u64>]) -> Lookup {
    let mut found = Lookup::default();
    for range in ranges {
        walk(pieces, range, |position, end, piece| match piece {
            Some((start, bytes)) => found.held.push((
                position,
                bytes.slice((position - start) as usize..(end - start) as usize),
            )),
            None => found.missing.push(position..end),
        });
    }
    found
}

/// How long a piece is: its bytes in memory, or its length alone (a piece on disk, before
/// it is read).
pub(super) trait Extent {
    fn extent(&self) -> u64;
}

impl Extent for Bytes {
    fn extent(&self) -> u64 {
        self.len() as u64
    }
}

impl Extent for u64 {
    fn extent(&self) -> u64 {
        *self
    }
}

/// Walks `range` over non-overlapping `pieces`, calling `visit(from, to, piece)` for each
/// stretch: `Some(piece start, piece)` where a piece covers it, `None` where none does.
pub(super) fn walk<T: Extent>(
    pieces: &BTreeMap<u64, T>,
    range: &Range<u64>,
    mut visit: impl FnMut(u64, u64, Option<(u64, &T)>),
) {
    let mut position = range.start;
    let first = pieces
        .range(..=position)
        .next_back()
        .map(|(s, _)| *s)
        .unwrap_or(position);
    for (&start, piece) in pieces.range(first..range.end) {
        let end = start + piece.extent();
        if end <= position {
            continue;
        }
        if start > position {
            visit(position, start, None);
            position = start;
        }
        let until = end.min(range.end);
        visit(position, until, Some((start, piece)));
        position = until;
        if position >= range.end {
            return;
        }
    }
    if position < range.end {
        visit(position, range.end, None);
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // one byte range is what these lookups ask for
mod tests {
    use super::*;

    fn object() -> ObjectMeta {
        ObjectMeta {
            path: "s3://b/k".into(),
            size: 1000,
            version: "\"etag\"".into(),
        }
    }

    fn bytes(from: u64, to: u64) -> Bytes {
        (from..to).map(|i| i as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn held_bytes_are_served_and_the_rest_is_missing() {
        let cache = BlockCache::default();
        cache.insert(&object(), &[(100, bytes(100, 200)), (300, bytes(300, 400))]);
        let found = cache.lookup(&object(), &[150..350]);
        assert_eq!(found.missing, vec![200..300]);
        assert_eq!(
            found.held,
            vec![(150, bytes(150, 200)), (300, bytes(300, 350))]
        );
        let other_version = ObjectMeta {
            version: "\"new\"".into(),
            ..object()
        };
        assert_eq!(
            cache.lookup(&other_version, &[150..350]).missing,
            vec![150..350]
        );
    }

    #[test]
    fn overlapping_inserts_keep_one_copy_and_eviction_bounds_bytes() {
        let cache = BlockCache::default();
        cache.set_capacity(150);
        cache.insert(&object(), &[(0, bytes(0, 100))]);
        cache.insert(&object(), &[(50, bytes(50, 150))]);
        let found = cache.lookup(&object(), &[0..150]);
        assert!(found.missing.is_empty());
        assert_eq!(found.held.iter().map(|(_, b)| b.len()).sum::<usize>(), 150);
        cache.insert(&object(), &[(500, bytes(500, 600))]);
        assert_eq!(
            cache.lookup(&object(), &[0..100]).missing,
            vec![0..100],
            "oldest evicted first"
        );
        assert!(cache.lookup(&object(), &[500..600]).missing.is_empty());
        assert_eq!(cache.state.lock().unwrap().bytes, 150);
        // Off: what was held is let go, nothing is served or kept.
        cache.set_capacity(0);
        assert_eq!(cache.state.lock().unwrap().bytes, 0);
        cache.insert(&object(), &[(0, bytes(0, 100))]);
        assert_eq!(cache.lookup(&object(), &[0..100]).missing, vec![0..100]);
    }
}
