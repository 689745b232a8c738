//! Where a statement runs: `quiver.executor` (or the session's), and for `auto` the place
//! `exec::place` picks from the plan's estimates here and on Lambda (or, for the page, here
//! or at a coordinator's function URL); a ceiling in dollars holds for every executor. A
//! run here feeds what it measured back into the rates.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;

use super::duckdb::dialect::explain_cost;
use super::output::QueryOutput;
use super::QuiverSession;
use crate::cost::{planned_reads, scans, Cost, PlannedReads, WorkerCost};
use crate::exec::place::{self, Place, Placement, Planned, Policy, ReadFrom};
use crate::exec::ExecutorKind;
use crate::metrics::{MetricsSnapshot, QueryMetrics};
use crate::source::remote_key;

impl QuiverSession {
    /// The executor of the next statement: `quiver.executor` if set, else the session's.
    pub(super) fn executor_now(&self) -> Result<ExecutorKind> {
        Ok(executor_named(&self.options_now().executor)?.unwrap_or(self.options.executor))
    }

    /// Who runs `physical` (planned from `plan`), and the plan it runs: `auto` becomes
    /// local or remote by the estimates (and a remote run gets a plan without round-robin
    /// exchanges, which would cut its fragments down to bare scans). Under a ceiling
    /// (`quiver.max_dollars`) every executor's estimate is checked before any data page
    /// is read.
    pub(super) async fn place(
        &self,
        plan: LogicalPlan,
        physical: Arc<dyn ExecutionPlan>,
        read: &ReadFrom,
        metrics: &QueryMetrics,
    ) -> Result<(ExecutorKind, Arc<dyn ExecutionPlan>)> {
        let executor = self.executor_now()?;
        let priced = executor == ExecutorKind::Auto || self.options_now().max_dollars > 0.0;
        // A SET, a CREATE (but CREATE TABLE AS) or an EXPLAIN reads no data (EXPLAIN names
        // its query's place).
        let reads_data = match &plan {
            LogicalPlan::Statement(_) | LogicalPlan::Explain(_) => false,
            LogicalPlan::Ddl(ddl) => matches!(ddl, DdlStatement::CreateMemoryTable(_)),
            _ => true,
        };
        if !priced || !reads_data {
            return Ok((executor, physical));
        }
        // The statement's own reads so far are the runtime's metrics, counted there.
        let (cost, reads) = self
            .planned_cost(&physical, MetricsSnapshot::default())
            .await?;
        let ceiling = self.options_now().max_dollars;
        let placement = self.placement(executor, read, &cost, &reads, ceiling)?;
        if executor != ExecutorKind::Auto {
            return Ok((executor, physical));
        }
        metrics.set_placed(placement.line());
        Ok(match placement.place {
            Place::Local => (ExecutorKind::DataFusion, physical),
            Place::Lambda => {
                let mut state = self.context.state();
                state
                    .config_mut()
                    .options_mut()
                    .optimizer
                    .enable_round_robin_repartition = false;
                (
                    ExecutorKind::Remote,
                    state.create_physical_plan(&plan).await?,
                )
            }
        })
    }

    /// Runs `sql` here, or sends it to a coordinator elsewhere (the page's function URL),
    /// by `quiver.place` under `quiver.max_dollars`: the earlier statements run here, the
    /// last is planned here and, if it is a query Lambda could run, priced there by
    /// `lambda_estimate` (the coordinator's `EXPLAIN COST`): `Ok(Err(why))` where the
    /// coordinator cannot plan it (a view only this session has), which then runs here; its
    /// error (a refused signature) is the query's. `send` gets the whole `sql`, since the
    /// coordinator's session is fresh. The output says where it ran, and why.
    pub async fn run_or_send<E, S>(
        &self,
        sql: &str,
        lambda_estimate: impl FnOnce() -> E,
        send: impl FnOnce() -> S,
    ) -> Result<QueryOutput>
    where
        E: Future<Output = Result<std::result::Result<place::Estimate, String>>>,
        S: Future<Output = Result<QueryOutput>>,
    {
        if explain_cost(sql).is_some() {
            return self.run(sql).await;
        }
        let last = self.run_all_but_last(sql).await?;
        let query = matches!(&last, Statement::Statement(inner)
            if matches!(inner.as_ref(), SqlStatement::Query(_)));
        if !query {
            return self.stream_any(last).await?.collect().await;
        }
        self.begin_query()?;
        let plan = self.logical_plan(last.clone()).await?;
        let physical = self.physical(plan).await?;
        let planning = MetricsSnapshot::default();
        let (cost, reads) = self.planned_cost(&physical, planning).await?;
        let (local, refused) = self.here(&read_from(&physical), &cost, &reads);
        let lambda = match refused {
            Some(why) => Err(why),
            None => lambda_estimate().await?,
        };
        let options = self.options_now();
        let policy = Policy::parse(&options.place)?;
        let placement = place::choose(policy, options.max_dollars, local, lambda)?;
        let output = match placement.place {
            Place::Local => self.stream_any(last).await?.collect().await?,
            Place::Lambda => send().await?,
        };
        output.metrics.set_placed(placement.line());
        Ok(output)
    }

