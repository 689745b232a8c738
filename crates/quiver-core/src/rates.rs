//! What this machine was measured to do, for choosing where a query runs (`exec::place`):
//! per source (an S3 bucket, an HTTP server), the bytes per second its reads delivered while
//! any was in flight and the time of a small read (a footer: latency, not bandwidth); and
//! the bytes of Parquet one thread decodes and computes per second; per Lambda worker
//! function, what one of its workers read per second and an invocation's round trip beyond
//! the worker's own time (`exec::place` never reads these: the Lambda runner's worker
//! model does, through `FragmentRunner::estimate`). Each is a running
//! average over recent queries, kept in memory and, natively, in a small JSON file under the
//! cache folder (`keep_in`) so that the next process starts from what this one saw.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// 50 MB/s: a laptop's share of a home or office line to S3, until one is measured.
pub const ASSUMED_NETWORK_BYTES_PER_SECOND: f64 = 50e6;
/// 30 ms: a GET's first byte from S3 outside its region.
pub const ASSUMED_LATENCY_SECONDS: f64 = 0.03;
/// 188 MB/s: TPC-H Q1's columns on one thread of this machine kind (2026-11-26), the same
/// figure the Lambda worker model starts from (`lambda.estimate_mb_per_vcpu_second`).
pub const ASSUMED_DECODE_BYTES_PER_THREAD_SECOND: f64 = 188e6;

/// The newest sample weighs at least this much: a changed network shows within a few
/// queries, one odd query does not swing the estimate.
const NEWEST_WEIGHT: f64 = 0.25;

/// A running average and how many samples made it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub value: f64,
    pub samples: u64,
}

impl Rate {
    fn add(&mut self, sample: f64) {
        if !sample.is_finite() || sample <= 0.0 {
            return;
        }
        self.samples += 1;
        let weight = (1.0 / self.samples as f64).max(NEWEST_WEIGHT);
        self.value += (sample - self.value) * weight;
    }

    /// The measured value, or `assumed` before any sample.
    pub fn or(&self, assumed: f64) -> f64 {
        if self.samples == 0 {
            assumed
        } else {
            self.value
        }
    }
}

/// What one source's reads delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceRates {
    pub bytes_per_second: Rate,
    pub latency_seconds: Rate,
}

/// Everything measured so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MeasuredRates {
    /// By source key (`s3://bucket`, `https://host`).
    pub sources: BTreeMap<String, SourceRates>,
    pub decode_bytes_per_thread_second: Rate,
    /// By worker function and its memory (`quiver-worker 2048 MB`): a worker's rate
    /// depends on both.
    pub workers: BTreeMap<String, WorkerRates>,
}

impl MeasuredRates {
    pub fn source(&self, key: &str) -> SourceRates {
        self.sources.get(key).copied().unwrap_or_default()
    }

    pub fn worker(&self, key: &str) -> WorkerRates {
        self.workers.get(key).copied().unwrap_or_default()
    }
}

/// What one worker function's workers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerRates {
    /// Bytes one worker fetched per second of its run (after its start).
    pub bytes_per_second: Rate,
    /// An invocation's round trip, less the worker's own time.
    pub invoke_seconds: Rate,
}

/// One worker's answer: the bytes it fetched, the seconds it ran for them, and the seconds
/// from its invocation to its answer beyond those.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WorkerSample {
    pub bytes: u64,
    pub seconds: f64,
    pub invoke_seconds: f64,
}

/// One query's reads of one source: bytes, the seconds any request was in flight, and the
/// median time of its footer reads (small reads: their time is latency).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadSample {
    pub bytes: u64,
    pub busy_seconds: f64,
    pub small_read_seconds: Option<f64>,
}

