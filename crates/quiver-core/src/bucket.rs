//! The bucket planner: a pure function from the row groups a query keeps (and the bytes it
//! will read in each) to buckets, contiguous runs of row groups of one file balanced by
//! bytes. Buckets are the unit of parallel work natively, in the browser and on Lambda.

use serde::{Deserialize, Serialize};

/// 8 MiB: below this a bucket's setup (a request round trip, a decoder) costs more than its
/// work, so small files are not split and small buckets share a partition.
pub const MIN_BUCKET_BYTES: u64 = 8 * 1024 * 1024;

/// 128 MiB: the most one bucket holds in memory at once; bigger runs are split.
pub const MAX_BUCKET_BYTES: u64 = 128 * 1024 * 1024;

/// 256 KiB: a scan smaller than `MIN_BUCKET_BYTES` per thread is still split for every
/// thread when each gets at least this much, so that no thread idles while one decodes
/// (TPC-H SF 1's partsupp, 8 MiB projected, was decoded by one thread of two). Compressed
/// bytes understate decoding where values compress well: ClickBench's `AdvEngineID`, 1.1
/// MB for 10 million rows, went to one bucket of 22 row groups and one of 1 at a floor of
/// 1 MiB, and took 1.6x DataFusion's time on one thread.
pub const MIN_THREAD_BYTES: u64 = 256 * 1024;

/// A quarter: the share of a query's memory limit that fetched, not yet decoded buckets may
/// take at once (each partition holds one at least). They cannot spill, so the rest is left
/// to the sorts, aggregates and joins that can: a sort of SF 1 lineitem under 256 MB failed
/// while five partitions held a 55 MB bucket each.
pub const HELD_SHARE_OF_LIMIT: u64 = 4;

/// 60 MiB: what one partition's operators need under a memory limit to spill and merge back
/// (its bucket, a sort's batches, the merge of four spilled runs). A limit that affords
/// fewer partitions than twice the threads gets that many (256 MB: 4; 128 MB: 2), since
/// each sort's merge and the final one over all partitions need room of their own.
pub const PARTITION_MEMORY: u64 = 60 * 1024 * 1024;

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
    /// The query's memory limit (`u64::MAX` without one): buckets shrink and partitions are
    /// fewer to fit in it.
    pub memory_limit: u64,
}

