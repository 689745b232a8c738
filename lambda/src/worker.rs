//! The worker: runs one fragment over its buckets on all its vCPUs and returns the
//! output partitions (or, in an exchange, writes them hashed into parts, or joins the
//! parts of one join partition). A worker keeps its session between invocations, so footers and
//! connections stay warm; it holds no other state, so running a request twice gives the
//! same answer (retries are safe).

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::{execute_stream, ExecutionPlan, Partitioning};
use futures::future::try_join_all;
use futures::TryStreamExt;
use quiver_core::bucket::group_buckets;
use quiver_core::copy::{write_parts, CopyTarget, WrittenFile};
use quiver_core::exec::run_partitions;
use quiver_core::fragment::{
    decode, hash_parts, over_buckets, over_partitions, over_parts, split_side,
};
use quiver_core::source::ObjectMeta;
use quiver_core::{QuiverSession, SessionOptions};
use quiver_lambda_executor::protocol::{
    decode_stream, encode_partitions, partition_ranges, Exchanged, JoinPartition, Output, Part,
    Piece, WorkerMetrics, WorkerRequest, WorkerResponse,
};
use quiver_lambda_executor::results::{result_key, Results, Spool};
use quiver_lambda_executor::tree::merge_plan;

pub struct Worker {
    session: QuiverSession,
}

impl Worker {
    pub fn new() -> Result<Self> {
        Ok(Self {
            session: QuiverSession::new(SessionOptions::default())?,
        })
    }

    /// Where the request being run reads and writes outputs (its `settings`, set on the
    /// session, say how to reach them).
    fn results(&self) -> Results {
        Results::new(self.session.runtime())
    }

    /// Runs a request to its response. Blocking: call it off the async threads.
    pub fn run(&self, request: &WorkerRequest) -> Result<WorkerResponse> {
        for (key, value) in &request.settings {
            self.session.set(key, value)?;
        }
        crate::keep_on_disk(&self.session, "worker")?;
        // The statement's pool first: the task context takes the session's pool as it is.
        let metrics = self.session.begin_query()?;
        reset_peak_memory();
        let context = self.session.context().task_ctx();
        let started = Instant::now();
        let fragment = futures::executor::block_on(self.results().fragment_bytes(request))?;
        let template = decode(&fragment, &context)?;
        // An exchange's first wave runs the fragment under its hash repartition.
        let (template, hashing) = match request.exchange {
            true => split_side(&template).map(|(fragment, hashing)| (fragment, Some(hashing)))?,
            false => (template, None),
        };
        let decoded_at = started.elapsed();
        let done = match (request.join.is_empty(), &request.write, hashing) {
            (true, None, None) => self.stream_back(request, &template, &context, started)?,
            (_, _, hashing) => self.collect(request, &template, hashing, &context, started)?,
        };
        let Done {
            output,
            ran_at,
            rows,
            returned,
            exchanged,
        } = done;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let mut reads = metrics.snapshot();
        reads.add_phase("decode", ms(decoded_at));
        reads.add_phase("run", ms(ran_at - decoded_at));
        reads.add_phase("deliver", ms(started.elapsed() - ran_at));
        let memory_gb =
            quiver_core::memory::lambda_memory().unwrap_or(0) as f64 / (1u64 << 30) as f64;
        let metrics = WorkerMetrics {
            sub_coordinators: 0,
            hedged: 0,
            invocations: 1,
            gb_seconds: started.elapsed().as_secs_f64() * memory_gb,
            seconds: started.elapsed().as_secs_f64(),
            peak_memory: peak_memory().unwrap_or(0),
            rows,
            bytes: returned,
            exchanged,
            buckets: request.buckets.len() as u64,
            reads,
        };
        Ok(WorkerResponse { output, metrics })
    }

    /// The fragment over this worker's buckets, returned: see `spool`.
    fn stream_back(
        &self,
        request: &WorkerRequest,
        template: &Arc<dyn ExecutionPlan>,
        context: &Arc<TaskContext>,
        started: Instant,
    ) -> Result<Done> {
        let (spool, rows) = self.spool(request, template, context)?;
        let ran_at = started.elapsed();
        let returned = spool.len();
        let results = self.results();
        let output = spool.deliver(&results, request);
        Ok(Done {
            output: futures::executor::block_on(output)?,
            ran_at,
            rows,
            returned,
            exchanged: 0,
        })
    }

