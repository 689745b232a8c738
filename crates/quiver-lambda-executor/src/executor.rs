//! The Lambda executor: each fragment's buckets are dealt to workers balanced by bytes,
//! every worker is invoked at once, failed ones are retried, and their outputs come back
//! as the fragment's partitions. Above the tree threshold, sub-coordinators each invoke
//! a group of workers and merge their partial states first (tree invocation).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{collect, ExecutionPlan};
use futures::future::join_all;
use quiver_core::bucket::{assign_to_workers, Bucket};
use quiver_core::copy::{discard, CopyTarget, WrittenFile};
use quiver_core::exec::exchange::ExchangeStage;
use quiver_core::exec::FragmentRunner;
use quiver_core::fragment::{work_for, Fragment};
use quiver_core::options::QuiverOptions;
use quiver_core::runtime::QuiverRuntime;
use quiver_core::scan::ScanFile;

use crate::hedge::{Call, HedgePolicy, Wave};
use crate::invoke::Invoker;
use crate::options::LambdaOptions;
use crate::protocol::{
    decode_partitions, from_base64, Output, WorkerMetrics, WorkerRequest, WorkerResponse,
};
use crate::results::{discard_object, fragment_bytes, ship_fragment, take};

pub struct LambdaRunner {
    invoker: Invoker,
    pub(crate) worker_function: String,
    /// This coordinator's own function, invoked as a sub-coordinator; none from the CLI.
    coordinator_function: Option<String>,
    /// What the workers of the last query did, summed.
    metrics: Mutex<WorkerMetrics>,
}

impl LambdaRunner {
    pub fn new(
        invoker: Invoker,
        worker_function: String,
        coordinator_function: Option<String>,
    ) -> Self {
        Self {
            invoker,
            worker_function,
            coordinator_function,
            metrics: Mutex::default(),
        }
    }

