//! The scan: a leaf of DataFusion's physical plan whose partitions are groups of buckets.
//! It holds only data (files, buckets, projection), so it serialises for a worker as it is.
//! Executing a partition fetches each bucket's planned byte ranges (a few buckets ahead),
//! then decodes them with DataFusion's Parquet reader, which reads from memory; local
//! files are read as the reader asks instead (the page cache is their fetching ahead), so a
//! scan of them holds no bucket whole.
//!
//! work (what travels) → reads (the read plan) → input (a bucket made ready to decode) →
//! reader (the decoder's view of its bytes) → decode (a join's keys given to the decoder
//! where they keep few rows, key_share; with late: every filter given to the decoder where
//! rows are wide beside it) → sieve (dynamic filters on decoded rows, while they
//! pay) → stream (a partition's buckets, under memory admission) → this node.

mod decode;
mod field_ids;
mod input;
mod joins_above;
mod key_share;
mod late;
mod pages;
mod reader;
mod reads;
mod sieve;
mod stream;
mod work;

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Statistics;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{
    conjunction_opt, split_conjunction, EquivalenceProperties, PhysicalExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::future::try_join_all;

use crate::bucket::Bucket;
use crate::metrics::file_name;
use crate::runtime::QuiverRuntime;

pub use field_ids::{field_id, renamed as renamed_by_field_id, stored_field_id, FIELD_ID};
pub use joins_above::{JoinsAboveScans, Probe};
pub use reads::BucketRead;
pub use work::{ManifestCounts, ScanFile, ScanSummary};

/// The scan over buckets. Output partition `i` reads the buckets of `partitions[i]`.
#[derive(Debug, Clone)]
pub struct BucketScanExec {
    /// File columns first, then listing columns (hive, virtual).
    table_schema: SchemaRef,
    file_columns: usize,
    projection: Option<Vec<usize>>,
    files: Arc<Vec<ScanFile>>,
    partitions: Vec<Vec<Bucket>>,
    summary: ScanSummary,
    properties: Arc<PlanProperties>,
    /// Per-partition requests, bytes and cache hits, for EXPLAIN ANALYZE.
    metrics: ExecutionPlanMetricsSet,
    /// What the footers say of the scan's output (row counts, min/max, nulls), for the
    /// planner; unknown for a scan rebuilt from a travelling plan or cut to a share.
    statistics: Arc<Statistics>,
    /// Inputs fetched ahead of execution for a one-partition scan ("fetch, then compute":
    /// the fragment executor fetches outside the compute pool, then decodes on it).
    fetched: Option<Arc<Vec<PartitionedFile>>>,
    /// The dynamic filters pushed into the scan (see `pushdown`), over its output; the
    /// decoder applies those that pay to rows. Not serialised: the operators above apply
    /// them too.
    pushed_filter: Option<Arc<dyn PhysicalExpr>>,
    /// The static predicate of the filter above the scan, over its output: the decoder
    /// applies it only where the projection is wide beside it (`late`). Not serialised.
    pushed_predicate: Option<Arc<dyn PhysicalExpr>>,
    /// How a hash join takes this scan's rows: probed straight away, it has no sieve
    /// (`joins_above`).
    probed: Probe,
}

impl BucketScanExec {
    pub fn try_new(
        table_schema: SchemaRef,
        file_columns: usize,
        projection: Option<Vec<usize>>,
        files: Arc<Vec<ScanFile>>,
        partitions: Vec<Vec<Bucket>>,
        summary: ScanSummary,
    ) -> Result<Self> {
        let projected = match &projection {
            Some(indices) => Arc::new(table_schema.project(indices)?),
            None => Arc::clone(&table_schema),
        };
        // At least one partition, so that operators above always have an input to drain.
        let partitions = if partitions.is_empty() {
            vec![vec![]]
        } else {
            partitions
        };
        let statistics = Arc::new(Statistics::new_unknown(&projected));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(projected),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            table_schema,
            file_columns,
            projection,
            files,
            partitions,
            summary,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            statistics,
            fetched: None,
            pushed_filter: None,
            pushed_predicate: None,
            probed: Probe::Later,
        })
    }

    /// The same scan with what the footers say of its output.
    pub fn with_statistics(mut self, statistics: Statistics) -> Self {
        self.statistics = Arc::new(statistics);
        self
    }

    pub fn table_schema(&self) -> &SchemaRef {
        &self.table_schema
    }
    pub fn file_columns(&self) -> usize {
        self.file_columns
    }
    pub fn projection(&self) -> Option<&Vec<usize>> {
        self.projection.as_ref()
    }
    pub fn files(&self) -> &Arc<Vec<ScanFile>> {
        &self.files
    }
    pub fn partitions(&self) -> &[Vec<Bucket>] {
        &self.partitions
    }
    pub fn summary(&self) -> &ScanSummary {
        &self.summary
    }

    /// The same scan restricted to the given partitions (one worker's share).
    pub fn with_partitions(&self, partitions: Vec<Vec<Bucket>>) -> Result<Self> {
        self.with_work(Arc::clone(&self.files), partitions)
    }

    /// The same scan over other files and buckets (a worker's share of the work).
    pub fn with_work(
        &self,
        files: Arc<Vec<ScanFile>>,
        partitions: Vec<Vec<Bucket>>,
    ) -> Result<Self> {
        if let Some(bad) = partitions.iter().flatten().find(|b| b.file >= files.len()) {
            return Err(DataFusionError::Plan(format!(
                "a bucket names file {} of {}",
                bad.file,
                files.len()
            )));
        }
        let mut scan = Self::try_new(
            Arc::clone(&self.table_schema),
            self.file_columns,
            self.projection.clone(),
            files,
            partitions,
            self.summary.clone(),
        )?;
        scan.pushed_filter = self.pushed_filter.clone();
        scan.pushed_predicate = self.pushed_predicate.clone();
        scan.probed = self.probed;
        Ok(scan)
    }

    /// Fetches the bytes of `buckets` without decoding anything.
    pub async fn fetch(
        &self,
        buckets: &[Bucket],
        runtime: &QuiverRuntime,
    ) -> Result<Vec<PartitionedFile>> {
        try_join_all(
            buckets
                .iter()
                .map(|bucket| self.read_bucket(runtime, bucket, None)),
        )
        .await
    }

    /// This scan as one partition of `buckets`, their bytes already fetched.
    pub fn with_fetched(&self, buckets: Vec<Bucket>, inputs: Vec<PartitionedFile>) -> Result<Self> {
        let mut one = self.with_partitions(vec![buckets])?;
        one.fetched = Some(Arc::new(inputs));
        Ok(one)
    }

    /// A bucket's name on the profile's timeline: its file and row groups.
    pub fn lane(&self, bucket: &Bucket) -> String {
        let file = self
            .files
            .get(bucket.file)
            .map_or("?", |f| file_name(&f.meta.path));
        match (bucket.row_groups.first(), bucket.row_groups.last()) {
            (Some(first), Some(last)) => format!("{file} rg {first}-{last}"),
            _ => file.to_string(),
        }
    }

    /// Partition `partition`'s sieve over the dynamic filters pushed into the scan, after
    /// the static predicate's cheap conjuncts; none where a join probes the scan's rows
    /// straight away (`joins_above`), or when `datafusion.execution.parquet.pushdown_filters`
    /// is off, as the decoder then filters none.
    fn sieve(&self, partition: usize, context: &TaskContext) -> Option<Arc<sieve::Sieve>> {
        if self.probed != Probe::Later
            || !context
                .session_config()
                .options()
                .execution
                .parquet
                .pushdown_filters
        {
            return None;
        }
        let filter = Arc::clone(self.pushed_filter.as_ref()?);
        let schema = self.schema();
        let first = self.pushed_predicate.as_ref().and_then(|predicate| {
            let cheap = split_conjunction(predicate)
                .into_iter()
                .filter(|c| crate::filter_order::is_cheap(c, &schema));
            conjunction_opt(cheap.cloned().collect::<Vec<_>>())
        });
        let dropped = MetricBuilder::new(&self.metrics).counter("rows_sifted", partition);
        Some(Arc::new(sieve::Sieve::new(filter, first, dropped)))
    }

    /// The file that `bucket` reads.
    fn file_of(&self, bucket: &Bucket) -> Result<&ScanFile> {
        self.files.get(bucket.file).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "bucket names file {} of {}",
                bucket.file,
                self.files.len()
            ))
        })
    }
}

