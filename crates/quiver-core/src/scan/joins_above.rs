//! Which scans feed a hash join's probe side straight away (through projections, filters,
//! repartitions and batch coalescing only). Their sieve is off: the join looks up every
//! row it is given anyway, and the joins after it see only what it keeps, so sifting the
//! scan's rows first by any join's filter repeats lookups on rows that the first join
//! would have dropped at the same cost (TPC-H Q8 and Q9's lineitem, probed by a join with
//! a few parts: 15-20% slower with the sieve). The sieve pays where rows cross an
//! aggregate or a join's build first (TPC-H Q20's lineitem, aggregated before its join;
//! TPC-DS q72's catalog_sales, the build side of a join that multiplies its rows).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::ExecutionPlan;

use super::BucketScanExec;

/// The rule: every scan learns whether a hash join probes its rows straight away.
#[derive(Debug)]
pub struct JoinsAboveScans;

impl PhysicalOptimizerRule for JoinsAboveScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(marked(plan, Probe::Later)?.data)
    }

    fn name(&self) -> &str {
        "joins_above_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// How a hash join takes a scan's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Probe {
    /// Not straight away: something works on them first (an aggregate, a join's build).
    #[default]
    Later,
    /// The join's probe side is the scan itself (through projections, filters and batch
    /// coalescing).
    Straight,
    /// The same, through a repartition: each row the scan drops is one it does not hash
    /// and copy there.
    Repartitioned,
}

/// `plan` with each scan told how a join probes its rows (`probed`: how the rows of `plan`
/// go into a join's probe).
fn marked(
    plan: Arc<dyn ExecutionPlan>,
    probed: Probe,
) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<BucketScanExec>() {
        if scan.probed == probed {
            return Ok(Transformed::no(plan));
        }
        let mut scan = scan.clone();
        scan.probed = probed;
        return Ok(Transformed::yes(Arc::new(scan)));
    }
    let join = plan.downcast_ref::<HashJoinExec>().is_some();
    let through = passes_rows_through(plan.as_ref());
    let repartition = plan.downcast_ref::<RepartitionExec>().is_some();
    let mut changed = false;
    let mut children = Vec::new();
    for (i, child) in plan.children().into_iter().enumerate() {
        let probed = match probed {
            // A join's probe side is its right input.
            _ if join && i == 1 => Probe::Straight,
            Probe::Straight if repartition => Probe::Repartitioned,
            _ if through => probed,
            _ => Probe::Later,
        };
        let child = marked(Arc::clone(child), probed)?;
        changed |= child.transformed;
        children.push(child.data);
    }
    if !changed {
        return Ok(Transformed::no(plan));
    }
    // Only scans changed, and a scan's properties stay as they were.
    let keep = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
    Ok(Transformed::yes(plan.replace_children(children, keep)?))
}

/// Whether `plan` hands its input's rows on with little work per row.
fn passes_rows_through(plan: &dyn ExecutionPlan) -> bool {
    plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || matches!(
            plan.name(),
            "CoalesceBatchesExec" | "CooperativeExec" | "BufferExec"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::{JoinType, NullEquality};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{col, lit, BinaryExpr};
    use datafusion::physical_expr::Partitioning;
    use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
    use datafusion::physical_plan::joins::PartitionMode;

    fn scan() -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let scan =
            BucketScanExec::try_new(schema, 1, None, Arc::default(), vec![], Default::default());
        Arc::new(scan.unwrap())
    }

    fn join(
        build: Arc<dyn ExecutionPlan>,
        probe: Arc<dyn ExecutionPlan>,
    ) -> Arc<dyn ExecutionPlan> {
        let on = vec![(
            col("k", &build.schema()).unwrap(),
            col("k", &probe.schema()).unwrap(),
        )];
        let join = HashJoinExec::try_new(
            build,
            probe,
            on,
            None,
            &JoinType::Inner,
            Some(vec![0]),
            PartitionMode::CollectLeft,
            NullEquality::NullEqualsNothing,
            false,
        );
        Arc::new(join.unwrap())
    }

    /// The scans' marks, in the order the plan's tree lists them (depth first, left first).
    fn marks(plan: &Arc<dyn ExecutionPlan>) -> Vec<Probe> {
        if let Some(scan) = plan.downcast_ref::<BucketScanExec>() {
            return vec![scan.probed];
        }
        plan.children().into_iter().flat_map(marks).collect()
    }

    fn optimized(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        JoinsAboveScans
            .optimize(plan, &ConfigOptions::new())
            .unwrap()
    }

    #[test]
    fn a_join_probes_its_right_input_straight_through_filters_and_repartitions() {
        let probe = scan();
        let predicate =
            BinaryExpr::new(col("k", &probe.schema()).unwrap(), Operator::Gt, lit(3i64));
        let filtered = Arc::new(FilterExec::try_new(Arc::new(predicate), probe).unwrap());
        let plan = optimized(join(scan(), filtered));
        assert_eq!(marks(&plan), [Probe::Later, Probe::Straight]);

        let hashed = Partitioning::Hash(vec![col("k", &scan().schema()).unwrap()], 2);
        let repartitioned = Arc::new(RepartitionExec::try_new(scan(), hashed).unwrap());
        let plan = optimized(join(scan(), repartitioned));
        assert_eq!(marks(&plan), [Probe::Later, Probe::Repartitioned]);
    }

    #[test]
    fn rows_that_cross_an_aggregate_or_a_build_first_are_probed_later() {
        // The probe side aggregates the scan's rows before the join sees them.
        let input = scan();
        let group =
            PhysicalGroupBy::new_single(vec![(col("k", &input.schema()).unwrap(), "k".into())]);
        let schema = input.schema();
        let aggregate =
            AggregateExec::try_new(AggregateMode::Single, group, vec![], vec![], input, schema);
        let plan = optimized(join(scan(), Arc::new(aggregate.unwrap())));
        assert_eq!(marks(&plan), [Probe::Later, Probe::Later]);

        // A join builds the next one's table: its own probe side is still Straight, and
        // the outer join probes its right scan straight away.
        let inner = join(scan(), scan());
        let plan = optimized(join(inner, scan()));
        assert_eq!(
            marks(&plan),
            [Probe::Later, Probe::Straight, Probe::Straight]
        );
    }

    #[test]
    fn marking_again_changes_nothing() {
        let plan = optimized(join(scan(), scan()));
        let again = JoinsAboveScans
            .optimize(Arc::clone(&plan), &ConfigOptions::new())
            .unwrap();
        assert!(Arc::ptr_eq(&plan, &again), "a marked plan was rebuilt");
    }
}