    /// The workers' metrics since the last call, summed.
    pub fn take_metrics(&self) -> WorkerMetrics {
        std::mem::take(&mut *self.metrics.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A request's response: retried when it fails, duplicated when it straggles behind
    /// the other requests of its `wave` (see `hedge`).
    pub(crate) async fn invoke(
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
        let (answer, hedged) = call
            .answer(options.retries, wave, &HedgePolicy::of(options))
            .await;
        if hedged {
            self.add_metrics(&WorkerMetrics {
                hedged: 1,
                ..WorkerMetrics::default()
            });
        }
        answer
    }

    /// A worker's (or sub-coordinator's) output partitions; a spilled one is read and
    /// deleted.
    async fn output_of(
        &self,
        response: WorkerResponse,
        context: &TaskContext,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let bytes = match response.output {
            Output::Written(_) | Output::Exchanged(_) => {
                return Err(DataFusionError::Internal(
                    "a worker wrote files where a result was expected".into(),
                ))
            }
            Output::Inline(text) => from_base64(&text)?,
            Output::Spilled(key) => {
                let runtime = QuiverRuntime::of(context.session_config())?;
                let s3 = QuiverOptions::of(context.session_config().options()).s3();
                take(&runtime, &s3, &key).await?.to_vec()
            }
        };
        self.add_metrics(&response.metrics);
        decode_partitions(&bytes)
    }

    /// Every request's output partitions, in request order. If any request fails, the
    /// outputs others spilled are still read (and so deleted) before the error returns.
    pub(crate) async fn run_all(
        &self,
        function: &str,
        requests: Vec<WorkerRequest>,
        options: &LambdaOptions,
        context: &TaskContext,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        // join_all, not try_join_all: the first error must not drop the other requests,
        // whose workers would go on and leave their spills behind.
        let wave = Wave::new(requests.len());
        let wave = &wave;
        let outputs = join_all(requests.iter().map(|request| async move {
            let response = self
                .invoke(function, request, options, wave, context)
                .await?;
            self.output_of(response, context).await
        }))
        .await;
        let outputs = outputs.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(outputs.into_iter().flatten().collect())
    }

    /// The files every request wrote; on any failure, those written so far are deleted.
    async fn write_all(
        &self,
        function: &str,
        requests: Vec<WorkerRequest>,
        options: &LambdaOptions,
        context: &TaskContext,
    ) -> Result<Vec<WrittenFile>> {
        let (written, error) = self
            .gather(
                function,
                requests,
                options,
                context,
                |output| match output {
                    Output::Written(files) => Ok(files),
                    _ => Err(DataFusionError::Internal(
                        "a worker returned a result where files were expected".into(),
                    )),
                },
            )
            .await;
        if let Some(error) = error {
            let runtime = QuiverRuntime::of(context.session_config())?;
            let s3 = QuiverOptions::of(context.session_config().options()).s3();
            discard(&runtime, &s3, &written).await;
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
        options: &LambdaOptions,
        context: &TaskContext,
        take: impl Fn(Output) -> Result<Vec<T>>,
    ) -> (Vec<T>, Option<DataFusionError>) {
        let wave = Wave::new(requests.len());
        let wave = &wave;
        let results = join_all(requests.iter().map(|request| async move {
            let response = self
                .invoke(function, request, options, wave, context)
                .await?;
            self.add_metrics(&response.metrics);
            Ok::<_, DataFusionError>(response.output)
        }))
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

    fn add_metrics(&self, metrics: &WorkerMetrics) {
        self.metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(metrics);
    }

    /// The requests for one fragment: one per worker, or one per sub-coordinator (with
    /// its workers' shares) above the tree threshold. Workers run `template` (the
    /// fragment's, or an exchange side's, with its empty scan) over their buckets.
    /// A fragment too big for a request is written under the result prefix first
    /// (`fragment_key`); delete it with `discard_object` once the requests are answered.
    pub(crate) async fn requests(
        &self,
        fragment: &Fragment,
        template: &[u8],
        context: &TaskContext,
        task: Task<'_>,
    ) -> Result<(Option<&str>, Vec<WorkerRequest>)> {
        let config = context.session_config().options();
        let options = LambdaOptions::of(config);
        let buckets = fragment.buckets();
        let bytes: u64 = buckets.iter().map(|b| b.bytes).sum();
        let shares = assign_to_workers(&buckets, options.worker_count(bytes, buckets.len()));
        let base = WorkerRequest {
            write: match task {
                Task::Write(target) => Some(target.clone()),
                _ => None,
            },
            exchange: matches!(task, Task::Exchange),
            ..request_for(template, context).await?
        };
        let threshold = options.tree_threshold.max(1);
        let requests = match &self.coordinator_function {
            // An exchange's sides write parts that only workers can; no sub-coordinator.
            Some(coordinator) if shares.len() > threshold && !base.exchange => {
                // Groups of at most `threshold` workers, each behind a sub-coordinator.
                let requests = shares
                    .chunks(threshold)
                    .enumerate()
                    .map(|(i, group)| {
                        let all: Vec<Bucket> = group.iter().flatten().cloned().collect();
                        let (files, renumbered) = fragment.work_for(&all);
                        let mut rest = renumbered.as_slice();
                        let fan_out = group
                            .iter()
                            .map(|share| {
                                let (mine, others) = rest.split_at(share.len());
                                rest = others;
                                mine.to_vec()
                            })
                            .collect();
                        WorkerRequest {
                            worker: i,
                            files,
                            buckets: renumbered,
                            fan_out: Some(fan_out),
                            ..base.clone()
                        }
                    })
                    .collect();
                return Ok((Some(coordinator.as_str()), requests));
            }
            _ => shares
                .iter()
                .enumerate()
                .map(|(i, share)| {
                    let (files, buckets) = fragment.work_for(share);
                    WorkerRequest {
                        worker: i,
                        files,
                        buckets,
                        ..base.clone()
                    }
                })
                .collect(),
        };
        Ok((None, requests))
    }

    /// The sub-coordinator's part of a tree invocation: invoke the workers of
    /// `request.fan_out`, then merge their partial states into one partition.
    pub async fn fan_out(
        &self,
        request: &WorkerRequest,
        shares: &[Vec<Bucket>],
        context: &Arc<TaskContext>,
    ) -> Result<SubResult> {
        let options = LambdaOptions::of(context.session_config().options());
        let requests = shares
            .iter()
            .enumerate()
            .map(|(i, share)| {
                let (files, buckets) = work_for(&request.files, share);
                WorkerRequest {
                    worker: request.worker * options.tree_threshold.max(1) + i,
                    files,
                    buckets,
                    fan_out: None,
                    ..request.clone()
                }
            })
            .collect();
        if request.write.is_some() {
            let written = self
                .write_all(&self.worker_function, requests, &options, context)
                .await?;
            return Ok(SubResult::Written(written));
        }
        let partitions = self
            .run_all(&self.worker_function, requests, &options, context)
            .await?;
        let runtime = QuiverRuntime::of(context.session_config())?;
        let s3 = QuiverOptions::of(context.session_config().options()).s3();
        let bytes = fragment_bytes(&runtime, &s3, request).await?;
        let template = quiver_core::fragment::decode(&bytes, context)?;
        let merged = merge_partial_states(&template, partitions, context).await?;
        Ok(SubResult::Partitions(merged, template.schema()))
    }
}

/// What a fragment's workers do with its output.
pub(crate) enum Task<'a> {
    /// Return it (inline, or through the result prefix).
    Return,
    /// For COPY: write it under the target.
    Write(&'a CopyTarget),
    /// For an exchange's first wave: hash it into parts, written as one object.
    Exchange,
}

/// A request for a new query id running `template`, with the query's settings and
/// limits and no work yet. The template travels inline, or through the result prefix when
/// it is too big for a request (`ship_fragment`).
pub(crate) async fn request_for(template: &[u8], context: &TaskContext) -> Result<WorkerRequest> {
    let config = context.session_config().options();
    let options = LambdaOptions::of(config);
    let query_id = format!("q-{}", quiver_core::source::unique_id());
    let runtime = QuiverRuntime::of(context.session_config())?;
    let (fragment, fragment_key) = ship_fragment(
        &runtime,
        &QuiverOptions::of(config).s3(),
        template,
        request_room(&options),
        options.result_prefix.as_deref(),
        &query_id,
    )
    .await?;
    Ok(WorkerRequest {
        query_id,
        worker: 0,
        fragment,
        fragment_key,
        files: vec![],
        buckets: vec![],
        settings: quiver_settings(config),
        result_prefix: options.result_prefix.clone(),
        inline_limit: options.inline_bytes,
        fan_out: None,
        write: None,
        exchange: false,
        join: vec![],
    })
}

/// What a sub-coordinator gathered from its workers.
pub enum SubResult {
    /// Output partitions (partial states merged) and their schema.
    Partitions(Vec<Vec<RecordBatch>>, SchemaRef),
    /// For COPY: the files its workers wrote.
    Written(Vec<WrittenFile>),
}

#[async_trait::async_trait]
impl FragmentRunner for LambdaRunner {
    /// A build side travels in every worker's request, which Lambda caps at 6 MB, unless
    /// a result prefix lets the fragment travel through S3.
    fn broadcast_limit(&self, config: &ConfigOptions) -> u64 {
        let options = LambdaOptions::of(config);
        let limit = QuiverOptions::of(config).broadcast_bytes;
        match options.result_prefix {
            Some(_) => limit,
            None => limit.min(request_room(&options) as u64),
        }
    }

    /// Exchanges go through the result prefix.
    fn exchanges(&self, config: &ConfigOptions) -> bool {
        let options = LambdaOptions::of(config);
        options.exchange_joins && options.result_prefix.is_some()
    }

    async fn exchange(
        &self,
        stage: &ExchangeStage,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        self.run_exchange(stage, context).await
    }

    fn estimate(
        &self,
        reads: &quiver_core::cost::PlannedReads,
        config: &ConfigOptions,
    ) -> quiver_core::cost::WorkerCost {
        if reads.buckets == 0 {
            return quiver_core::cost::WorkerCost::default();
        }
        let options = LambdaOptions::of(config);
        // Counted as `requests` counts them, from the buckets' planned bytes.
        let workers = options.worker_count(reads.planned_bytes, reads.buckets as usize);
        quiver_core::cost::WorkerCost {
            workers: workers as u64,
            gb_seconds: options.worker_gb_seconds(reads.bytes, workers),
        }
    }

    async fn run(
        &self,
        fragment: &Fragment,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        if fragment.buckets().is_empty() {
            return Ok(vec![]);
        }
        let options = LambdaOptions::of(context.session_config().options());
        let template = fragment.template()?;
        let (via, requests) = self
            .requests(fragment, &template, context, Task::Return)
            .await?;
        let function = via.unwrap_or(&self.worker_function);
        let shipped = requests.first().and_then(|r| r.fragment_key.clone());
        let outputs = self.run_all(function, requests, &options, context).await;
        discard_shipped(shipped, context).await;
        outputs
    }

    async fn write(
        &self,
        fragment: &Fragment,
        target: &CopyTarget,
        context: &Arc<TaskContext>,
    ) -> Option<Result<Vec<WrittenFile>>> {
        if fragment.buckets().is_empty() {
            return Some(Ok(vec![]));
        }
        let options = LambdaOptions::of(context.session_config().options());
        let requests = match fragment.template() {
            Ok(template) => {
                self.requests(fragment, &template, context, Task::Write(target))
                    .await
            }
            Err(e) => Err(e),
        };
        Some(match requests {
            Ok((via, requests)) => {
                let function = via.unwrap_or(&self.worker_function);
                let shipped = requests.first().and_then(|r| r.fragment_key.clone());
                let written = self.write_all(function, requests, &options, context).await;
                discard_shipped(shipped, context).await;
                written
            }
            Err(e) => Err(e),
        })
    }
}

/// The bytes of a fragment a request carries inline: Lambda takes 6 MB per request, and
/// base64 makes the fragment a third bigger.
fn request_room(options: &LambdaOptions) -> usize {
    options.inline_bytes * 3 / 4
}

/// Deletes the fragment `requests` wrote under the result prefix, if it did.
pub(crate) async fn discard_shipped(key: Option<String>, context: &TaskContext) {
    let Some(key) = key else { return };
    if let Ok(runtime) = QuiverRuntime::of(context.session_config()) {
        let s3 = QuiverOptions::of(context.session_config().options()).s3();
        discard_object(&runtime, &s3, &key).await;
    }
}

/// Partial results from many partitions (a worker's buckets, a sub-coordinator's workers),
/// made one: partial aggregate states reduced (DataFusion's `PartialReduce`), sorted runs
/// merged (a TopK's kept to its k rows); other fragments' outputs pass unchanged.
pub async fn merge_partial_states(
    template: &Arc<dyn ExecutionPlan>,
    partitions: Vec<Vec<RecordBatch>>,
    context: &Arc<TaskContext>,
) -> Result<Vec<Vec<RecordBatch>>> {
    if partitions.len() <= 1 {
        return Ok(partitions);
    }
    let input = MemorySourceConfig::try_new_exec(&partitions, template.schema(), None)?;
    match merge_plan(template, input)? {
        Some(merge) => Ok(vec![collect(merge, Arc::clone(context)).await?]),
        None => Ok(partitions),
    }
}

/// The plan that makes `input`'s partitions (outputs of `template`) one, as
/// `merge_partial_states` does; `None` for a fragment whose partitions need no merge.
pub fn merge_plan(
    template: &Arc<dyn ExecutionPlan>,
    input: Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(sort) = template
        .downcast_ref::<SortExec>()
        .filter(|s| s.preserve_partitioning())
    {
        // Each partition is sorted: a merge keeps the order and, with a fetch, the top k.
        let merge =
            SortPreservingMergeExec::new(sort.expr().clone(), input).with_fetch(sort.fetch());
        return Ok(Some(Arc::new(merge)));
    }
    let Some(partial) = template
        .downcast_ref::<AggregateExec>()
        .filter(|a| *a.mode() == AggregateMode::Partial)
    else {
        return Ok(None);
    };
    let reduce = AggregateExec::try_new(
        AggregateMode::PartialReduce,
        partial.group_expr().as_final(),
        partial.aggr_expr().to_vec(),
        vec![None; partial.aggr_expr().len()],
        Arc::new(CoalescePartitionsExec::new(input)),
        partial.input_schema(),
    )?;
    Ok(Some(Arc::new(reduce)))
}

/// The query's `quiver.*` settings, so that workers read as the coordinator planned; all
/// but the memory limit, which is each process's own (a worker's is its function's).
/// DataFusion lists an extension's entries without its prefix (`block_cache_bytes`), so
/// they are taken from the extension and prefixed here; filtering the session's entries by
/// `quiver.` found none, and workers ran on their defaults (their block cache on when a
/// query turned it off).
pub fn quiver_settings(config: &ConfigOptions) -> BTreeMap<String, String> {
    use datafusion::common::config::ExtensionOptions;
    QuiverOptions::of(config)
        .entries()
        .into_iter()
        .filter_map(|entry| {
            let key = entry.key.trim_start_matches('.');
            (key != "memory_limit").then_some(())?;
            Some((format!("quiver.{key}"), entry.value?))
        })
        .collect()
}

/// `s3://b/a.parquet row groups 0-3, s3://b/c.parquet row group 7`, shortened.
pub fn describe_buckets(files: &[ScanFile], buckets: &[Bucket]) -> String {
    let mut parts: Vec<String> = buckets
        .iter()
        .take(3)
        .map(|bucket| {
            let path = files
                .get(bucket.file)
                .map(|f| f.meta.path.as_str())
                .unwrap_or("?");
            match bucket.row_groups.as_slice() {
                [one] => format!("bucket {path} row group {one}"),
                [first, .., last] => format!("bucket {path} row groups {first}-{last}"),
                [] => format!("bucket {path}"),
            }
        })
        .collect();
    if buckets.len() > 3 {
        parts.push(format!("and {} more buckets", buckets.len() - 3));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_the_query_s_quiver_settings() {
        let mut config = ConfigOptions::new();
        config.extensions.insert(QuiverOptions::default());
        config.set("quiver.block_cache_bytes", "0").unwrap();
        config.set("quiver.coalesce_gap", "4096").unwrap();
        config.set("quiver.memory_limit", "2MB").unwrap();
        let settings = quiver_settings(&config);
        // The coordinator's memory limit is its own; a worker has its function's.
        assert!(
            !settings.contains_key("quiver.memory_limit"),
            "{settings:?}"
        );
        assert_eq!(
            settings.get("quiver.block_cache_bytes").map(String::as_str),
            Some("0")
        );
        assert_eq!(
            settings.get("quiver.coalesce_gap").map(String::as_str),
            Some("4096")
        );
        // Each travels back in: a worker's session takes every key it is sent.
        let mut worker = ConfigOptions::new();
        worker.extensions.insert(QuiverOptions::default());
        for (key, value) in &settings {
            worker.set(key, value).unwrap();
        }
        assert_eq!(QuiverOptions::of(&worker).block_cache_bytes, 0);
    }
}
