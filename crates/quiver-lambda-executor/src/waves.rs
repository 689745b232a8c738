//! Waves: a fragment's requests invoked at once, each retried when it fails and duplicated
//! when it straggles (`hedge`), every answer awaited even after one fails, so that what the
//! others spilled or wrote is read or deleted, never left behind.

use std::future::Future;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use futures::future::join_all;
use quiver_core::copy::WrittenFile;
use quiver_core::runtime::QuiverRuntime;

use crate::hedge::{Call, Wave};
use crate::model;
use crate::options::LambdaOptions;
use crate::protocol::{
    decode_partitions, describe_buckets, from_base64, Output, WorkerMetrics, WorkerRequest,
    WorkerResponse,
};
use crate::results::Results;
use crate::runner::LambdaRunner;

impl LambdaRunner {
    /// Every request of a wave invoked at once, each answer passed to `then` as it comes;
    /// all are awaited (the first error must not drop the other requests, whose workers
    /// would go on and leave their spills behind).
    async fn wave<T, F, Then>(
        &self,
        function: &str,
        requests: &[WorkerRequest],
        context: &TaskContext,
        then: Then,
    ) -> Vec<Result<T>>
    where
        Then: Fn(WorkerResponse) -> F,
        F: Future<Output = Result<T>>,
    {
        let options = LambdaOptions::of(context.session_config().options());
        let wave = Wave::new(requests.len());
        let (wave, options, then) = (&wave, &options, &then);
        join_all(requests.iter().map(|request| async move {
            let response = self
                .invoke(function, request, options, wave, context)
                .await?;
            then(response).await
        }))
        .await
    }

    /// A request's response: retried when it fails, duplicated when it straggles behind
    /// the other requests of its `wave` (see `hedge`).
    async fn invoke(
        &self,
        function: &str,
        request: &WorkerRequest,
        options: &LambdaOptions,
        wave: &Wave,
        context: &TaskContext,
    ) -> Result<WorkerResponse> {
        let buckets = match request.join.len() {
            0 => describe_buckets(&request.files, &request.buckets),
            _ => format!("join partition {}", request.worker),
        };
        let call = Call::new(&self.invoker, function, request, buckets, context)?;
        let invoked = std::time::Instant::now();
        let (answer, hedged) = call.answer(options.retries, wave, &options.hedge()).await;
        if hedged {
            self.add_metrics(&WorkerMetrics {
                hedged: 1,
                ..WorkerMetrics::default()
            });
        }
        if let (Ok(response), false, false) = (&answer, hedged, call.retried()) {
            let rates = &QuiverRuntime::of(context.session_config())?.rates;
            let round_trip = invoked.elapsed().as_secs_f64();
            model::observe(rates, function, options, response, round_trip);
        }
        answer
    }

    /// Every request's output partitions, in request order. If any request fails, the
    /// outputs others spilled are still read (and so deleted) before the error returns.
    pub(crate) async fn run_all(
        &self,
        function: &str,
        requests: Vec<WorkerRequest>,
        context: &TaskContext,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let results = Results::of(context)?;
        let outputs = self
            .wave(function, &requests, context, |response| {
                self.output_of(response, &results)
            })
            .await;
        let outputs = outputs.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(outputs.into_iter().flatten().collect())
    }

    /// A worker's (or sub-coordinator's) output partitions; a spilled one is read and
    /// deleted.
    async fn output_of(
        &self,
        response: WorkerResponse,
        results: &Results,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let bytes = match response.output {
            Output::Written(_) | Output::Exchanged(_) => {
                return Err(DataFusionError::Internal(
                    "a worker wrote files where a result was expected".into(),
                ))
            }
            Output::Inline(text) => from_base64(&text)?,
            Output::Spilled(key) => results.take(&key).await?.to_vec(),
        };
        self.add_metrics(&response.metrics);
        decode_partitions(&bytes)
    }

    /// The files every request wrote; on any failure, those written so far are deleted.
    pub(crate) async fn write_all(
        &self,
        function: &str,
        requests: Vec<WorkerRequest>,
        context: &TaskContext,
    ) -> Result<Vec<WrittenFile>> {
        let written = |output| match output {
            Output::Written(files) => Ok(files),
            _ => Err(DataFusionError::Internal(
                "a worker returned a result where files were expected".into(),
            )),
        };
        let (written, error) = self.gather(function, requests, context, written).await;
        if let Some(error) = error {
            let paths = written.iter().map(|file| file.path.as_str());
            Results::of(context)?.discard(paths).await;
            return Err(error);
        }
        Ok(written)
    }

    /// What every request left where it ran (files, objects), as `take` finds it in their
    /// outputs, and the first error if any failed: all are awaited, so that the caller
    /// can delete everything that was left, even on failure.
    pub(crate) async fn gather<T>(
        &self,
        function: &str,
        requests: Vec<WorkerRequest>,
        context: &TaskContext,
        take: impl Fn(Output) -> Result<Vec<T>>,
    ) -> (Vec<T>, Option<DataFusionError>) {
        let results = self
            .wave(function, &requests, context, |response| {
                self.add_metrics(&response.metrics);
                std::future::ready(Ok(response.output))
            })
            .await;
        let mut left = Vec::new();
        let mut first_error = None;
        for result in results {
            match result.and_then(&take) {
                Ok(found) => left.extend(found),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        (left, first_error)
    }
}
