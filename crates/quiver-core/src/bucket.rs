//! The bucket planner: a pure function from the row groups a query keeps (and the bytes it
//! will read in each) to buckets, contiguous runs of row groups of one file balanced by
//! bytes. Buckets are the unit of parallel work natively, in the browser and on Lambda.

use serde::{Deserialize, Serialize};

/// 8 MiB: below this a bucket's setup (a request round trip, a decoder) costs more than its
/// work, so small files are not split and small buckets share a partition.
pub const MIN_BUCKET_BYTES: u64 = 8 * 1024 * 1024;

/// 128 MiB: the most one bucket holds in memory at once; bigger runs are split.
pub const MAX_BUCKET_BYTES: u64 = 128 * 1024 * 1024;

/// 1 MiB: a scan smaller than `MIN_BUCKET_BYTES` per thread is still split for every thread
/// when each gets at least this much, so that no thread idles while one decodes (TPC-H
/// SF 1's partsupp, 8 MiB projected, was decoded by one thread of two).
pub const MIN_THREAD_BYTES: u64 = 1024 * 1024;

/// A contiguous run of kept row groups of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// Index of the file in the scan's file list.
    pub file: usize,
    /// Row group indexes, ascending; pruned row groups between them are skipped.
    pub row_groups: Vec<usize>,
    /// Compressed bytes of the projected column chunks.
    pub bytes: u64,
}

/// The row groups one file keeps, each with the bytes the query reads from it.
#[derive(Debug, Clone)]
pub struct FileWork {
    pub file: usize,
    pub row_groups: Vec<(usize, u64)>,
}

#[derive(Debug, Clone, Copy)]
pub struct BucketOptions {
    /// Threads that decode; the plan aims for twice as many buckets (a slow bucket then
    /// delays less).
    pub threads: usize,
    pub min_bucket_bytes: u64,
    pub max_bucket_bytes: u64,
}

impl BucketOptions {
    pub fn for_threads(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
            min_bucket_bytes: MIN_BUCKET_BYTES,
            max_bucket_bytes: MAX_BUCKET_BYTES,
        }
    }

    fn target_bytes(&self, total: u64) -> u64 {
        let threads = self.threads.max(1) as u64;
        // Every thread gets work before a bucket must reach min_bucket_bytes.
        let per_thread = (total / threads).max(MIN_THREAD_BYTES);
        let floor = self.min_bucket_bytes.min(per_thread);
        (total / (2 * threads))
            .max(floor)
            .min(self.max_bucket_bytes)
            .max(1)
    }
}

/// Splits each file into buckets of about `total / (2 × threads)` bytes.
pub fn plan_buckets(files: &[FileWork], options: &BucketOptions) -> Vec<Bucket> {
    let total: u64 = files
        .iter()
        .flat_map(|f| &f.row_groups)
        .map(|(_, b)| b)
        .sum();
    let target = options.target_bytes(total);
    let mut buckets = Vec::new();
    for file in files {
        let mut current = Bucket {
            file: file.file,
            row_groups: vec![],
            bytes: 0,
        };
        for &(row_group, bytes) in &file.row_groups {
            // Close the run when this row group would take it further past the target
            // than stopping short of it.
            if !current.row_groups.is_empty() && current.bytes + bytes / 2 > target {
                buckets.push(std::mem::replace(
                    &mut current,
                    Bucket {
                        file: file.file,
                        row_groups: vec![],
                        bytes: 0,
                    },
                ));
            }
            current.row_groups.push(row_group);
            current.bytes += bytes;
        }
        if !current.row_groups.is_empty() {
            buckets.push(current);
        }
    }
    buckets
}

/// Groups buckets into partitions: a big bucket stands alone, consecutive small ones share
/// a partition up to the same target, so a thousand small files do not make a thousand
/// partitions.
pub fn group_buckets(buckets: Vec<Bucket>, options: &BucketOptions) -> Vec<Vec<Bucket>> {
    let total: u64 = buckets.iter().map(|b| b.bytes).sum();
    let target = options.target_bytes(total);
    let mut groups: Vec<Vec<Bucket>> = Vec::new();
    let mut bytes = 0;
    for bucket in buckets {
        match groups.last_mut() {
            Some(group) if bytes + bucket.bytes <= target => {
                bytes += bucket.bytes;
                group.push(bucket);
            }
            _ => {
                bytes = bucket.bytes;
                groups.push(vec![bucket]);
            }
        }
    }
    groups
}

