//! The Lambda executor's settings, under `lambda.` (`SET lambda.workers = 8`). Each
//! starts from an environment variable, so Terraform sets a deployment's defaults and
//! a query may still change them.

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use quiver_core::source::HedgePolicy;

/// 4 MiB: base64 makes a response a third bigger, and Lambda's limit is 6 MB.
pub const INLINE_BYTES: usize = 4 * 1024 * 1024;

extensions_options! {
    /// Settings under the `lambda.` prefix.
    pub struct LambdaOptions {
        /// Workers per scan; 0 derives them from the bytes to read.
        pub workers: usize, default = 0
        /// Bytes of Parquet one worker reads when the count is derived.
        pub bytes_per_worker: u64, default = 256 * 1024 * 1024
        /// The most workers one scan fans out to.
        pub max_workers: usize, default = 512
        /// Above this many workers, sub-coordinators each invoke up to this many.
        pub tree_threshold: usize, default = 64
        /// Attempts after the first for a failed worker.
        pub retries: usize, default = 2
        /// An attempt with no answer after this many seconds is abandoned and the worker
        /// invoked again (a retry); 0 waits as long as the invoke timeout
        /// (`QUIVER_INVOKE_TIMEOUT_SECS`, 910 s).
        pub attempt_timeout_secs: f64, default = 0.0
        /// A worker still running after this multiple of its wave's median answer time
        /// gets a duplicate invocation; 0 turns duplicates off.
        pub hedge_multiple: f64, default = 3.0
        /// No duplicate before this many milliseconds.
        pub hedge_min_ms: u64, default = 2000
        /// Outputs larger than this go through the result prefix.
        pub inline_bytes: usize, default = INLINE_BYTES
        /// Whether a join of two sides too big to travel runs on the workers through an
        /// exchange under the result prefix; if not, on the coordinator.
        pub exchange_joins: bool, default = true
        /// Where large outputs go: `s3://bucket/prefix/`.
        pub result_prefix: Option<String>, default = None
        /// The worker function's memory in MB, for `EXPLAIN COST` (Terraform sets it).
        pub worker_memory_mb: u64, default = 2048
        /// Parquet one vCPU of a worker decodes and computes per second, for `EXPLAIN COST`
        /// until the function's workers are measured (`model`): TPC-H Q1's columns at
        /// ~188 MB/s on one thread (2026-11-26; 38 on 2026-11-23).
        pub estimate_mb_per_vcpu_second: f64, default = 188.0
        /// Seconds from here to a warm worker's first instruction and from its answer back,
        /// for the `auto` executor's estimate until measured (a round trip to the Lambda API).
        pub estimate_invoke_seconds: f64, default = 0.15
    }
}

impl ConfigExtension for LambdaOptions {
    const PREFIX: &'static str = "lambda";
}

impl LambdaOptions {
    pub fn of(config: &ConfigOptions) -> Self {
        config.extensions.get::<Self>().cloned().unwrap_or_default()
    }

    /// When a worker straggles behind its wave (see `hedge`).
    pub fn hedge(&self) -> HedgePolicy {
        HedgePolicy {
            multiple: self.hedge_multiple,
            floor: std::time::Duration::from_millis(self.hedge_min_ms),
        }
    }

    /// Defaults from the environment (`QUIVER_WORKERS`, `QUIVER_MAX_WORKERS`, ...).
    pub fn from_env() -> Self {
        let mut options = Self::default();
        let pairs = [
            ("QUIVER_WORKERS", "workers"),
            ("QUIVER_BYTES_PER_WORKER", "bytes_per_worker"),
            ("QUIVER_MAX_WORKERS", "max_workers"),
            ("QUIVER_TREE_THRESHOLD", "tree_threshold"),
            ("QUIVER_WORKER_RETRIES", "retries"),
            ("QUIVER_ATTEMPT_TIMEOUT_SECS", "attempt_timeout_secs"),
            ("QUIVER_HEDGE_MULTIPLE", "hedge_multiple"),
            ("QUIVER_HEDGE_MIN_MS", "hedge_min_ms"),
            ("QUIVER_INLINE_BYTES", "inline_bytes"),
            ("QUIVER_RESULT_PREFIX", "result_prefix"),
            ("QUIVER_EXCHANGE_JOINS", "exchange_joins"),
            ("QUIVER_WORKER_MEMORY_MB", "worker_memory_mb"),
        ];
        for (variable, key) in pairs {
            if let Some(value) = std::env::var(variable).ok().filter(|v| !v.is_empty()) {
                if let Err(e) =
                    datafusion::common::config::ExtensionOptions::set(&mut options, key, &value)
                {
                    eprintln!("ignoring {variable}={value}: {e}");
                }
            }
        }
        options
    }

    /// How many workers read `bytes` in `buckets` buckets.
    pub fn worker_count(&self, bytes: u64, buckets: usize) -> usize {
        let wanted = if self.workers > 0 {
            self.workers
        } else {
            bytes.div_ceil(self.bytes_per_worker.max(1)) as usize
        };
        wanted.clamp(1, self.max_workers.max(1)).min(buckets.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_count_follows_bytes_within_bounds() {
        let options = LambdaOptions::default();
        let mib = 1024 * 1024;
        assert_eq!(options.worker_count(10 * mib, 40), 1);
        assert_eq!(options.worker_count(1024 * mib, 40), 4);
        assert_eq!(options.worker_count(1024 * mib, 3), 3);
        assert_eq!(options.worker_count(1024 * 1024 * mib, 100_000), 512);
        let fixed = LambdaOptions {
            workers: 8,
            ..LambdaOptions::default()
        };
        assert_eq!(fixed.worker_count(1, 100), 8);
    }
}
