//! The coordinator's side of fragment execution, and the only part of `exec` that
//! recurses: joins' build sides that fit are computed first (as whole plans of their own)
//! and travel with their probe sides (`broadcast`), joins of two scans left over run
//! through the runner's exchange if it has one (`exchange`), every fragment travels as
//! bytes to the runner, and the rest of the plan runs here over their outputs, held in
//! memory.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::{collect, replace_children_if_necessary, ExecutionPlan};
use futures::future::{try_join_all, BoxFuture};

use super::broadcast::broadcast_joins;
use super::exchange::exchange_joins;
use super::FragmentRunner;
use crate::fragment::{held_output, is_fragment, travelling_bytes, Fragment};
use crate::scan::BucketScanExec;

/// Runs `plan` the way the browser and Lambda do (see the module's comment). Fragments
/// run concurrently (the two sides of a join left here fan out at once).
pub async fn execute_with_fragments(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    runner: &dyn FragmentRunner,
) -> Result<Vec<RecordBatch>> {
    let plan = with_build_sides(plan, &context, runner).await?;
    let plan = exchange_joins(plan, &context, runner).await?;
    let mut found = Vec::new();
    travelling_fragments(&plan, &context, &mut found)?;
    let outputs = try_join_all(found.iter().map(|f| runner.run(f, &context))).await?;
    let coordinator = substitute(plan, &found, &outputs)?;
    merge(coordinator, context).await
}

/// `plan` with the build side of every join that can run where its probe side is read
/// computed (each as a plan of its own, by this coordinator) and moved into its probe
/// side's fragment (see `broadcast`).
pub fn with_build_sides<'a>(
    plan: Arc<dyn ExecutionPlan>,
    context: &'a Arc<TaskContext>,
    runner: &'a dyn FragmentRunner,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    let compute = move |build: Arc<dyn ExecutionPlan>| -> BoxFuture<'a, Result<Vec<RecordBatch>>> {
        Box::pin(execute_with_fragments(build, Arc::clone(context), runner))
    };
    broadcast_joins(plan, context, runner, Arc::new(compute))
}

/// The coordinator's part of a plan, over the fragments' outputs in memory.
#[cfg(not(target_arch = "wasm32"))]
async fn merge(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Vec<RecordBatch>> {
    collect(plan, context).await
}

/// In the browser no tokio runtime drives the event loop, and DataFusion's exchanges spawn
/// tokio tasks; with every input already in memory, a current-thread runtime runs this part
/// to its end without waiting on anything outside it. It runs on a compute thread (the
/// engine's own in the single-thread build), so the engine's event loop stays free for
/// progress and cancel, and a cancel stops it.
#[cfg(target_arch = "wasm32")]
async fn merge(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Vec<RecordBatch>> {
    let pool = super::ComputePool::for_target(1)?;
    pool.start_async(move |cancelled| async move {
        collect(super::cancel::checked(plan, &cancelled)?, context).await
    })
    .await
}

/// The fragments of `plan` that travel, outermost first.
pub fn travelling_fragments(
    plan: &Arc<dyn ExecutionPlan>,
    context: &TaskContext,
    found: &mut Vec<Fragment>,
) -> Result<()> {
    if is_fragment(plan) {
        // A fragment whose expressions depend on something above it (a scalar subquery's
        // value) does not travel; a bare scan always does, so cut lower instead.
        match travelling_bytes(plan, context) {
            Ok(bytes) => {
                found.push(Fragment {
                    plan: Arc::clone(plan),
                    bytes,
                });
                return Ok(());
            }
            Err(error) if plan.downcast_ref::<BucketScanExec>().is_some() => return Err(error),
            Err(_) => {}
        }
    }
    for child in plan.children() {
        travelling_fragments(child, context, found)?;
    }
    Ok(())
}

/// `plan` with each fragment replaced by its output, held in memory.
fn substitute(
    plan: Arc<dyn ExecutionPlan>,
    fragments: &[Fragment],
    outputs: &[Vec<Vec<RecordBatch>>],
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(i) = fragments.iter().position(|f| Arc::ptr_eq(&f.plan, &plan)) {
        return held_output(&plan, outputs[i].clone());
    }
    let children = plan
        .children()
        .into_iter()
        .map(|child| substitute(Arc::clone(child), fragments, outputs))
        .collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(plan, children)
}