/// Deals buckets to `workers` workers balanced by bytes: the biggest first, each to the
/// least loaded worker (within 4/3 of the best split). No worker is left without work
/// while another holds two buckets; a worker's buckets keep their plan order.
pub fn assign_to_workers(buckets: &[Bucket], workers: usize) -> Vec<Vec<Bucket>> {
    let workers = workers.clamp(1, buckets.len().max(1));
    let mut order: Vec<usize> = (0..buckets.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(buckets[i].bytes));
    let mut loads = vec![(0u64, Vec::new()); workers];
    for i in order {
        let (bytes, share) = loads
            .iter_mut()
            .min_by_key(|(bytes, share)| (*bytes, share.len()))
            .expect("at least one worker");
        *bytes += buckets[i].bytes;
        share.push(i);
    }
    loads
        .into_iter()
        .map(|(_, mut share)| {
            share.sort_unstable();
            share.into_iter().map(|i| buckets[i].clone()).collect()
        })
        .filter(|share: &Vec<Bucket>| !share.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn file(index: usize, sizes: &[u64]) -> FileWork {
        FileWork {
            file: index,
            row_groups: sizes.iter().copied().enumerate().collect(),
        }
    }

    #[test]
    fn one_big_file_is_split_for_every_thread() {
        let files = [file(0, &[20 * MIB; 40])];
        let buckets = plan_buckets(&files, &BucketOptions::for_threads(4));
        assert_eq!(buckets.len(), 8);
        let covered: Vec<usize> = buckets.iter().flat_map(|b| b.row_groups.clone()).collect();
        assert_eq!(
            covered,
            (0..40).collect::<Vec<_>>(),
            "contiguous, complete, in order"
        );
        assert!(buckets.iter().all(|b| b.bytes == 100 * MIB));
    }

    #[test]
    fn a_small_file_is_split_for_every_thread_down_to_a_mebibyte_each() {
        // 6 MiB over 2 threads: a bucket each, though both are under MIN_BUCKET_BYTES.
        let files = [file(0, &[MIB; 6])];
        let buckets = plan_buckets(&files, &BucketOptions::for_threads(2));
        assert_eq!(buckets.len(), 2);
        assert!(buckets.iter().all(|b| b.bytes == 3 * MIB));
        // Over 8 threads, never under a mebibyte a thread: 6 buckets, not 8 or 16.
        assert_eq!(
            plan_buckets(&files, &BucketOptions::for_threads(8)).len(),
            6
        );
        // Under a mebibyte in all it stays whole.
        let tiny = [file(0, &[MIB / 8; 6])];
        assert_eq!(plan_buckets(&tiny, &BucketOptions::for_threads(2)).len(), 1);
    }

    #[test]
    fn no_bucket_exceeds_the_memory_cap_by_more_than_one_row_group() {
        let files = [file(0, &[100 * MIB; 10])];
        let options = BucketOptions::for_threads(1);
        for bucket in plan_buckets(&files, &options) {
            assert!(bucket.bytes <= options.max_bucket_bytes + 100 * MIB);
        }
    }

    #[test]
    fn pruned_row_groups_are_skipped_and_files_never_mix() {
        let files = [
            FileWork {
                file: 0,
                row_groups: vec![(0, KIB), (3, KIB)],
            },
            FileWork {
                file: 1,
                row_groups: vec![(1, KIB)],
            },
        ];
        let buckets = plan_buckets(&files, &BucketOptions::for_threads(2));
        assert_eq!(
            buckets[0],
            Bucket {
                file: 0,
                row_groups: vec![0, 3],
                bytes: 2 * KIB
            }
        );
        assert_eq!(buckets[1].file, 1);
        let groups = group_buckets(buckets, &BucketOptions::for_threads(2));
        assert_eq!(groups.len(), 1, "small buckets share a partition");
    }

    #[test]
    fn workers_get_balanced_shares() {
        let buckets: Vec<Bucket> = [90, 10, 40, 40, 30, 30, 20]
            .iter()
            .enumerate()
            .map(|(i, &mb)| Bucket {
                file: i,
                row_groups: vec![0],
                bytes: mb * MIB,
            })
            .collect();
        let shares = assign_to_workers(&buckets, 3);
        let loads: Vec<u64> = shares
            .iter()
            .map(|s| s.iter().map(|b| b.bytes).sum::<u64>() / MIB)
            .collect();
        assert_eq!(loads.iter().sum::<u64>(), 260);
        assert!(loads.iter().all(|&l| l <= 100), "{loads:?}");
        // Every bucket exactly once, each share in plan order.
        let mut files: Vec<usize> = shares.iter().flatten().map(|b| b.file).collect();
        assert!(shares
            .iter()
            .all(|s| s.windows(2).all(|w| w[0].file < w[1].file)));
        files.sort();
        assert_eq!(files, (0..7).collect::<Vec<_>>());
        // More workers than buckets: one bucket each, nobody idle with a share.
        assert_eq!(assign_to_workers(&buckets[..2], 8).len(), 2);
        assert!(assign_to_workers(&[], 4).is_empty());
    }
}