    /// What running `plan` here costs (with `planning`'s reads), and its scans' reads.
    pub(super) async fn planned_cost(
        &self,
        plan: &Arc<dyn ExecutionPlan>,
        planning: MetricsSnapshot,
    ) -> Result<(Cost, Vec<PlannedReads>)> {
        let reads = planned_reads(plan, &self.runtime).await?;
        let mut planning = planning;
        planning.add(&self.runtime.metrics().snapshot());
        let mut cost = Cost {
            files: planning.files,
            footer_gets: planning.footer_requests,
            // Planning's other requests (an index file) are made again by the run.
            data_gets: planning.requests.saturating_sub(planning.footer_requests),
            bytes: planning.bytes_read,
            ..Default::default()
        };
        for scan in &reads {
            cost.buckets += scan.buckets;
            cost.data_gets += scan.requests;
            cost.bytes += scan.bytes;
        }
        Ok((cost, reads))
    }

    /// What the session's remote runner would spend on `reads`; `None` without one.
    pub(super) fn worker_cost(&self, reads: &[PlannedReads]) -> Option<WorkerCost> {
        let runner = self.remote.as_ref()?;
        let config = self.context.state_ref().read().config_options().clone();
        let measured = self.runtime.rates.now();
        let mut total = WorkerCost::default();
        for scan in reads {
            let workers = runner.estimate(scan, &config, &measured);
            total.workers += workers.workers;
            total.gb_seconds += workers.gb_seconds;
            // Scans run one after another (a join's build side first).
            total.seconds += workers.seconds;
        }
        Some(total)
    }

    /// Where `executor` runs `plan` and the estimates behind it: `auto` by `quiver.place`,
    /// the others where they run; refused over `max_dollars` (0: no ceiling).
    pub(super) fn placement(
        &self,
        executor: ExecutorKind,
        read: &ReadFrom,
        cost: &Cost,
        reads: &[PlannedReads],
        max_dollars: f64,
    ) -> Result<Placement> {
        let options = self.options_now();
        let (local, refused) = self.here(read, cost, reads);
        let on_lambda = |workers: WorkerCost| place::Estimate {
            seconds: workers.seconds,
            dollars: Cost { workers, ..*cost }.dollars(&self.prices()),
        };
        let workers = self.worker_cost(reads);
        let (policy, lambda) = match executor {
            ExecutorKind::Auto => {
                let lambda = match (workers, refused) {
                    (None, _) => Err("no Lambda function is configured".to_string()),
                    (Some(_), Some(why)) => Err(why),
                    (Some(workers), None) => Ok(on_lambda(workers)),
                };
                (Policy::parse(&options.place)?, lambda)
            }
            ExecutorKind::Remote => (
                Policy::Always(Place::Lambda),
                Ok(on_lambda(workers.unwrap_or_default())),
            ),
            ExecutorKind::DataFusion | ExecutorKind::Fragments => (
                Policy::Always(Place::Local),
                Err("the executor is local".to_string()),
            ),
        };
        place::choose(policy, max_dollars, local, lambda)
    }

    /// For a plain `EXPLAIN` under `auto`: the line `--profile` would print of where its
    /// query runs, why, and both estimates (`None` for anything else).
    pub(super) async fn explained_placement(&self, plan: &LogicalPlan) -> Result<Option<String>> {
        let LogicalPlan::Explain(explain) = plan else {
            return Ok(None);
        };
        if self.executor_now()? != ExecutorKind::Auto {
            return Ok(None);
        }
        let physical = self.physical(explain.plan.as_ref().clone()).await?;
        let planning = MetricsSnapshot::default();
        let (cost, reads) = self.planned_cost(&physical, planning).await?;
        let read = read_from(&physical);
        let placement = self.placement(ExecutorKind::Auto, &read, &cost, &reads, 0.0)?;
        Ok(Some(placement.line()))
    }

