//! The worker: runs one fragment over its buckets on all its vCPUs and returns the
//! output partitions (or, in an exchange, writes them hashed into parts, or joins the
//! parts of one join partition). A worker keeps its session between invocations, so footers and
//! connections stay warm; it holds no other state, so running a request twice gives the
//! same answer (retries are safe).

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::try_join_all;
use futures::TryStreamExt;
use quiver_core::copy::{write_parts, CopyTarget, WrittenFile};
use quiver_core::exec::exchange::{hash_parts, over_parts, split_side};
use quiver_core::exec::run_partitions;
use quiver_core::fragment::{decode, over_buckets};
use quiver_core::options::QuiverOptions;
use quiver_core::source::ObjectMeta;
use quiver_core::{QuiverSession, SessionOptions};
use quiver_lambda_executor::executor::merge_partial_states;
use quiver_lambda_executor::protocol::{
    decode_stream, encode_partitions, partition_ranges, Exchanged, JoinPartition, Output, Part,
    Piece, WorkerMetrics, WorkerRequest, WorkerResponse,
};
use quiver_lambda_executor::results::{deliver, fragment_bytes, result_key};

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
        // An exchange's first wave runs the fragment under its hash repartition.
        let (template, hashing) = match request.exchange {
            true => split_side(&template).map(|(fragment, hashing)| (fragment, Some(hashing)))?,
            false => (template, None),
        };
        let decoded_at = started.elapsed();
        let (partitions, mut exchanged) = match request.join.is_empty() {
            true => {
                let plan = over_buckets(&template, request.files.clone(), request.buckets.clone())?;
                let run = run_partitions(&plan, &context, self.session.pool());
                (futures::executor::block_on(run)?, 0)
            }
            false => futures::executor::block_on(self.join(&template, &request.join, &context))?,
        };
        // One partial per worker: its buckets' aggregate states merged before they travel.
        let partitions = match (&request.write, &hashing) {
            (None, None) => {
                futures::executor::block_on(merge_partial_states(&template, partitions, &context))?
            }
            _ => partitions,
        };
        let ran_at = started.elapsed();
        // Rows returned (or written); an exchange's parts are neither.
        let rows = match hashing {
            Some(_) => 0,
            None => partitions
                .iter()
                .flatten()
                .map(|b| b.num_rows() as u64)
                .sum(),
        };
        let mut returned = 0;
        let output = match (&request.write, hashing) {
            (Some(target), _) => {
                Output::Written(self.write(target, &template.schema(), &partitions)?)
            }
            (None, Some(hashing)) => {
                let parts = hash_parts(partitions.into_iter().flatten().collect(), &hashing)?;
                let object = self.exchange(request, &template.schema(), &parts)?;
                exchanged += object.parts.last().map_or(0, |part| part.end);
                Output::Exchanged(object)
            }
            (None, None) => {
                let bytes = encode_partitions(&template.schema(), &partitions)?;
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
            rows,
            bytes: returned,
            exchanged,
            buckets: request.buckets.len() as u64,
            reads,
        };
        Ok(WorkerResponse { output, metrics })
    }

    /// An exchange's first wave: this worker's parts, written as one object under the
    /// result prefix, named for this attempt (a retry never overwrites an earlier one's).
    fn exchange(
        &self,
        request: &WorkerRequest,
        schema: &SchemaRef,
        parts: &[Vec<RecordBatch>],
    ) -> Result<Exchanged> {
        let prefix = request.result_prefix.as_deref().ok_or_else(|| {
            DataFusionError::Execution("an exchange needs a result prefix".into())
        })?;
        let bytes = encode_partitions(schema, parts)?;
        let ranges = partition_ranges(&bytes)?;
        let key = result_key(prefix, &request.query_id, request.worker);
        let s3 = QuiverOptions::of(self.session.context().state().config_options()).s3();
        let put = self.session.runtime().sources.put(&key, &s3, bytes.into());
        futures::executor::block_on(put)?;
        let parts = ranges
            .into_iter()
            .zip(parts)
            .map(|(range, batches)| Part {
                start: range.start,
                end: range.end,
                rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            })
            .collect();
        Ok(Exchanged { key, parts })
    }

    /// An exchange's second wave: each join partition's pieces read, and the stage run
    /// over them on the worker's threads. Also the bytes read.
    async fn join(
        &self,
        stage: &Arc<dyn ExecutionPlan>,
        partitions: &[JoinPartition],
        context: &Arc<TaskContext>,
    ) -> Result<(Vec<Vec<RecordBatch>>, u64)> {
        let mut outputs = Vec::new();
        let mut read = 0;
        for partition in partitions {
            let [build, probe] = &partition.sides;
            let (build, probe) =
                futures::try_join!(self.read_pieces(build), self.read_pieces(probe))?;
            read += build.1 + probe.1;
            let plan = over_parts(stage, build.0, probe.0)?;
            let context = Arc::clone(context);
            let output = self.session.pool().start(move || {
                let stream = plan.execute(0, context)?;
                futures::executor::block_on(stream.try_collect::<Vec<_>>())
            });
            outputs.push(output.await?);
        }
        Ok((outputs, read))
    }

    /// The rows of an exchange's pieces (each an Arrow IPC stream), and their bytes.
    async fn read_pieces(&self, pieces: &[Piece]) -> Result<(Vec<RecordBatch>, u64)> {
        let runtime = self.session.runtime();
        let s3 = QuiverOptions::of(self.session.context().state().config_options()).s3();
        let s3 = &s3;
        let streams = try_join_all(pieces.iter().map(|piece| async move {
            let object = ObjectMeta {
                path: piece.key.clone(),
                size: piece.end,
                version: String::new(),
            };
            let source = runtime.sources.for_path(&piece.key, s3)?;
            Ok::<_, DataFusionError>(source.get_range(&object, piece.start..piece.end).await?)
        }))
        .await?;
        let bytes = streams.iter().map(|s| s.len() as u64).sum();
        let mut batches = Vec::new();
        for stream in &streams {
            batches.extend(decode_stream(stream)?);
        }
        Ok((batches, bytes))
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
