//! The worker model: how long a fan-out takes and what its workers are billed, from the
//! `lambda.*` settings and from what the function's workers were measured to do. Each
//! answering worker adds a sample (`observe`, kept with the process's other rates), so the
//! assumed rates give way to the deployment's own after its first queries.

use quiver_core::rates::{MeasuredRates, Rates, WorkerRates, WorkerSample};

use crate::options::LambdaOptions;
use crate::protocol::WorkerResponse;

/// Lambda gives a function one vCPU per this many MB of memory.
const MB_PER_VCPU: f64 = 1769.0;
/// ~90 MB/s a worker reads from S3, as Lambada measured, until measured here.
const NETWORK_MB_PER_SECOND: f64 = 90.0;
/// A worker's own start: decoding its request and fragment.
const START_SECONDS: f64 = 0.05;

/// The model of one worker function's fan-outs.
pub struct WorkerModel<'a> {
    options: &'a LambdaOptions,
    measured: WorkerRates,
}

impl<'a> WorkerModel<'a> {
    /// The model of `function`'s workers, from what was measured of them (if anything).
    pub fn of(options: &'a LambdaOptions, function: &str, measured: &MeasuredRates) -> Self {
        Self {
            options,
            measured: measured.worker(&rates_key(function, options)),
        }
    }

    /// What `workers` workers reading `bytes` spend: each is billed for its own time (see
    /// `worker_seconds`) at its memory.
    pub fn gb_seconds(&self, bytes: u64, workers: usize) -> f64 {
        let memory_mb = self.options.worker_memory_mb.max(128) as f64;
        workers as f64 * self.worker_seconds(bytes, workers) * memory_mb / 1024.0
    }

    /// How long a fan-out of `workers` over `bytes` takes from here: the invocations'
    /// round trip, another through sub-coordinators above the tree threshold, and one
    /// worker's time (they run at once).
    pub fn seconds(&self, bytes: u64, workers: usize) -> f64 {
        let hops = if workers > self.options.tree_threshold.max(1) {
            2.0
        } else {
            1.0
        };
        let invoke = (self.measured.invoke_seconds).or(self.options.estimate_invoke_seconds);
        hops * invoke + self.worker_seconds(bytes, workers)
    }

    /// One worker's time on its share of `bytes`: at its measured rate, or else as fast as
    /// the slower of its vCPUs' decoding and its network, after its start.
    fn worker_seconds(&self, bytes: u64, workers: usize) -> f64 {
        let memory_mb = self.options.worker_memory_mb.max(128) as f64;
        let decode =
            self.options.estimate_mb_per_vcpu_second.max(0.001) * (memory_mb / MB_PER_VCPU);
        let assumed = decode.min(NETWORK_MB_PER_SECOND) * 1e6;
        let rate = self.measured.bytes_per_second.or(assumed);
        bytes as f64 / workers.max(1) as f64 / rate + START_SECONDS
    }
}

/// Adds what one worker did to `rates`, from its answer and the `round_trip` seconds it
/// took from here: only a single worker's answer (a sub-coordinator's sums many) and only
/// one invoked once (a retry's or a duplicate's time is not the function's).
pub fn observe(
    rates: &Rates,
    function: &str,
    options: &LambdaOptions,
    response: &WorkerResponse,
    round_trip: f64,
) {
    let metrics = &response.metrics;
    if metrics.invocations != 1 || metrics.sub_coordinators > 0 || metrics.seconds <= 0.0 {
        return;
    }
    let sample = WorkerSample {
        bytes: metrics.reads.bytes_read,
        seconds: (metrics.seconds - START_SECONDS).max(metrics.seconds / 2.0),
        invoke_seconds: round_trip - metrics.seconds,
    };
    rates.observe_worker(&rates_key(function, options), sample);
}

/// The rates' key: a function's workers run as fast as their memory lets them.
fn rates_key(function: &str, options: &LambdaOptions) -> String {
    format!("{function} {} MB", options.worker_memory_mb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Output, WorkerMetrics};

    fn answer(bytes_read: u64, seconds: f64) -> WorkerResponse {
        let mut metrics = WorkerMetrics {
            invocations: 1,
            seconds,
            ..WorkerMetrics::default()
        };
        metrics.reads.bytes_read = bytes_read;
        WorkerResponse {
            output: Output::Inline(String::new()),
            metrics,
        }
    }

    #[test]
    fn measured_workers_replace_the_assumed_rates() {
        let options = LambdaOptions::default();
        let rates = Rates::default();
        let gb = 1_000_000_000;
        let assumed = WorkerModel::of(&options, "worker", &rates.now()).seconds(gb, 1);
        // 90 MB/s (the network, under 2048 MB's decode) after 0.15 s of invoke.
        assert!((assumed - (0.15 + gb as f64 / 90e6 + 0.05)).abs() < 1e-6);
        // A worker that read 100 MB in 2.05 s (2 s after its start), answered in 2.35 s.
        observe(&rates, "worker", &options, &answer(100_000_000, 2.05), 2.35);
        let measured = WorkerModel::of(&options, "worker", &rates.now());
        let expected = 0.3 + gb as f64 / 50e6 + 0.05;
        assert!(
            (measured.seconds(gb, 1) - expected).abs() < 1e-6,
            "{expected}"
        );
        assert!((measured.gb_seconds(gb, 2) - 2.0 * (10.0 + 0.05) * 2.0).abs() < 1e-6);
        // Another function, or the same one with other memory, is still assumed.
        let other = WorkerModel::of(&options, "other", &rates.now()).seconds(gb, 1);
        assert_eq!(other, assumed);
        let bigger = LambdaOptions {
            worker_memory_mb: 4096,
            ..LambdaOptions::default()
        };
        let bigger = WorkerModel::of(&bigger, "worker", &rates.now()).seconds(gb, 1);
        assert_eq!(bigger, assumed);
    }

    #[test]
    fn a_sub_coordinator_s_sums_are_no_worker_s_sample() {
        let options = LambdaOptions::default();
        let rates = Rates::default();
        let mut summed = answer(800_000_000, 16.0);
        summed.metrics.invocations = 8;
        summed.metrics.sub_coordinators = 1;
        observe(&rates, "worker", &options, &summed, 3.0);
        assert_eq!(rates.now(), MeasuredRates::default());
    }
}
