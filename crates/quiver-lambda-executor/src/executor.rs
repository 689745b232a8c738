//! The Lambda executor: each fragment's buckets are dealt to workers balanced by bytes
//! (`deal`), every worker is invoked at once (`waves`), failed ones are retried and
//! stragglers duplicated (`hedge`), and their outputs come back as the fragment's
//! partitions. Above the tree threshold, sub-coordinators each invoke a group of workers and
//! merge their partial states first (`tree`); joins of two big sides run through an
//! exchange (`exchange`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use quiver_core::copy::{CopyTarget, WrittenFile};
use quiver_core::cost::{PlannedReads, WorkerCost};
use quiver_core::exec::FragmentRunner;
use quiver_core::fragment::{ExchangeStage, Fragment};
use quiver_core::options::QuiverOptions;
use quiver_core::rates::MeasuredRates;

use crate::deal::{discard_shipped, request_room, Task};
use crate::model::WorkerModel;
use crate::options::LambdaOptions;

pub use crate::runner::LambdaRunner;

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
        reads: &PlannedReads,
        config: &ConfigOptions,
        measured: &MeasuredRates,
    ) -> WorkerCost {
        if reads.buckets == 0 {
            return WorkerCost::default();
        }
        let options = LambdaOptions::of(config);
        // Counted as `requests` counts them, from the buckets' planned bytes.
        let workers = options.worker_count(reads.planned_bytes, reads.buckets as usize);
        let model = WorkerModel::of(&options, &self.worker_function, measured);
        WorkerCost {
            workers: workers as u64,
            gb_seconds: model.gb_seconds(reads.bytes, workers),
            seconds: model.seconds(reads.bytes, workers),
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
        let template = fragment.template()?;
        let (via, requests) = self
            .requests(fragment, &template, context, Task::Return)
            .await?;
        let function = via.unwrap_or(&self.worker_function);
        let shipped = requests.first().and_then(|r| r.fragment_key.clone());
        let outputs = self.run_all(function, requests, context).await;
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
                let written = self.write_all(function, requests, context).await;
                discard_shipped(shipped, context).await;
                written
            }
            Err(e) => Err(e),
        })
    }
}
