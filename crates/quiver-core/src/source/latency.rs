//! How long a remote source's reads have been taking, and so when one is late. A read's
//! time grows with its size, so each is kept as seconds per cost unit (one round trip plus
//! a mebibyte); a read is late past a multiple of the recent 95th percentile for its size,
//! and never before a floor. `crate::tail` hedges the late ones.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// When a read counts as late.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgePolicy {
    /// A multiple of the recent p95 (for the read's size); 0 turns hedging off.
    pub multiple: f64,
    /// Never late before this: hedging a read that is merely slowish costs a GET.
    pub floor: Duration,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        Self {
            multiple: HEDGE_MULTIPLE,
            floor: Duration::from_millis(HEDGE_MIN_MS),
        }
    }
}

/// 3x the recent p95: a read that slow is, on S3, most likely on a stalled connection
/// (Starling hedges at a similar multiple of the expected time).
pub const HEDGE_MULTIPLE: f64 = 3.0;

/// 1 s: many times S3's usual first-byte latency (tens of ms), so that healthy reads are
/// not duplicated on a busy machine, while a stall (seconds to minutes) is cut short.
pub const HEDGE_MIN_MS: u64 = 1000;

/// Reads remembered per source: enough for a stable p95, few enough to follow a change.
const WINDOW: usize = 64;

/// No read is late until this many have been timed: before that there is no p95 to trust.
const MIN_SAMPLES: usize = 8;

/// One cost unit: a round trip plus this many bytes.
const BYTES_PER_UNIT: f64 = 1024.0 * 1024.0;

#[derive(Debug, Default)]
pub struct Latencies {
    /// Seconds per cost unit of the latest reads, oldest first.
    recent: Mutex<VecDeque<f64>>,
}

fn cost(bytes: u64) -> f64 {
    1.0 + bytes as f64 / BYTES_PER_UNIT
}

impl Latencies {
    /// A read of `bytes` took `elapsed`.
    pub fn record(&self, elapsed: Duration, bytes: u64) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == WINDOW {
            recent.pop_front();
        }
        recent.push_back(elapsed.as_secs_f64() / cost(bytes));
    }

    /// How long a read of `bytes` may take before it is late; `None` while too few reads
    /// have been timed, or with hedging off.
    pub fn late_after(&self, bytes: u64, policy: &HedgePolicy) -> Option<Duration> {
        if policy.multiple.is_nan() || policy.multiple <= 0.0 {
            return None;
        }
        let mut recent: Vec<f64> = self
            .recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect();
        if recent.len() < MIN_SAMPLES {
            return None;
        }
        recent.sort_by(f64::total_cmp);
        let p95 = recent[(recent.len() * 95 / 100).min(recent.len() - 1)];
        let late = Duration::try_from_secs_f64(p95 * policy.multiple * cost(bytes)).ok()?;
        Some(late.max(policy.floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: HedgePolicy = HedgePolicy {
        multiple: 3.0,
        floor: Duration::from_millis(100),
    };

    /// Milliseconds, rounded to a microsecond (the arithmetic is in floating point).
    fn ms(late: Option<Duration>) -> Option<f64> {
        late.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3)
    }

    fn timed(reads: usize, each: Duration, bytes: u64) -> Latencies {
        let latencies = Latencies::default();
        for _ in 0..reads {
            latencies.record(each, bytes);
        }
        latencies
    }

    #[test]
    fn nothing_is_late_before_enough_reads_are_timed() {
        let latencies = timed(MIN_SAMPLES - 1, Duration::from_millis(50), 0);
        assert_eq!(latencies.late_after(0, &POLICY), None);
        latencies.record(Duration::from_millis(50), 0);
        assert_eq!(ms(latencies.late_after(0, &POLICY)), Some(150.0));
    }

    #[test]
    fn a_larger_read_may_take_longer_and_none_is_late_before_the_floor() {
        // 100 ms for a round trip plus 1 MiB: 50 ms per unit.
        let latencies = timed(20, Duration::from_millis(100), 1 << 20);
        assert_eq!(ms(latencies.late_after(0, &POLICY)), Some(150.0));
        assert_eq!(
            ms(latencies.late_after(15 << 20, &POLICY)),
            Some(150.0 * 16.0)
        );
        let fast = timed(20, Duration::from_millis(1), 0);
        assert_eq!(fast.late_after(0, &POLICY), Some(POLICY.floor));
    }

    #[test]
    fn the_p95_ignores_a_few_slow_reads_and_hedging_can_be_off() {
        let latencies = timed(97, Duration::from_millis(10), 0);
        for _ in 0..3 {
            latencies.record(Duration::from_secs(15), 0);
        }
        // the window keeps the last 64: 61 fast, 3 slow; the p95 is a fast one
        let late = latencies.late_after(0, &POLICY).unwrap();
        assert_eq!(late, POLICY.floor, "{late:?}");
        let off = HedgePolicy {
            multiple: 0.0,
            ..POLICY
        };
        assert_eq!(latencies.late_after(0, &off), None);
    }
}
