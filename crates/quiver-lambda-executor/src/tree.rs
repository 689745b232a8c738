//! Tree invocation: above the tree threshold, the coordinator invokes sub-coordinators,
//! each of which invokes its group of workers and merges their partial states into one
//! partition before answering (as the Lambada paper starts 1,000 workers in ~2.5 s).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{collect, ExecutionPlan};
use quiver_core::bucket::Bucket;
use quiver_core::copy::WrittenFile;
use quiver_core::fragment::{decode, work_for};

use crate::options::LambdaOptions;
use crate::protocol::WorkerRequest;
use crate::results::Results;
use crate::runner::LambdaRunner;

/// What a sub-coordinator gathered from its workers.
pub enum SubResult {
    /// Output partitions (partial states merged) and their schema.
    Partitions(Vec<Vec<RecordBatch>>, SchemaRef),
    /// For COPY: the files its workers wrote.
    Written(Vec<WrittenFile>),
}

impl LambdaRunner {
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
                .write_all(&self.worker_function, requests, context)
                .await?;
            return Ok(SubResult::Written(written));
        }
        let partitions = (self.run_all(&self.worker_function, requests, context)).await?;
        let bytes = Results::of(context)?.fragment_bytes(request).await?;
        let template = decode(&bytes, context)?;
        let merged = merge_partial_states(&template, partitions, context).await?;
        Ok(SubResult::Partitions(merged, template.schema()))
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