/// `held` and the conjuncts of `added` it does not hold yet (the optimizer may push a filter
/// twice), as one conjunction.
fn with_new(
    held: &Option<Arc<dyn PhysicalExpr>>,
    added: Vec<Arc<dyn PhysicalExpr>>,
) -> Option<Arc<dyn PhysicalExpr>> {
    let mut all: Vec<_> = held.iter().flat_map(split_conjunction).cloned().collect();
    for filter in added {
        if !all.iter().any(|a| a == &filter) {
            all.push(filter);
        }
    }
    conjunction_opt(all)
}

impl DisplayAs for BucketScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.summary;
        let buckets: usize = self.partitions.iter().map(Vec::len).sum();
        write!(f, "BucketScanExec: ")?;
        if let Some(manifests) = &s.manifests {
            let (read, pruned) = (manifests.read, manifests.pruned);
            write!(f, "manifests={read} (pruned {pruned} by partitions), ")?;
        }
        write!(
            f,
            "files={} (pruned {}, by the index {}), row groups={} (pruned {}), buckets={} in {} partitions, bytes planned={}",
            s.files,
            s.files_pruned,
            s.files_index_pruned,
            s.row_groups,
            s.row_groups_pruned,
            buckets,
            self.partitions.len(),
            s.bytes_planned
        )?;
        let columns: Vec<&str> = match &self.projection {
            Some(p) => p
                .iter()
                .map(|&i| self.table_schema.field(i).name().as_str())
                .collect(),
            None => self
                .table_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect(),
        };
        write!(f, ", columns=[{}]", columns.join(", "))?;
        match &self.pushed_filter {
            Some(filter) => write!(f, ", filter={filter}"),
            None => Ok(()),
        }
    }
}

