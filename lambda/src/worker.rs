//! The worker: runs one fragment over its buckets on all its vCPUs and returns the
//! output partitions. A worker keeps its session between invocations, so footers and
//! connections stay warm; it holds no other state, so running a request twice gives the
//! same answer (retries are safe).

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use quiver_core::copy::{write_parts, CopyTarget, WrittenFile};
use quiver_core::exec::run_partitions;
use quiver_core::fragment::{decode, over_buckets};
use quiver_core::options::QuiverOptions;
use quiver_core::{QuiverSession, SessionOptions};
use quiver_lambda_executor::executor::merge_partial_states;
use quiver_lambda_executor::protocol::{
    encode_partitions, Output, WorkerMetrics, WorkerRequest, WorkerResponse,
};
use quiver_lambda_executor::results::{deliver, fragment_bytes};

pub struct Worker {
    session: QuiverSession,
}

impl Worker {
    pub fn new() -> Result<Self> {
        Ok(Self {
            session: QuiverSession::new(SessionOptions::default())?,
        })
    }

    /// Runs a request to its response. Blocking: call it off the async threads.
    pub fn run(&self, request: &WorkerRequest) -> Result<WorkerResponse> {
        for (key, value) in &request.settings {
            self.session.set(key, value)?;
        }
        // The statement's pool first: the task context takes the session's pool as it is.
        let metrics = self.session.begin_query()?;
        let context = self.session.context().task_ctx();
        let started = Instant::now();
        let s3 = QuiverOptions::of(self.session.context().state().config_options()).s3();
        let fragment =
            futures::executor::block_on(fragment_bytes(self.session.runtime(), &s3, request))?;
        let template = decode(&fragment, &context)?;
        let plan = over_buckets(&template, request.files.clone(), request.buckets.clone())?;
        let decoded_at = started.elapsed();
        let partitions =
            futures::executor::block_on(run_partitions(&plan, &context, self.session.pool()))?;
        // One partial per worker: its buckets' aggregate states merged before they travel.
        let partitions = match &request.write {
            Some(_) => partitions,
            None => futures::executor::block_on(merge_partial_states(&plan, partitions, &context))?,
        };
        let ran_at = started.elapsed();
        let mut returned = 0;
        let output = match &request.write {
            Some(target) => Output::Written(self.write(target, &plan.schema(), &partitions)?),
            None => {
                let bytes = encode_partitions(&plan.schema(), &partitions)?;
                returned = bytes.len() as u64;
                futures::executor::block_on(deliver(self.session.runtime(), &s3, request, bytes))?
            }
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let mut reads = metrics.snapshot();
        reads.add_phase("decode", ms(decoded_at));
        reads.add_phase("run", ms(ran_at - decoded_at));
        reads.add_phase("encode", ms(started.elapsed() - ran_at));
        let memory_gb =
            quiver_core::memory::lambda_memory().unwrap_or(0) as f64 / (1u64 << 30) as f64;
        let metrics = WorkerMetrics {
            sub_coordinators: 0,
            hedged: 0,
            invocations: 1,
            gb_seconds: started.elapsed().as_secs_f64() * memory_gb,
            rows: partitions
                .iter()
                .flatten()
                .map(|b| b.num_rows() as u64)
                .sum(),
            bytes: returned,
            buckets: request.buckets.len() as u64,
            reads,
        };
        Ok(WorkerResponse { output, metrics })
    }

    /// COPY's share of this worker: its own files, named for this attempt, so that a
    /// retry never collides with what a failed attempt left (which no manifest lists).
    fn write(
        &self,
        target: &CopyTarget,
        schema: &SchemaRef,
        partitions: &[Vec<RecordBatch>],
    ) -> Result<Vec<WrittenFile>> {
        let target = CopyTarget {
            job: format!("{}-{}", target.job, quiver_core::source::unique_id()),
            ..target.clone()
        };
        let s3 = QuiverOptions::of(self.session.context().state().config_options()).s3();
        let batches: Vec<RecordBatch> = partitions.iter().flatten().cloned().collect();
        futures::executor::block_on(write_parts(
            self.session.runtime(),
            &s3,
            &target,
            schema,
            &batches,
        ))
    }
}

/// Shared by the worker binary and tests: a worker behind an `Arc`, run off the async
/// threads (its fetches still reach tokio's reactor from there).
pub async fn handle(worker: Arc<Worker>, request: WorkerRequest) -> Result<WorkerResponse> {
    tokio::task::spawn_blocking(move || worker.run(&request))
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
}
