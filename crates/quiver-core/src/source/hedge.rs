//! Hedging: a request still running past the point where it counts as late gets a
//! duplicate, the first answer wins and the other is dropped, which cancels it (Starling's
//! remedy for a GET on a connection that stopped passing bytes, which would otherwise hold
//! its query for seconds to minutes). One policy and one race serve a source's range reads
//! (`Hedged`, here, late by the source's recent latencies) and the Lambda executor's
//! worker invocations (late by their wave's median).

use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{select, Either};
use web_time::Instant;

use super::retry::{sleep, timers_available};
use super::{ObjectMeta, ObjectSource};
use crate::error::{QuiverError, Result};

/// When a request counts as late.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgePolicy {
    /// A multiple of the time a request is expected to take; 0 turns hedging off.
    pub multiple: f64,
    /// Never late before this: duplicating a request that is merely slowish costs one more.
    pub floor: Duration,
}

/// 3x the expected time: a read that slow is, on S3, most likely on a stalled connection
/// (Starling hedges at a similar multiple of the expected time).
pub const HEDGE_MULTIPLE: f64 = 3.0;

/// 1 s: many times S3's usual first-byte latency (tens of ms), so that healthy reads are
/// not duplicated on a busy machine, while a stall (seconds to minutes) is cut short.
pub const HEDGE_MIN_MS: u64 = 1000;

impl Default for HedgePolicy {
    fn default() -> Self {
        Self {
            multiple: HEDGE_MULTIPLE,
            floor: Duration::from_millis(HEDGE_MIN_MS),
        }
    }
}

impl HedgePolicy {
    /// When a request expected to take `expected` is late; `None` with hedging off.
    pub fn late(&self, expected: Duration) -> Option<Duration> {
        if self.multiple.is_nan() || self.multiple <= 0.0 {
            return None;
        }
        let late = Duration::try_from_secs_f64(expected.as_secs_f64() * self.multiple).ok()?;
        Some(late.max(self.floor))
    }
}

/// Which of two racing requests answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Winner {
    First,
    Second,
}

/// How a race of two requests ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish {
    pub winner: Winner,
    /// The other was dropped before it answered (which cancels it).
    pub other_dropped: bool,
}

/// The first of two requests to succeed; when one fails, the other's answer (and when both
/// fail, the error of the one that failed last).
pub async fn first_success<T, E>(
    first: impl Future<Output = std::result::Result<T, E>> + Unpin,
    second: impl Future<Output = std::result::Result<T, E>> + Unpin,
) -> (std::result::Result<T, E>, Finish) {
    let finish = |winner, other_dropped| Finish {
        winner,
        other_dropped,
    };
    match select(first, second).await {
        Either::Left((Ok(answer), _)) => (Ok(answer), finish(Winner::First, true)),
        Either::Right((Ok(answer), _)) => (Ok(answer), finish(Winner::Second, true)),
        Either::Left((Err(_), second)) => (second.await, finish(Winner::Second, false)),
        Either::Right((Err(_), first)) => (first.await, finish(Winner::First, false)),
    }
}

/// What hedging did to one read, for the query's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hedging {
    /// A duplicate was sent.
    pub hedged: bool,
    /// One of the two was dropped unanswered.
    pub abandoned: bool,
}

/// A source whose range reads are hedged when late, by its recent latencies
/// (`ObjectSource::latencies`); a source that keeps none (the disk) is read as it is.
pub struct Hedged<'a> {
    pub source: &'a dyn ObjectSource,
    pub policy: HedgePolicy,
}