impl ReadSample {
    /// The sample of a query's requests, each `(start, end, bytes, small)` in seconds:
    /// the seconds any was in flight (overlapping requests count once), and the median
    /// time of the small ones (footers).
    pub fn of(mut requests: Vec<(f64, f64, u64, bool)>) -> Self {
        requests.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut busy, mut reach) = (0.0, f64::MIN);
        for &(start, end, _, _) in &requests {
            busy += (end - start.max(reach)).max(0.0);
            reach = reach.max(end);
        }
        let mut small: Vec<f64> = (requests.iter())
            .filter(|r| r.3)
            .map(|r| r.1 - r.0)
            .collect();
        small.sort_by(f64::total_cmp);
        Self {
            bytes: requests.iter().map(|r| r.2).sum(),
            busy_seconds: busy,
            small_read_seconds: small.get(small.len() / 2).copied(),
        }
    }
}

/// Too little to say anything of a network's bandwidth: a few requests' latency would
/// pass for it.
const MIN_SAMPLE_BYTES: u64 = 4 * 1024 * 1024;

/// Less Parquet than this decodes in the time it takes to start a query: its rate would
/// be mostly start-up.
const MIN_DECODE_BYTES: u64 = 64 * 1024 * 1024;

/// The rates, shared by a process's sessions, and the file that keeps them (if any).
#[derive(Debug, Default)]
pub struct Rates {
    measured: Mutex<MeasuredRates>,
    file: Mutex<Option<std::path::PathBuf>>,
}

