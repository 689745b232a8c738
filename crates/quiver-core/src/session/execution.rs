//! Running a planned statement: DataFusion drives the plan on its own threads and the
//! rows stream out, or the plan is cut into fragments that a runner executes (rayon here,
//! Lambda workers remotely) while the coordinator merges their outputs. Also `EXPLAIN
//! COST`: the plan of the last statement, priced without reading a data page.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::{LogicalPlan, SetVariable, Statement as LogicalStatement};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use futures::StreamExt;
use web_time::Instant;

use super::output::{describe_batch, memory_stream, QueryOutput, QueryStream};
use super::partial_skip;
use super::placing::read_from;
use super::repeated_ctes::Decided;
use super::{check_value, QuiverSession};
use crate::cost::{Cost, Prices, WorkerCost};
use crate::error::describe;
use crate::exec::place::Placement;
use crate::exec::{execute_with_fragments, ExecutorKind, FragmentRunner, RayonRunner};
use crate::metrics::MetricsSnapshot;

impl QuiverSession {
    pub(super) async fn run_statement(&self, statement: Statement) -> Result<QueryOutput> {
        self.stream_statement(statement).await?.collect().await
    }

    /// Plans and runs one statement with the session's executor.
    pub(super) async fn stream_statement(&self, statement: Statement) -> Result<QueryStream> {
        let metrics = self.begin_query()?;
        let started = Instant::now();
        let plan = self.logical_plan(statement).await?;
        if let LogicalPlan::Statement(LogicalStatement::SetVariable(set)) = &plan {
            self.check_setting(set)?;
        }
        if let LogicalPlan::DescribeTable(described) = &plan {
            let batch = describe_batch(&described.schema)?;
            return Ok(QueryOutput::of(batch, metrics).into_stream());
        }
        let (decided, computing) = match self.executor_now()? {
            // Rows kept here cannot travel with a fragment.
            ExecutorKind::DataFusion if self.options_now().materialize_ctes => {
                let computing = Instant::now();
                let decided = self.computed_once(plan).await?;
                (decided, computing.elapsed())
            }
            _ => (Decided::as_planned(plan), Duration::ZERO),
        };
        let Decided {
            plan,
            optimized,
            kept,
        } = decided;
        let placed = self.explained_placement(&plan).await?;
        let physical = match optimized {
            Some(optimized) => self.physical_of_optimized(&optimized).await?,
            None => self.physical(plan.clone()).await?,
        };
        let read = read_from(&physical);
        let (executor, physical) = self.place(plan, physical, &read, &metrics).await?;
        // Computing a repeated CTE first is part of running the statement.
        metrics.record_phase("plan", started.elapsed().saturating_sub(computing));
        metrics.record_phase("execute", computing);
        let started = Instant::now();
        let task = partial_skip::task_for(&self.context, &physical);
        let schema = physical.schema();
        let local = RayonRunner(&self.pool);
        let runner: &dyn FragmentRunner = match executor {
            ExecutorKind::DataFusion | ExecutorKind::Auto => {
                let observe = self.observer(&read, &metrics);
                let batches = kept.held_by(execute_stream(Arc::clone(&physical), task)?);
                let batches = match placed {
                    Some(line) => with_row(batches, ["placement", &line])?,
                    None => batches,
                };
                let stream = QueryStream {
                    schema,
                    batches,
                    metrics,
                };
                return Ok(stream.counted(started, observe));
            }
            ExecutorKind::Fragments => &local,
            ExecutorKind::Remote => self.remote_runner()?,
        };
        // What workers delivered is theirs, not this machine's.
        let observe = (executor != ExecutorKind::Remote).then(|| self.observer(&read, &metrics));
        let batches = execute_with_fragments(Arc::clone(&physical), task, runner).await?;
        let batches = memory_stream(&schema, batches);
        let stream = QueryStream {
            schema,
            batches,
            metrics,
        };
        Ok(stream.counted(started, move |elapsed| {
            if let Some(observe) = observe {
                observe(elapsed)
            }
        }))
    }

    /// The runner fragments go to with `ExecutorKind::Remote`.
    pub(super) fn remote_runner(&self) -> Result<&dyn FragmentRunner> {
        self.remote
            .as_deref()
            .ok_or_else(|| DataFusionError::Configuration("no remote executor configured".into()))
    }

    /// A `SET` refused now, not when the next statement starts, and naming the setting:
    /// DataFusion's own message for `SET quiver.coalesce_gap = 'abc'` is only "invalid
    /// digit found in string".
    fn check_setting(&self, set: &SetVariable) -> Result<()> {
        let mut trial = self
            .context
            .state_ref()
            .read()
            .config_options()
            .as_ref()
            .clone();
        trial
            .set(&set.variable, &set.value)
            .and_then(|()| check_value(&set.variable, &set.value))
            .map_err(|e| {
                let message = describe(&e);
                DataFusionError::Plan(if message.contains(set.variable.as_str()) {
                    message
                } else {
                    format!("{}: {message}", set.variable)
                })
            })
    }

    /// The physical plan of the last statement of `sql` (earlier ones run, e.g. views).
    pub async fn physical_plan(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self.plan_last(sql).await?.0)
    }

    /// The physical plan of the last statement of `sql`, and what running the earlier
    /// ones read.
    async fn plan_last(&self, sql: &str) -> Result<(Arc<dyn ExecutionPlan>, MetricsSnapshot)> {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
        let last = statements
            .pop_back()
            .ok_or_else(|| DataFusionError::Plan("no SQL statement given".into()))?;
        let mut earlier = MetricsSnapshot::default();
        for statement in statements {
            let output = self.stream_any(statement).await?.collect().await?;
            earlier.add(&output.metrics.snapshot());
        }
        self.begin_query()?;
        let plan = self.logical_plan(last).await?;
        Ok((self.physical(plan).await?, earlier))
    }

    /// What `sql` will cost (`EXPLAIN COST`), and where the statement's executor would run it:
    /// its last statement is planned, which reads footers (those of the views it names,
    /// too: see `lazy_views`), and no data page is read; earlier statements run, and what
    /// they read counts.
    pub async fn estimate_cost(&self, sql: &str) -> Result<(Cost, Placement)> {
        let (plan, planning) = self.plan_last(sql).await?;
        let (mut cost, reads) = self.planned_cost(&plan, planning).await?;
        // The estimates are the answer: no ceiling refuses them.
        let read = read_from(&plan);
        let placement = self.placement(self.executor_now()?, &read, &cost, &reads, 0.0)?;
        if let Some(workers) = self.worker_cost(&reads) {
            cost.workers = workers;
        }
        Ok((cost, placement))
    }

    /// What a run spent (`spent`, with its workers' reads added), priced: `--profile`'s line.
    pub fn cost_line(&self, spent: &MetricsSnapshot, workers: WorkerCost) -> String {
        Cost::measured(spent, workers).line(&self.prices())
    }

    /// The prices in the statement's settings.
    pub(super) fn prices(&self) -> Prices {
        Prices::of(&self.runtime.query().settings.options)
    }
}

/// `batches` (two text columns: an EXPLAIN's) and then one more row of `cells`.
fn with_row(
    batches: SendableRecordBatchStream,
    cells: [&str; 2],
) -> Result<SendableRecordBatchStream> {
    let schema = batches.schema();
    let columns = cells.map(|cell| Arc::new(StringArray::from(vec![cell])) as ArrayRef);
    let row = RecordBatch::try_new(Arc::clone(&schema), columns.to_vec())?;
    let chained = batches.chain(futures::stream::once(async { Ok(row) }));
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, chained)))
}
