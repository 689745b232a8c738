//! Exchange stages: a hash join whose two sides are fragments, with the per-partition
//! operators above it, run in two waves (as Lambada does). The first wave's workers run a
//! side's fragment and hash its rows on the join keys into one part per join partition
//! (`split_side`, `hash_parts`); the second wave's each read their partition's parts of
//! both sides and run the join and what is above it (`over_parts`). Both sides hash with
//! DataFusion's repartitioning (one fixed seed), so equal keys meet in the same partition
//! in any process. Which joins become stages, and the plans each wave runs, are here;
//! waves, objects and their cleanup are the runner's (`exec::FragmentRunner::exchange`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::Time;
use datafusion::physical_plan::repartition::{BatchPartitioner, RepartitionExec};
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan, Partitioning};

use super::codec::{encode, travelling_bytes};
use super::cut::{is_fragment, is_per_partition, probe_input};
use super::join::{below_exchange, keeps_one_side, partitionable, reduces_rows, rejoin};
use super::Fragment;

/// A join run through an exchange, with the per-partition operators above it.
pub struct ExchangeStage {
    /// The stage's top as planned; its output takes its place.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The join's build side, then its probe side.
    pub sides: [ExchangeSide; 2],
}

/// One side of an exchanged join: a fragment and the keys its rows are hashed on.
pub struct ExchangeSide {
    pub fragment: Fragment,
    keys: Vec<Arc<dyn PhysicalExpr>>,
}

impl ExchangeSide {
    /// What a first-wave worker runs: the fragment with an empty scan (as
    /// `Fragment::template`) under a hash repartition into `parts` (see `split_side`).
    pub fn template(&self, parts: usize) -> Result<Vec<u8>> {
        let hashed = RepartitionExec::try_new(
            self.fragment.template_plan()?,
            Partitioning::Hash(self.keys.clone(), parts.max(1)),
        )?;
        encode(&(Arc::new(hashed) as Arc<dyn ExecutionPlan>))
    }
}

impl ExchangeStage {
    /// What a second-wave worker runs: the stage with both of the join's inputs empty, to
    /// be filled with one partition's rows (`over_parts`).
    pub fn template(&self) -> Result<Vec<u8>> {
        encode(&over_parts(&self.plan, vec![], vec![])?)
    }
}

/// The stage whose top is `plan`: a chain of per-partition operators down to a hash join
/// whose two sides are fragments (below the exchange the planner put over each). After
/// the broadcast, such a join is one it left: not one that probes alone (left, full, left
/// semi and anti joins), or one whose build side is too big to travel. And the stage must
/// send back less than its sides (`reduces_rows` above the join, or `keeps_one_side`):
/// joined rows held on the coordinator cost it as much memory as the sides would, and the
/// trip through S3 bought nothing (TPC-H Q7, Q9 and Q18 at SF 1 sent back as much or
/// more, after exchanging 100–240 MB).
pub fn stage_of(plan: &Arc<dyn ExecutionPlan>, context: &TaskContext) -> Option<ExchangeStage> {
    let (join, reduced) = stage_join(plan)?;
    if !reduced && !keeps_one_side(join) {
        return None;
    }
    Some(ExchangeStage {
        plan: Arc::clone(plan),
        sides: sides(join, context)?,
    })
}

/// `join`'s build and probe sides, if both are fragments that travel (below the exchange
/// the planner put over each), with the keys each side's rows hash on.
pub fn sides(join: &HashJoinExec, context: &TaskContext) -> Option<[ExchangeSide; 2]> {
    let side = |input: &Arc<dyn ExecutionPlan>, keys: Vec<Arc<dyn PhysicalExpr>>| {
        let fragment = below_exchange(input);
        if !is_fragment(fragment) {
            return None;
        }
        // Encoded once; a fragment whose bytes do not decode (a scalar subquery's value
        // in it) does not travel.
        let bytes = travelling_bytes(fragment, context).ok()?;
        Some(ExchangeSide {
            fragment: Fragment {
                plan: Arc::clone(fragment),
                bytes,
            },
            keys,
        })
    };
    let (left, right) = join
        .on()
        .iter()
        .map(|(left, right)| (Arc::clone(left), Arc::clone(right)))
        .unzip();
    Some([side(join.left(), left)?, side(join.right(), right)?])
}

/// The hash join at the bottom of `plan`'s chain of per-partition operators, and whether
/// an operator of the chain `reduces_rows`.
fn stage_join(plan: &Arc<dyn ExecutionPlan>) -> Option<(&HashJoinExec, bool)> {
    let mut node = plan;
    let mut reduced = false;
    loop {
        if let Some(join) = partitionable(node) {
            return Some((join, reduced));
        }
        if !is_per_partition(node) {
            return None;
        }
        reduced |= reduces_rows(node);
        node = probe_input(node)?.1;
    }
}

/// A first-wave template's fragment and the partitioning its output is hashed into.
pub fn split_side(
    template: &Arc<dyn ExecutionPlan>,
) -> Result<(Arc<dyn ExecutionPlan>, Partitioning)> {
    let repartition = template.downcast_ref::<RepartitionExec>().ok_or_else(|| {
        DataFusionError::Plan("an exchange's fragment is not under a hash repartition".into())
    })?;
    Ok((
        Arc::clone(repartition.input()),
        repartition.partitioning().clone(),
    ))
}

/// A fragment's output rows hashed into `partitioning`'s parts, each one batch (or none).
pub fn hash_parts(
    batches: Vec<RecordBatch>,
    partitioning: &Partitioning,
) -> Result<Vec<Vec<RecordBatch>>> {
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Ok(vec![vec![]; partitioning.partition_count()]);
    };
    let mut parts = vec![vec![]; partitioning.partition_count()];
    let mut partitioner = BatchPartitioner::try_new(partitioning.clone(), Time::new(), 0, 1)?;
    for batch in batches {
        partitioner.partition(batch, |part, rows| {
            parts[part].push(rows);
            Ok(())
        })?;
    }
    parts
        .into_iter()
        .map(|rows| match rows.is_empty() {
            true => Ok(vec![]),
            false => Ok(vec![concat_batches(&schema, &rows)?]),
        })
        .collect()
}

/// A second-wave template over one join partition's rows of each side: the join made
/// anew over them (a fresh one builds its own hash table), the operators above rebuilt.
pub fn over_parts(
    stage: &Arc<dyn ExecutionPlan>,
    build: Vec<RecordBatch>,
    probe: Vec<RecordBatch>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(join) = partitionable(stage) {
        let held = |rows: Vec<RecordBatch>, side: &Arc<dyn ExecutionPlan>| {
            MemorySourceConfig::try_new_exec(&[rows], side.schema(), None)
        };
        let (left, right) = (held(build, join.left())?, held(probe, join.right())?);
        return rejoin(join, left, right, PartitionMode::Partitioned);
    }
    let (index, child) = probe_input(stage)
        .ok_or_else(|| DataFusionError::Internal("an exchange stage without its join".into()))?;
    let mut children: Vec<_> = stage.children().into_iter().cloned().collect();
    children[index] = over_parts(child, build, probe)?;
    replace_children_if_necessary(Arc::clone(stage), children)
}
