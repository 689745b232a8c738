//! A cancel that reaches operators which never wait. A merge runs on a compute thread and
//! stops where it next yields; but an operator that emits batch after batch from memory (a
//! cross join over two inputs already collected) never yields, and a cancelled one held its
//! thread for minutes, starving the next query. Every operator's output here passes through
//! a check of the `Cancelled` flag, so the plan ends with an error at its next batch.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

use super::compute::Cancelled;

/// `plan` with every operator's output checked against `cancelled`.
pub fn checked(
    plan: Arc<dyn ExecutionPlan>,
    cancelled: &Cancelled,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(plan
        .transform_up(|node| {
            let wrapped: Arc<dyn ExecutionPlan> = Arc::new(CancelCheckExec {
                properties: Arc::clone(node.properties()),
                input: node,
                cancelled: cancelled.clone(),
            });
            Ok(Transformed::yes(wrapped))
        })?
        .data)
}

/// Its input's batches, or an error once the query is cancelled.
#[derive(Debug)]
struct CancelCheckExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
    cancelled: Cancelled,
}

impl DisplayAs for CancelCheckExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CancelCheckExec")
    }
}

impl ExecutionPlan for CancelCheckExec {
    fn name(&self) -> &'static str {
        "CancelCheckExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("CancelCheckExec takes one input".into()))?;
        Ok(Arc::new(Self {
            properties: Arc::clone(input.properties()),
            input,
            cancelled: self.cancelled.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, context)?;
        let cancelled = self.cancelled.clone();
        let schema = input.schema();
        let checked = futures::stream::poll_fn(move |cx: &mut Context<'_>| {
            if cancelled.is_set() {
                return Poll::Ready(Some(Err(DataFusionError::Execution("cancelled".into()))));
            }
            input.poll_next_unpin(cx)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, checked)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;
    use std::time::Duration;

    use datafusion::prelude::SessionContext;

    use super::*;
    use crate::exec::ComputePool;

    /// A cross join of two in-memory inputs never yields; cancelled, it must still give its
    /// thread back.
    #[test]
    fn a_cancelled_cross_join_gives_its_thread_back() {
        let pool = ComputePool::for_target(1).unwrap();
        let (started, starting) = channel::<()>();
        let answer = pool.start_async(move |cancelled| async move {
            let context = SessionContext::new();
            let sql = "SELECT count(*) FROM generate_series(1, 200000) AS a(i) \
                       CROSS JOIN generate_series(1, 200000) AS b(j) WHERE i + j > 0";
            let plan = context.sql(sql).await?.create_physical_plan().await?;
            let _ = started.send(());
            let plan = checked(plan, &cancelled)?;
            datafusion::physical_plan::collect(plan, context.task_ctx()).await
        });
        starting.recv_timeout(Duration::from_secs(30)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        drop(answer);
        // 4e10 pairs would take hours. Unchecked, the join noticed the cancel after ~10 s
        // (where DataFusion's cooperative budget next made it yield); checked, at once.
        let (done, finished) = channel();
        std::thread::spawn(move || {
            let next = futures::executor::block_on(pool.start(|| Ok(7)));
            let _ = done.send(next.unwrap());
        });
        assert_eq!(finished.recv_timeout(Duration::from_secs(4)), Ok(7));
    }
}
