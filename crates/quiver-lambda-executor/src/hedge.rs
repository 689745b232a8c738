//! Stragglers and retries. The requests of a wave (one fragment's workers, invoked at once)
//! are timed; once half of them have answered, one still running after `hedge_multiple`
//! times the wave's median (and at least `hedge_min_ms`) gets a duplicate invocation, and the
//! first answer wins. Workers are idempotent and every attempt writes under keys of its own,
//! so what the loser spilled or wrote is deleted when it answers, by a task that outlives
//! the wait for it. Failed attempts are retried after a backoff with jitter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use futures::future::{select, Either};
use quiver_core::source::{first_success, HedgePolicy};

use crate::invoke::Invoker;
use crate::options::LambdaOptions;
use crate::protocol::{WorkerRequest, WorkerResponse};
use crate::results::Results;

/// The answer times of one wave of requests.
pub struct Wave {
    size: usize,
    started: Instant,
    answered: Mutex<Vec<Duration>>,
}

impl Wave {
    pub fn new(size: usize) -> Self {
        Self {
            size,
            started: Instant::now(),
            answered: Mutex::default(),
        }
    }

    /// One more request of the wave answered, now.
    pub fn record_answer(&self) {
        let elapsed = self.started.elapsed();
        self.answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(elapsed);
    }

    /// How long after the wave's start a request still running is a straggler, once enough
    /// of the wave has answered to know its median.
    pub fn straggler_after(&self, policy: &HedgePolicy) -> Option<Duration> {
        if self.size < 2 {
            return None;
        }
        let mut times = self
            .answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // The wave's median is known once that many have answered: the rest take longer.
        let median_rank = (self.size - 1) / 2;
        if times.len() <= median_rank {
            return None;
        }
        times.sort();
        policy.late(times[median_rank])
    }

