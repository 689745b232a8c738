//! How long a remote source's reads have been taking, and so when one is late. A read's
//! time grows with its size, so each is kept as seconds per cost unit (one round trip plus
//! a mebibyte); a read is late past a multiple of the recent 95th percentile for its size,
//! and never before a floor. Until enough reads are timed, a pessimistic guess at S3 stands
//! in for the p95, so that the first reads of a process (a footer, a one-file query's few
//! GETs) are covered too. `hedge` hedges the late ones.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use super::hedge::HedgePolicy;

/// Reads remembered per source: enough for a stable p95, few enough to follow a change.
const WINDOW: usize = 64;

/// Reads timed before the p95 is trusted; until then `COLD_SECONDS_PER_UNIT` stands in.
const MIN_SAMPLES: usize = 8;

/// The p95 assumed of a source not yet timed: 250 ms for a round trip plus a mebibyte, as
/// a slow S3 connection (4 MiB/s; S3 usually answers in tens of ms at tens of MB/s). With
/// the default multiple a footer is late after the cold floor and a 16 MiB read after 13 s.
const COLD_SECONDS_PER_UNIT: f64 = 0.25;

/// Before a source is timed, the floor is doubled: a process's first GETs also pay for its
/// connections (DNS, TLS) and may be slow without being stalled.
const COLD_FLOOR_FACTOR: u32 = 2;

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

    /// How long a read of `bytes` may take before it is late; `None` with hedging off.
    pub fn late_after(&self, bytes: u64, policy: &HedgePolicy) -> Option<Duration> {
        let mut recent: Vec<f64> = self
            .recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect();
        let (p95, floor) = if recent.len() < MIN_SAMPLES {
            (COLD_SECONDS_PER_UNIT, policy.floor * COLD_FLOOR_FACTOR)
        } else {
            recent.sort_by(f64::total_cmp);
            let p95 = recent[(recent.len() * 95 / 100).min(recent.len() - 1)];
            (p95, policy.floor)
        };
        let expected = Duration::try_from_secs_f64(p95 * cost(bytes)).ok()?;
        HedgePolicy { floor, ..*policy }.late(expected)
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
    fn a_source_not_yet_timed_is_judged_by_the_cold_guess() {
        let latencies = timed(MIN_SAMPLES - 1, Duration::from_millis(50), 0);
        // 3 x 250 ms for a round trip; the cold floor (200 ms) is lower
        assert_eq!(ms(latencies.late_after(0, &POLICY)), Some(750.0));
        assert_eq!(ms(latencies.late_after(15 << 20, &POLICY)), Some(12_000.0));
        let tiny = HedgePolicy {
            multiple: 0.1,
            ..POLICY
        };
        assert_eq!(ms(latencies.late_after(0, &tiny)), Some(200.0));
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