impl ExecutionPlan for BucketScanExec {
    fn name(&self) -> &'static str {
        "BucketScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        match &self.pushed_filter {
            Some(filter) => f(filter),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    /// Keeps the filters pushed to it, dynamic (the joins' and TopK's) and static (a filter's
    /// predicate, for `late`), and tells the operators above to apply every filter still
    /// (`pushdown`).
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters: Vec<_> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|pushed| pushed.filter)
            .collect();
        let unapplied = vec![PushedDown::No; filters.len()];
        if filters.is_empty() {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                unapplied,
            ));
        }
        let (dynamic, fixed): (Vec<_>, Vec<_>) =
            filters.into_iter().partition(crate::pushdown::is_dynamic);
        let mut scan = self.clone();
        scan.pushed_filter = with_new(&self.pushed_filter, dynamic);
        scan.pushed_predicate = with_new(&self.pushed_predicate, fixed);
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(unapplied)
                .with_updated_node(Arc::new(scan)),
        )
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        match partition {
            None => Ok(Arc::clone(&self.statistics)),
            // Partitions are balanced by bytes, not rows: nothing exact to say of one.
            Some(_) => Ok(Arc::new(Statistics::new_unknown(&self.schema()))),
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let buckets = self.partitions.get(partition).cloned().ok_or_else(|| {
            DataFusionError::Internal(format!("BucketScanExec has no partition {partition}"))
        })?;
        let runtime = QuiverRuntime::of(context.session_config())?;
        let scan = Arc::new(self.clone());
        let sieve = self.sieve(partition, &context);
        let late = Arc::new(late::Late::default());
        let stream = match &self.fetched {
            Some(inputs) => {
                stream::decoding(scan, inputs, buckets.len(), sieve, late, &runtime, context)
            }
            None => stream::fetching(scan, partition, buckets, sieve, late, runtime, context),
        };
        Ok(stream::measured(stream, &self.metrics, partition))
    }
}