    /// A planned statement as seen from here: the estimate of running it here, and why
    /// Lambda may not run it (if it may not).
    fn here(
        &self,
        read: &ReadFrom,
        cost: &Cost,
        reads: &[PlannedReads],
    ) -> (place::Estimate, Option<String>) {
        let options = self.options_now();
        let planned = Planned {
            cost,
            reads,
            source: read.source.as_deref(),
        };
        let rates = self.runtime.rates.now();
        let local = place::local_estimate(&planned, &rates, &options, self.options.threads);
        (local, place::lambda_refusal(&planned, &options))
    }

    /// What a run here does once its last row is out: its reads (from `read`) and
    /// threads measured into the rates.
    pub(super) fn observer(
        &self,
        read: &ReadFrom,
        metrics: &Arc<QueryMetrics>,
    ) -> impl FnOnce(Duration) + Send + 'static {
        let (runtime, metrics) = (Arc::clone(&self.runtime), Arc::clone(metrics));
        let (read, threads) = (read.clone(), self.options.threads);
        move |elapsed| place::observe(&runtime, &metrics, &read, elapsed.as_secs_f64(), threads)
    }
}

/// The executor `quiver.executor` names (`None` when empty: the session's).
pub(super) fn executor_named(named: &str) -> Result<Option<ExecutorKind>> {
    if named.trim().is_empty() {
        return Ok(None);
    }
    ExecutorKind::parse(named).map(Some).ok_or_else(|| {
        DataFusionError::Plan(format!(
            "quiver.executor: '{named}' is not an executor (local, fragments, lambda, auto)"
        ))
    })
}

/// Where `plan`'s scans read.
pub(super) fn read_from(plan: &Arc<dyn ExecutionPlan>) -> ReadFrom {
    let files = scans(plan).into_iter().flat_map(|scan| scan.files().iter());
    ReadFrom::of(files.map(|file| remote_key(&file.meta.path)).collect())
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;

    #[tokio::test]
    async fn a_query_lambda_may_not_run_stays_here_unasked_and_earlier_statements_run_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.parquet");
        let session = QuiverSession::local_two_threads();
        let copy = format!("COPY (SELECT 7 AS x) TO '{}'", file.display());
        session.run(&copy).await.unwrap();
        session.set("quiver.lambda_min_bytes", "0").unwrap();
        session.set("quiver.place", "lambda").unwrap();
        let asked = Cell::new(0);
        let asked = &asked;
        let ask = move || async move {
            asked.set(asked.get() + 1);
            Ok(Ok(place::Estimate {
                seconds: 0.0,
                dollars: 0.0,
            }))
        };
        let sent = || async {
            let refused: Result<QueryOutput> = Err(DataFusionError::Internal(
                "a local file was sent to the coordinator".into(),
            ));
            refused
        };
        // A view made by an earlier statement, which would fail if it ran twice.
        let sql = format!(
            "CREATE VIEW t AS SELECT * FROM '{}'; SELECT sum(x) AS s FROM t",
            file.display()
        );
        let output = session.run_or_send(&sql, ask, sent).await.unwrap();
        let sum = output.batches[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(sum.value(0), 7);
        assert_eq!(asked.get(), 0);
        let placed = output.metrics.placed().unwrap();
        assert!(
            placed.starts_with("place: local (not lambda: it reads files on this machine"),
            "{placed}"
        );
        // EXPLAIN says where `auto` would run the query, and why, in a row of its own.
        session.set("quiver.executor", "auto").unwrap();
        let sql = format!("EXPLAIN SELECT sum(x) FROM '{}'", file.display());
        let explained = session.run(&sql).await.unwrap();
        let last = explained.batches.last().unwrap();
        let row = last.num_rows() - 1;
        assert_eq!(last.column(0).as_string::<i32>().value(row), "placement");
        let line = last.column(1).as_string::<i32>().value(row);
        let why = "place: local (not lambda: no Lambda function is configured; estimates: local";
        assert!(line.starts_with(why), "{line}");
        // Not a query: it runs here, and nothing is placed.
        let set = session.run_or_send("SET quiver.place = 'local'", ask, sent);
        assert_eq!(set.await.unwrap().metrics.placed(), None);
        assert_eq!(asked.get(), 0);
    }
}