    /// The other requests, whose outputs are collected first: a COPY's share, an
    /// exchange's first wave (hashed into parts), its second (joins of parts).
    fn collect(
        &self,
        request: &WorkerRequest,
        template: &Arc<dyn ExecutionPlan>,
        hashing: Option<Partitioning>,
        context: &Arc<TaskContext>,
        started: Instant,
    ) -> Result<Done> {
        let (partitions, mut exchanged) = match request.join.is_empty() {
            true => {
                let plan = over_buckets(template, request.files.clone(), request.buckets.clone())?;
                let run = run_partitions(&plan, context, self.session.pool());
                (futures::executor::block_on(run)?, 0)
            }
            false => futures::executor::block_on(self.join(template, &request.join, context))?,
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
                // A join's output (the exchange's second wave).
                let bytes = encode_partitions(&template.schema(), &partitions)?;
                returned = bytes.len() as u64;
                futures::executor::block_on(self.results().deliver(request, bytes))?
            }
        };
        Ok(Done {
            output,
            ran_at,
            rows,
            returned,
            exchanged,
        })
    }

    /// The fragment over this worker's buckets, run by DataFusion on the function's
    /// threads, its partitions merged into one (`merge_plan`: partial states reduced, sorted
    /// runs merged) and encoded as they come: a sort spills under the memory limit, and
    /// its output goes to disk past a response's size. The spool and its rows.
    fn spool(
        &self,
        request: &WorkerRequest,
        template: &Arc<dyn ExecutionPlan>,
        context: &Arc<TaskContext>,
    ) -> Result<(Spool, u64)> {
        // The buckets in as many partitions as the memory limit affords, as the planner
        // makes them: one per bucket, all running at once, each held a bucket and left
        // its sort too little room (a 384 MB worker failed SF 1 lineitem's sort).
        let threads = context.session_config().target_partitions();
        let options = (self.session.runtime().query().settings.options)
            .buckets(threads, context.memory_pool().as_ref());
        let partitions = group_buckets(request.buckets.clone(), &options);
        let plan = over_partitions(template, request.files.clone(), partitions)?;
        let plan = match merge_plan(template, Arc::clone(&plan))? {
            Some(merged) => merged,
            None => Arc::new(CoalescePartitionsExec::new(plan)),
        };
        let mut spool = Spool::new(request.inline_limit);
        let stream = execute_stream(plan, Arc::clone(context))?;
        let rows = futures::executor::block_on(spool.write_partition(&template.schema(), stream))?;
        Ok((spool, rows))
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
        futures::executor::block_on(self.results().put(&key, bytes.into()))?;
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
        let results = &self.results();
        let streams = try_join_all(pieces.iter().map(|piece| async move {
            let object = ObjectMeta {
                path: piece.key.clone(),
                size: piece.end,
                version: String::new(),
            };
            results.get_range(&object, piece.start..piece.end).await
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
        let runtime = self.session.runtime();
        let s3 = runtime.query().settings.s3.clone();
        let batches: Vec<RecordBatch> = partitions.iter().flatten().cloned().collect();
        futures::executor::block_on(write_parts(runtime, &s3, &target, schema, &batches))
    }
}

/// Starts the process's peak resident memory again from what it holds now (Linux: 5 to
/// `clear_refs` resets VmHWM), so that a warm worker reports each invocation's own peak.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident memory (VmHWM), as Lambda's "Max Memory Used" counts it.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kilobytes: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kilobytes * 1024)
}

/// What a request's work gave: its output, when the running ended (the rest is delivering),
/// rows and bytes returned, bytes exchanged.
struct Done {
    output: Output,
    ran_at: Duration,
    rows: u64,
    returned: u64,
    exchanged: u64,
}

/// Shared by the worker binary and tests: a worker behind an `Arc`, run off the async
/// threads (its fetches still reach tokio's reactor from there).
pub async fn handle(worker: Arc<Worker>, request: WorkerRequest) -> Result<WorkerResponse> {
    tokio::task::spawn_blocking(move || worker.run(&request))
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
}
