//! The exchange on Lambda (see `quiver_core::fragment::ExchangeStage`): the workers of both sides
//! of a join each write one object under the result prefix, with a part per join
//! partition; then one worker per join partition reads its part of every object and
//! joins. The coordinator deletes every object once the join wave ends, answered or
//! failed; a duplicate's object is deleted when it loses (`hedge`).
//!
//! Each join worker reads one range of each first-wave object, so a join of W1 workers'
//! objects over P partitions costs W1 × P GETs; Lambada's two-level exchange, which keeps
//! that count down for thousands of workers, is not built.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use futures::future::join_all;
use quiver_core::fragment::{ExchangeSide, ExchangeStage};

use crate::deal::{discard_shipped, request_for, Task};
use crate::options::LambdaOptions;
use crate::protocol::{Exchanged, JoinPartition, Output, Piece, WorkerRequest};
use crate::results::Results;
use crate::runner::LambdaRunner;

impl LambdaRunner {
    /// The stage's output partitions, one per join worker; every object written on the
    /// way is deleted before this returns.
    pub(crate) async fn run_exchange(
        &self,
        stage: &ExchangeStage,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let options = LambdaOptions::of(context.session_config().options());
        // As many join partitions as workers would read both sides.
        let bytes: u64 = stage
            .sides
            .iter()
            .flat_map(|side| side.fragment.buckets())
            .map(|bucket| bucket.bytes)
            .sum();
        let parts = options.worker_count(bytes, usize::MAX);
        let waves = join_all(
            stage
                .sides
                .iter()
                .map(|side| self.hash_side(side, parts, context)),
        )
        .await;
        let mut objects = Vec::new();
        let mut first_error = None;
        for (written, error) in waves {
            objects.push(written);
            if let Some(error) = error {
                first_error.get_or_insert(error);
            }
        }
        let joined = match first_error {
            Some(error) => Err(error),
            None => self.join(stage, &objects, parts, context).await,
        };
        let keys = objects.iter().flatten().map(|object| object.key.as_str());
        Results::of(context)?.discard(keys).await;
        joined
    }

    /// The first wave for one side: the objects its workers wrote, and the first error if
    /// any failed (the objects written are still listed, to be deleted).
    async fn hash_side(
        &self,
        side: &ExchangeSide,
        parts: usize,
        context: &TaskContext,
    ) -> (Vec<Exchanged>, Option<DataFusionError>) {
        if side.fragment.buckets().is_empty() {
            return (vec![], None);
        }
        let template = match side.template(parts) {
            Ok(template) => template,
            Err(e) => return (vec![], Some(e)),
        };
        let requests = self
            .requests(&side.fragment, &template, context, Task::Exchange)
            .await;
        let requests = match requests {
            Ok((_, requests)) => requests,
            Err(e) => return (vec![], Some(e)),
        };
        let shipped = requests.first().and_then(|r| r.fragment_key.clone());
        let written = self
            .gather(
                &self.worker_function,
                requests,
                context,
                |output| match output {
                    Output::Exchanged(object) => Ok(vec![object]),
                    _ => Err(DataFusionError::Internal(
                        "a worker of an exchange returned no parts".into(),
                    )),
                },
            )
            .await;
        discard_shipped(shipped, context).await;
        written
    }

    /// The second wave: one request per join partition with rows on either side.
    async fn join(
        &self,
        stage: &ExchangeStage,
        objects: &[Vec<Exchanged>],
        parts: usize,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let pieces = |side: usize, part: usize| -> Vec<Piece> {
            objects[side]
                .iter()
                .filter_map(|object| {
                    let range = object.parts.get(part).filter(|p| p.rows > 0)?;
                    Some(Piece {
                        key: object.key.clone(),
                        start: range.start,
                        end: range.end,
                    })
                })
                .collect()
        };
        let partitions: Vec<JoinPartition> = (0..parts)
            .map(|part| JoinPartition {
                sides: [pieces(0, part), pieces(1, part)],
            })
            .filter(|partition| partition.sides.iter().any(|side| !side.is_empty()))
            .collect();
        if partitions.is_empty() {
            return Ok(vec![]);
        }
        let base = request_for(&stage.template()?, context).await?;
        let requests = partitions
            .into_iter()
            .enumerate()
            .map(|(worker, partition)| WorkerRequest {
                worker,
                join: vec![partition],
                ..base.clone()
            })
            .collect();
        let outputs = self.run_all(&self.worker_function, requests, context).await;
        discard_shipped(base.fragment_key, context).await;
        outputs
    }
}