impl Rates {
    pub fn now(&self) -> MeasuredRates {
        self.measured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Starts from what `file` holds (nothing, if it is missing or does not read: another
    /// folder's rates are not this one's) and writes every change back to it.
    pub fn keep_in(&self, file: std::path::PathBuf) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let kept = std::fs::read(&file)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<MeasuredRates>(&bytes).ok());
            *self.measured.lock().unwrap_or_else(|p| p.into_inner()) = kept.unwrap_or_default();
        }
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
    }

    /// Adds what a query's reads of `source` delivered.
    pub fn observe_source(&self, source: &str, sample: ReadSample) {
        let bandwidth = sample.bytes >= MIN_SAMPLE_BYTES && sample.busy_seconds > 0.0;
        if !bandwidth && sample.small_read_seconds.is_none() {
            return;
        }
        self.change(|measured| {
            let rates = measured.sources.entry(source.to_string()).or_default();
            if bandwidth {
                (rates.bytes_per_second).add(sample.bytes as f64 / sample.busy_seconds);
            }
            if let Some(seconds) = sample.small_read_seconds {
                rates.latency_seconds.add(seconds);
            }
        });
    }

    /// Adds a query's decode rate: `bytes` of Parquet in `seconds` on `threads` threads.
    pub fn observe_decode(&self, bytes: u64, seconds: f64, threads: usize) {
        if bytes < MIN_DECODE_BYTES || seconds <= 0.0 {
            return;
        }
        let sample = bytes as f64 / seconds / threads.max(1) as f64;
        self.change(|measured| measured.decode_bytes_per_thread_second.add(sample));
    }

    /// Adds what one worker of the function `key` did.
    pub fn observe_worker(&self, key: &str, sample: WorkerSample) {
        let bandwidth = sample.bytes >= MIN_SAMPLE_BYTES && sample.seconds > 0.0;
        self.change(|measured| {
            let rates = measured.workers.entry(key.to_string()).or_default();
            if bandwidth {
                (rates.bytes_per_second).add(sample.bytes as f64 / sample.seconds);
            }
            rates.invoke_seconds.add(sample.invoke_seconds);
        });
    }

    fn change(&self, change: impl FnOnce(&mut MeasuredRates)) {
        let measured = {
            let mut measured = self.measured.lock().unwrap_or_else(|p| p.into_inner());
            change(&mut measured);
            measured.clone()
        };
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(file) = self.file.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            // Written beside and renamed, so that a process reading it never sees half; a
            // failure only loses this sample.
            let staged = file.with_extension(format!("{}.tmp", std::process::id()));
            let written = serde_json::to_vec_pretty(&measured)
                .map_err(std::io::Error::other)
                .and_then(|json| {
                    if let Some(folder) = file.parent() {
                        std::fs::create_dir_all(folder)?;
                    }
                    std::fs::write(&staged, json)
                })
                .and_then(|()| std::fs::rename(&staged, file));
            if written.is_err() {
                let _ = std::fs::remove_file(&staged);
            }
        }
        #[cfg(target_arch = "wasm32")]
        let _ = measured;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sample_is_the_rate_and_later_ones_move_it_by_a_quarter_at_least() {
        let mut rate = Rate::default();
        assert_eq!(rate.or(7.0), 7.0);
        rate.add(100.0);
        assert_eq!(rate.value, 100.0);
        rate.add(200.0); // second sample: weight 1/2
        assert_eq!(rate.value, 150.0);
        rate.add(f64::NAN);
        rate.add(-1.0);
        assert_eq!(rate.samples, 2);
        for _ in 0..40 {
            rate.add(1000.0);
        }
        assert!((rate.value - 1000.0).abs() < 1.0, "{rate:?}");
    }

    #[test]
    fn overlapping_requests_count_their_time_once() {
        let sample = ReadSample::of(vec![
            (0.0, 1.0, 10, false),
            (0.5, 2.0, 10, false),
            (3.0, 3.1, 1, true),
            (3.0, 3.3, 1, true),
            (3.0, 3.2, 1, true),
        ]);
        assert_eq!(sample.bytes, 23);
        assert!((sample.busy_seconds - 2.3).abs() < 1e-9, "{sample:?}");
        assert_eq!(
            sample.small_read_seconds.map(|s| (s * 10.0).round()),
            Some(2.0)
        );
        assert_eq!(ReadSample::of(vec![]), ReadSample::default());
    }

    #[test]
    fn samples_too_small_to_tell_a_bandwidth_leave_it_alone() {
        let rates = Rates::default();
        let tiny = ReadSample {
            bytes: 1000,
            busy_seconds: 0.001,
            small_read_seconds: Some(0.02),
        };
        rates.observe_source("s3://b", tiny);
        let seen = rates.now().source("s3://b");
        assert_eq!(seen.bytes_per_second.samples, 0);
        assert_eq!(seen.latency_seconds.value, 0.02);
        rates.observe_decode(1000, 0.001, 2);
        assert_eq!(rates.now().decode_bytes_per_thread_second.samples, 0);
        rates.observe_decode(400_000_000, 1.0, 2);
        assert_eq!(rates.now().decode_bytes_per_thread_second.value, 2e8);
    }

    #[test]
    fn a_worker_s_bandwidth_needs_a_real_read_its_round_trip_does_not() {
        let rates = Rates::default();
        let key = "quiver-worker 2048 MB";
        let small = WorkerSample {
            bytes: 1000,
            seconds: 0.01,
            invoke_seconds: 0.2,
        };
        rates.observe_worker(key, small);
        let seen = rates.now().worker(key);
        assert_eq!(seen.bytes_per_second.samples, 0);
        assert_eq!(seen.invoke_seconds.value, 0.2);
        let big = WorkerSample {
            bytes: 90_000_000,
            seconds: 1.0,
            invoke_seconds: 0.1,
        };
        rates.observe_worker(key, big);
        let seen = rates.now().worker(key);
        assert_eq!(seen.bytes_per_second.value, 9e7);
        assert!((seen.invoke_seconds.value - 0.15).abs() < 1e-9, "{seen:?}");
        assert_eq!(rates.now().worker("other 1024 MB"), WorkerRates::default());
    }

    #[test]
    fn what_is_measured_is_kept_for_the_next_process() {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("sub").join("rates.json");
        let rates = Rates::default();
        rates.keep_in(file.clone());
        let sample = ReadSample {
            bytes: 100_000_000,
            busy_seconds: 2.0,
            small_read_seconds: None,
        };
        rates.observe_source("s3://b", sample);
        let next = Rates::default();
        next.keep_in(file.clone());
        assert_eq!(next.now().source("s3://b").bytes_per_second.value, 5e7);
        // Moved to a folder with no rates yet, it starts afresh there.
        next.keep_in(folder.path().join("elsewhere.json"));
        assert_eq!(next.now(), MeasuredRates::default());
        // A damaged file is a fresh start, not an error.
        std::fs::write(&file, b"{not json").unwrap();
        let fresh = Rates::default();
        fresh.keep_in(file);
        assert_eq!(fresh.now(), MeasuredRates::default());
    }
}