    /// Resolves when a request of this wave still running has become a straggler.
    async fn straggling(&self, policy: &HedgePolicy) {
        const POLL: Duration = Duration::from_millis(100);
        loop {
            let wait = match self.straggler_after(policy) {
                Some(after) => match after.checked_sub(self.started.elapsed()) {
                    None | Some(Duration::ZERO) => return,
                    Some(left) => left.min(POLL),
                },
                None => POLL,
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// One request's invocation: retried when it fails, duplicated when it straggles.
#[derive(Clone)]
pub struct Call {
    invoker: Invoker,
    function: String,
    payload: Arc<Vec<u8>>,
    worker: usize,
    query_id: String,
    /// The request's buckets, for the error after the last attempt.
    buckets: String,
    /// An attempt not answered by then is abandoned and retried (`lambda.attempt_timeout_secs`).
    deadline: Option<Duration>,
    /// Set by the first attempt to answer; later ones delete what they produced.
    answered: Arc<AtomicBool>,
    /// Set when an attempt failed and another was made.
    retried: Arc<AtomicBool>,
    leftovers: Results,
}

impl Call {
    pub fn new(
        invoker: &Invoker,
        function: &str,
        request: &WorkerRequest,
        buckets: String,
        context: &TaskContext,
    ) -> Result<Self> {
        let payload = serde_json::to_vec(request)
            .map_err(|e| DataFusionError::Internal(format!("encoding a worker request: {e}")))?;
        Ok(Self {
            invoker: invoker.clone(),
            function: function.to_string(),
            payload: Arc::new(payload),
            worker: request.worker,
            query_id: request.query_id.clone(),
            buckets,
            deadline: Some(LambdaOptions::of(context.session_config().options()))
                .filter(|o| o.attempt_timeout_secs > 0.0)
                .map(|o| Duration::from_secs_f64(o.attempt_timeout_secs)),
            answered: Arc::default(),
            retried: Arc::default(),
            leftovers: Results::of(context)?,
        })
    }

    /// The first answer of this call, with up to `retries` retries; a duplicate is invoked
    /// once the call straggles behind `wave`. Returns whether a duplicate was invoked.
    pub async fn answer(
        &self,
        retries: usize,
        wave: &Wave,
        policy: &HedgePolicy,
    ) -> (Result<WorkerResponse>, bool) {
        let primary = self.spawn(retries);
        let straggling = std::pin::pin!(wave.straggling(policy));
        let (answer, hedged) = match select(primary, straggling).await {
            // (alone, the primary is always the first to answer)
            Either::Left((answer, _)) => (answer.and_then(|a| a.ok_or_else(lost)), false),
            Either::Right(((), primary)) => {
                eprintln!(
                    "quiver: worker {} of query {} is straggling ({:.1} s); invoking a duplicate",
                    self.worker,
                    self.query_id,
                    wave.started.elapsed().as_secs_f64()
                );
                (first_answer(primary, self.spawn(0)).await, true)
            }
        };
        if answer.is_ok() {
            wave.record_answer();
        }
        (answer, hedged)
    }

    /// Whether an attempt failed and was made again.
    pub fn retried(&self) -> bool {
        self.retried.load(Ordering::SeqCst)
    }

    /// Attempts in a task of their own, so that a loser still deletes its output after
    /// nobody waits for it. `None`: another attempt answered first.
    fn spawn(
        &self,
        retries: usize,
    ) -> impl std::future::Future<Output = Result<Option<WorkerResponse>>> + Unpin {
        let call = self.clone();
        let task = tokio::spawn(async move { call.attempts(retries).await });
        Box::pin(async move {
            task.await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        })
    }

    async fn attempts(self, retries: usize) -> Result<Option<WorkerResponse>> {
        let mut last_error = String::new();
        for attempt in 0..=retries {
            if attempt > 0 {
                self.retried.store(true, Ordering::SeqCst);
                eprintln!(
                    "quiver: worker {} of query {} failed ({last_error}); attempt {} of {}",
                    self.worker,
                    self.query_id,
                    attempt + 1,
                    retries + 1
                );
                tokio::time::sleep(backoff(attempt)).await;
            }
            let invoked = self.invoker.invoke(&self.function, self.payload.to_vec());
            let outcome = match self.deadline {
                // Abandoned, not awaited: Lambda cannot cancel it, and what it may still
                // spill is left to the result prefix's expiry.
                Some(deadline) => match tokio::time::timeout(deadline, invoked).await {
                    Ok(answered) => answered.map_err(|e| e.to_string()),
                    Err(_) => Err(format!("no answer within {:.1} s", deadline.as_secs_f64())),
                },
                None => invoked.await.map_err(|e| e.to_string()),
            };
            match outcome {
                Ok(body) => match serde_json::from_slice::<WorkerResponse>(&body) {
                    Ok(response) => return Ok(self.claim(response).await),
                    Err(e) => last_error = format!("malformed response: {e}"),
                },
                Err(e) => last_error = e,
            }
        }
        Err(DataFusionError::Execution(format!(
            "worker {} ({}) failed after {} attempts: {last_error}",
            self.worker,
            self.buckets,
            retries + 1
        )))
    }

    /// The first answer is the call's; a later one's spill or files are deleted.
    async fn claim(&self, response: WorkerResponse) -> Option<WorkerResponse> {
        if !self.answered.swap(true, Ordering::SeqCst) {
            return Some(response);
        }
        self.leftovers.discard_output(&response.output).await;
        None
    }
}

fn lost() -> DataFusionError {
    DataFusionError::Internal("no attempt kept its answer".into())
}

/// The first of two attempts to answer; if one fails, the other's answer (an attempt
/// whose answer another claimed first counts as failed).
async fn first_answer(
    primary: impl std::future::Future<Output = Result<Option<WorkerResponse>>> + Unpin,
    duplicate: impl std::future::Future<Output = Result<Option<WorkerResponse>>> + Unpin,
) -> Result<WorkerResponse> {
    let claimed =
        |attempt: Result<Option<WorkerResponse>>| attempt.and_then(|a| a.ok_or_else(lost));
    let (answer, _) = first_success(
        Box::pin(async move { claimed(primary.await) }),
        Box::pin(async move { claimed(duplicate.await) }),
    )
    .await;
    answer
}

/// 100 ms, 200 ms, … (at most 6.4 s), each scaled by a random factor in [0.5, 1.5) so
/// that workers failing together do not retry together.
fn backoff(attempt: usize) -> Duration {
    let base = Duration::from_millis(100 << attempt.saturating_sub(1).min(6));
    base.mul_f64(0.5 + fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wave(size: usize, answered_ms: &[u64]) -> Wave {
        let wave = Wave::new(size);
        *wave.answered.lock().unwrap() = answered_ms
            .iter()
            .map(|ms| Duration::from_millis(*ms))
            .collect();
        wave
    }

    const POLICY: HedgePolicy = HedgePolicy {
        multiple: 3.0,
        floor: Duration::from_millis(1000),
    };

    #[test]
    fn a_straggler_is_known_once_the_median_has_answered() {
        assert_eq!(wave(4, &[500]).straggler_after(&POLICY), None);
        assert_eq!(
            wave(4, &[500, 900]).straggler_after(&POLICY),
            Some(Duration::from_millis(2700))
        );
        assert_eq!(
            wave(5, &[100, 200, 300]).straggler_after(&POLICY),
            Some(Duration::from_millis(1000)),
            "never before the floor"
        );
        assert_eq!(
            wave(2, &[800]).straggler_after(&POLICY),
            Some(Duration::from_millis(2400))
        );
    }

    #[test]
    fn a_lone_request_or_a_zero_multiple_never_hedges() {
        assert_eq!(wave(1, &[]).straggler_after(&POLICY), None);
        let off = HedgePolicy {
            multiple: 0.0,
            ..POLICY
        };
        assert_eq!(wave(4, &[1, 2, 3]).straggler_after(&off), None);
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        for attempt in 1..10 {
            let base = 100u64 << (attempt - 1).min(6);
            let ms = backoff(attempt).as_millis() as u64;
            assert!(ms >= base / 2 && ms < base * 3 / 2, "{attempt}: {ms}");
        }
    }
}
