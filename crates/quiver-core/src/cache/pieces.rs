//! A kept piece as a file, the same on disk and in the browser's origin private file system:
//! one folder per object version (a hash of path and version: a rewritten object is
//! another folder, never served from the old one), one file per piece as it was fetched,
//! named `<start>-<length>` so that pieces align as the block cache's do, and sealed: its
//! bytes follow their length and checksum, so a torn or corrupt file reads as nothing.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use twox_hash::XxHash64;

use super::memory::walk;
use crate::source::ObjectMeta;

/// Every file starts with these 8 bytes, then its length and checksum (u64 LE each).
const MAGIC: &[u8; 8] = b"QVRDISK1";
pub(super) const HEADER: usize = 24;

/// The folder of `object`'s version.
pub(super) fn folder_name(object: &ObjectMeta) -> String {
    let key = format!("{}\0{}", object.path, object.version);
    format!("{:016x}", XxHash64::oneshot(0, key.as_bytes()))
}

pub(super) fn piece_name(start: u64, length: u64) -> String {
    format!("{start:016x}-{length:x}")
}

/// The start and length a file's name gives (`None` for any other file).
pub(super) fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (start, length) = name.split_once('-')?;
    Some((
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(length, 16).ok()?,
    ))
}

/// The pieces among `named` (start, length), by start; where two overlap (two processes
/// fetched differently), the first is used.
pub(super) fn pieces(mut named: Vec<(u64, u64)>) -> BTreeMap<u64, u64> {
    named.sort_unstable();
    let mut pieces = BTreeMap::new();
    let mut covered_to = 0;
    for (start, length) in named {
        if start >= covered_to && length > 0 {
            pieces.insert(start, length);
            covered_to = start + length;
        }
    }
    pieces
}

/// The pieces of `held` that `ranges` touch, by start, with their lengths.
pub(super) fn wanted(held: &BTreeMap<u64, u64>, ranges: &[Range<u64>]) -> BTreeMap<u64, u64> {
    let mut wanted = BTreeMap::new();
    for range in ranges {
        walk(held, range, |_, _, piece| {
            if let Some((start, &length)) = piece {
                wanted.insert(start, length);
            }
        });
    }
    wanted
}

/// The parts of `fetched` that `held` lacks, none of `most` bytes or more (it would evict
/// everything, then itself): what a write adds.
pub(super) fn gaps(
    held: &BTreeMap<u64, u64>,
    fetched: &[(u64, Bytes)],
    most: u64,
) -> Vec<(u64, Bytes)> {
    let mut gaps = vec![];
    for (start, bytes) in fetched {
        let range = *start..start + bytes.len() as u64;
        walk(held, &range, |from, to, piece| {
            if piece.is_none() && to - from < most {
                gaps.push((
                    from,
                    bytes.slice((from - start) as usize..(to - start) as usize),
                ));
            }
        });
    }
    gaps
}

/// The header that seals `bytes`.
pub(super) fn seal(bytes: &[u8]) -> [u8; HEADER] {
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    header[16..].copy_from_slice(&XxHash64::oneshot(0, bytes).to_le_bytes());
    header
}

/// The bytes of a file that should hold a piece of `length`, if it is whole and its
/// checksum holds.
pub(super) fn unseal(file: Bytes, length: u64) -> Option<Bytes> {
    if file.len() as u64 != HEADER as u64 + length {
        return None;
    }
    let (header, bytes) = file.split_at(HEADER);
    let whole = &header[..8] == MAGIC
        && header[8..16] == length.to_le_bytes()
        && header[16..] == XxHash64::oneshot(0, bytes).to_le_bytes();
    whole.then(|| file.slice(HEADER..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_piece_unseals_and_a_torn_or_flipped_one_does_not() {
        let bytes = Bytes::from_static(b"column chunk bytes");
        let mut file = seal(&bytes).to_vec();
        file.extend_from_slice(&bytes);
        let length = bytes.len() as u64;
        assert_eq!(unseal(Bytes::from(file.clone()), length), Some(bytes));
        assert_eq!(unseal(Bytes::from(file[..30].to_vec()), length), None);
        file[HEADER + 3] ^= 1;
        assert_eq!(unseal(Bytes::from(file), length), None);
    }

    #[test]
    fn names_round_trip_and_overlapping_pieces_keep_the_first() {
        assert_eq!(parse_name(&piece_name(4096, 300)), Some((4096, 300)));
        assert_eq!(parse_name("0000000000001000-12c.crswap"), None);
        let held = pieces(vec![(100, 50), (0, 120), (120, 10), (200, 0)]);
        assert_eq!(
            held.into_iter().collect::<Vec<_>>(),
            vec![(0, 120), (120, 10)]
        );
    }
}