impl BucketOptions {
    pub fn for_threads(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
            min_bucket_bytes: MIN_BUCKET_BYTES,
            max_bucket_bytes: MAX_BUCKET_BYTES,
            memory_limit: u64::MAX,
        }
    }

    /// Plans for `limit`, the query's memory limit.
    pub fn within_memory_limit(self, limit: Option<u64>) -> Self {
        Self {
            memory_limit: limit.unwrap_or(u64::MAX),
            ..self
        }
    }

    /// What fetched buckets may hold at once.
    fn held_bytes(&self) -> u64 {
        self.memory_limit / HELD_SHARE_OF_LIMIT
    }

    /// The most partitions a scan gets: those the limit affords with room to spill, twice
    /// the threads at most, one at least. More add no parallelism, and each holds a bucket
    /// and its operators' state at once: an export of SF 1 lineitem held five partitions'
    /// worth, SF 10 eighteen.
    fn affordable_partitions(&self) -> u64 {
        (self.memory_limit / PARTITION_MEMORY).clamp(1, 2 * self.threads.max(1) as u64)
    }

    /// The biggest bucket: `max_bucket_bytes`, or less so that the affordable partitions
    /// hold one each within `held_bytes`.
    pub fn bucket_cap(&self) -> u64 {
        let per_partition = self.held_bytes() / self.affordable_partitions();
        self.max_bucket_bytes.min(per_partition).max(1)
    }

    fn target_bytes(&self, total: u64) -> u64 {
        let threads = self.threads.max(1) as u64;
        // Every thread gets work before a bucket must reach min_bucket_bytes.
        let per_thread = (total / threads).max(MIN_THREAD_BYTES);
        let floor = self.min_bucket_bytes.min(per_thread);
        (total / (2 * threads))
            .max(floor)
            .min(self.bucket_cap())
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
/// partitions; and no more partitions than `affordable_partitions`, whose first buckets
/// are all held at once.
pub fn group_buckets(buckets: Vec<Bucket>, options: &BucketOptions) -> Vec<Vec<Bucket>> {
    let most = options.affordable_partitions() as usize;
    let groups = group_small_buckets(buckets, options);
    if groups.len() <= most {
        return groups;
    }
    // Contiguous runs balanced by bytes: a bucket goes to the partition its middle byte
    // falls in, in the scan's byte order.
    let buckets: Vec<Bucket> = groups.into_iter().flatten().collect();
    let total: u128 = buckets.iter().map(|b| b.bytes as u128).sum::<u128>().max(1);
    let mut partitions: Vec<Vec<Bucket>> = vec![Vec::new(); most];
    let mut before: u128 = 0;
    for bucket in buckets {
        let middle = before + bucket.bytes as u128 / 2;
        before += bucket.bytes as u128;
        let index = ((middle * most as u128) / total).min(most as u128 - 1) as usize;
        partitions[index].push(bucket);
    }
    partitions.retain(|p| !p.is_empty());
    partitions
}

/// A partition's buckets in consecutive runs of at most `bytes` each (a bigger bucket runs
/// alone): what an executor that fetches before it computes holds at once per run.
pub fn runs_within(buckets: &[Bucket], bytes: u64) -> Vec<Vec<Bucket>> {
    let mut runs: Vec<Vec<Bucket>> = Vec::new();
    let mut held = 0;
    for bucket in buckets {
        match runs.last_mut() {
            Some(run) if held + bucket.bytes <= bytes => {
                held += bucket.bytes;
                run.push(bucket.clone());
            }
            _ => {
                held = bucket.bytes;
                runs.push(vec![bucket.clone()]);
            }
        }
    }
    runs
}

fn group_small_buckets(buckets: Vec<Bucket>, options: &BucketOptions) -> Vec<Vec<Bucket>> {
    let total: u64 = buckets.iter().map(|b| b.bytes).sum();
    runs_within(&buckets, options.target_bytes(total))
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
    fn a_small_file_is_split_for_every_thread_down_to_a_quarter_mebibyte_each() {
        // 6 MiB over 2 threads: a bucket each, though both are under MIN_BUCKET_BYTES.
        let files = [file(0, &[MIB; 6])];
        let buckets = plan_buckets(&files, &BucketOptions::for_threads(2));
        assert_eq!(buckets.len(), 2);
        assert!(buckets.iter().all(|b| b.bytes == 3 * MIB));
        // 1.1 MiB in 23 row groups (ClickBench's AdvEngineID) over 2 threads: two buckets
        // of about half each, not one of 22 row groups and one of 1.
        let compact = [file(0, &[50 * KIB; 23])];
        let buckets = plan_buckets(&compact, &BucketOptions::for_threads(2));
        let sizes: Vec<usize> = buckets.iter().map(|b| b.row_groups.len()).collect();
        assert!(sizes.iter().all(|&n| n >= 10), "{sizes:?}");
        // 6 MiB in 24 row groups over 32 threads: a bucket per row group, none smaller.
        assert_eq!(
            plan_buckets(&[file(0, &[MIB / 4; 24])], &BucketOptions::for_threads(32)).len(),
            24
        );
        // Under a quarter mebibyte in all it stays whole.
        let tiny = [file(0, &[MIB / 32; 6])];
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
    fn a_memory_limit_shrinks_buckets_and_caps_partitions() {
        // SF 1 lineitem: 61 row groups of ~3.7 MiB.
        let files = [file(0, &[3_800 * KIB; 61])];
        let free = BucketOptions::for_threads(2);
        let unlimited = plan_buckets(&files, &free);
        // Four buckets of ~56 MiB and the rest, in four partitions: twice the threads.
        assert!(unlimited.iter().filter(|b| b.bytes > 50 * MIB).count() == 4);
        assert_eq!(unlimited.len(), 5);
        assert_eq!(group_buckets(unlimited.clone(), &free).len(), 4);
        // Under 256 MB a quarter (64 MB) is for fetched buckets: 16 MB each, 4 partitions.
        let limited = free.within_memory_limit(Some(256_000_000));
        assert_eq!(limited.affordable_partitions(), 4);
        let buckets = plan_buckets(&files, &limited);
        assert!(buckets.iter().all(|b| b.bytes <= 16 * MIB), "{buckets:?}");
        let partitions = group_buckets(buckets.clone(), &limited);
        assert_eq!(partitions.len(), 4);
        let biggest = partitions
            .iter()
            .map(|p| p.iter().map(|b| b.bytes).max().unwrap())
            .sum::<u64>();
        assert!(biggest <= 64_000_000, "{biggest}");
        // Every bucket once, in order; each partition within a bucket of its fair share.
        let flat: Vec<Bucket> = partitions.iter().flatten().cloned().collect();
        assert_eq!(flat, buckets);
        let loads: Vec<u64> = partitions
            .iter()
            .map(|p| p.iter().map(|b| b.bytes).sum())
            .collect();
        let spread = loads.iter().max().unwrap() - loads.iter().min().unwrap();
        assert!(spread <= 2 * 16 * MIB, "{loads:?}");
        // Under 128 MB two partitions of 16 MB buckets; under 64 MB, one.
        for (limit, partitions) in [(128_000_000, 2), (64_000_000, 1)] {
            let limited = free.within_memory_limit(Some(limit));
            let buckets = plan_buckets(&files, &limited);
            assert!(buckets.iter().all(|b| b.bytes <= 16 * MIB), "{buckets:?}");
            assert_eq!(
                group_buckets(buckets, &limited).len(),
                partitions,
                "{limit}"
            );
        }
        // A generous limit changes nothing.
        let roomy = free.within_memory_limit(Some(20 << 30));
        assert_eq!(plan_buckets(&files, &roomy), unlimited);
    }

    /// A bucket of each size in MiB, file `i` for the `i`th.
    fn one_per_file(sizes: &[u64]) -> Vec<Bucket> {
        (sizes.iter().enumerate())
            .map(|(i, &mb)| Bucket {
                file: i,
                row_groups: vec![0],
                bytes: mb * MIB,
            })
            .collect()
    }

    #[test]
    fn a_partition_runs_in_pieces_within_a_cap() {
        let buckets = one_per_file(&[30, 30, 30, 200, 10, 10]);
        let runs = runs_within(&buckets, 64 * MIB);
        let files: Vec<Vec<usize>> = runs
            .iter()
            .map(|run| run.iter().map(|b| b.file).collect())
            .collect();
        assert_eq!(files, vec![vec![0, 1], vec![2], vec![3], vec![4, 5]]);
        assert!(runs_within(&[], 64 * MIB).is_empty());
    }

    #[test]
    fn workers_get_balanced_shares() {
        let buckets = one_per_file(&[90, 10, 40, 40, 30, 30, 20]);
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