impl Hedged<'_> {
    /// The bytes of `range` of `object`, and what hedging did.
    pub async fn get_range(
        &self,
        object: &ObjectMeta,
        range: Range<u64>,
    ) -> (Result<Bytes>, Hedging) {
        if range.start > range.end || range.end > object.size {
            // Never asked of a source (which would allocate it): only a corrupt plan gets here.
            let error = QuiverError::Read {
                path: object.path.clone(),
                start: range.start,
                end: range.end,
                reason: format!("outside the object's {} bytes", object.size),
            };
            return (Err(error), Hedging::default());
        }
        let bytes = range.end - range.start;
        let source = self.source;
        let Some(latencies) = source.latencies() else {
            return (source.get_range(object, range).await, Hedging::default());
        };
        let started = Instant::now();
        let first = Box::pin(source.get_range(object, range.clone()));
        let late = latencies
            .late_after(bytes, &self.policy)
            .filter(|_| timers_available());
        let Some(late) = late else {
            let read = first.await;
            if read.is_ok() {
                latencies.record(started.elapsed(), bytes);
            }
            return (read, Hedging::default());
        };
        let first = match select(first, Box::pin(sleep(late))).await {
            Either::Left((read, _)) => {
                if read.is_ok() {
                    latencies.record(started.elapsed(), bytes);
                }
                return (read, Hedging::default());
            }
            Either::Right(((), first)) => first,
        };
        let hedged = Instant::now();
        let second = Box::pin(source.get_range(object, range));
        let (read, finish) = first_success(first, second).await;
        let outcome = Hedging {
            hedged: true,
            abandoned: finish.other_dropped,
        };
        if finish.other_dropped {
            let took = match finish.winner {
                Winner::First => started.elapsed(),
                Winner::Second => hedged.elapsed(),
            };
            latencies.record(took, bytes);
        }
        (read, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Latencies;
    use async_trait::async_trait;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Reads that take 10 ms, except the ones numbered in `stalled`, which never answer.
    #[derive(Debug, Default)]
    struct Stalling {
        latencies: Latencies,
        reads: AtomicUsize,
        stalled: Vec<usize>,
    }

    #[async_trait]
    impl ObjectSource for Stalling {
        async fn list(&self, _: &str) -> Result<Vec<ObjectMeta>> {
            Ok(vec![])
        }
        async fn head(&self, path: &str) -> Result<ObjectMeta> {
            Err(QuiverError::NotFound { path: path.into() })
        }
        async fn get_range(&self, _: &ObjectMeta, range: Range<u64>) -> Result<Bytes> {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            if self.stalled.contains(&n) {
                futures::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(Bytes::from(vec![7; (range.end - range.start) as usize]))
        }
        fn latencies(&self) -> Option<&Latencies> {
            Some(&self.latencies)
        }
    }

    #[tokio::test]
    async fn a_stalled_read_is_hedged_and_the_duplicate_answers() {
        let source = Stalling {
            stalled: vec![10],
            ..Default::default()
        };
        let object = ObjectMeta {
            path: "s3://b/k".into(),
            size: 100,
            version: "\"1\"".into(),
        };
        let hedged = Hedged {
            source: &source,
            policy: HedgePolicy {
                multiple: 3.0,
                floor: Duration::from_millis(50),
            },
        };
        for _ in 0..10 {
            let (read, outcome) = hedged.get_range(&object, 0..10).await;
            read.unwrap();
            assert_eq!(outcome, Hedging::default());
        }
        let started = Instant::now();
        let (read, outcome) =
            tokio::time::timeout(Duration::from_secs(5), hedged.get_range(&object, 0..10))
                .await
                .expect("the stalled read was not hedged");
        assert_eq!(read.unwrap().len(), 10);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(
            outcome,
            Hedging {
                hedged: true,
                abandoned: true
            }
        );
        assert_eq!(source.reads.load(Ordering::SeqCst), 12);
    }

    #[tokio::test]
    async fn the_first_success_wins_and_a_failure_waits_for_the_other() {
        let ok = |v: u32| Box::pin(async move { Ok::<_, String>(v) });
        let failed = || Box::pin(async { Err::<u32, _>("failed".to_string()) });
        let never = || Box::pin(futures::future::pending::<std::result::Result<u32, String>>());
        let (answer, finish) = first_success(ok(1), never()).await;
        assert_eq!(
            (answer, finish.winner, finish.other_dropped),
            (Ok(1), Winner::First, true)
        );
        let (answer, finish) = first_success(never(), ok(2)).await;
        assert_eq!((answer, finish.winner), (Ok(2), Winner::Second));
        let (answer, finish) = first_success(failed(), ok(2)).await;
        assert_eq!(
            (answer, finish.winner, finish.other_dropped),
            (Ok(2), Winner::Second, false)
        );
        assert_eq!(first_success(ok(1), failed()).await.0, Ok(1));
        assert!(first_success(failed(), failed()).await.0.is_err());
    }

    #[test]
    fn late_is_a_multiple_of_the_expected_time_and_never_before_the_floor() {
        let policy = HedgePolicy {
            multiple: 3.0,
            floor: Duration::from_millis(100),
        };
        assert_eq!(
            policy.late(Duration::from_millis(50)),
            Some(Duration::from_millis(150))
        );
        assert_eq!(
            policy.late(Duration::from_millis(10)),
            Some(Duration::from_millis(100))
        );
        let off = HedgePolicy {
            multiple: 0.0,
            ..policy
        };
        assert_eq!(off.late(Duration::from_secs(1)), None);
    }
}
