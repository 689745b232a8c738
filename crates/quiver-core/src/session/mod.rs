//! A Quiver session: DataFusion configured with our tables, planner hooks and runtime, and
//! the two ways to drive a plan (DataFusion's own threads, or fragments on rayon).

mod dialect;
mod file_subqueries;
mod index_answers;
mod index_calls;
mod listing_only;
mod relations;
mod summarize;
mod virtual_columns;

use std::sync::Arc;
use web_time::Instant;

use futures::{StreamExt, TryStreamExt};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::{ArrayRef, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{LogicalPlan, Statement as LogicalStatement};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{execute_stream, ExecutionPlan, SendableRecordBatchStream};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{CopyToSource, CopyToStatement, DFParser, Statement};
use datafusion::sql::sqlparser::ast::{Statement as SqlStatement, TableFactor};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::copy;
pub use crate::exec::ExecutorKind;
use crate::exec::{
    execute_with_fragments, travelling_fragments, ComputePool, FragmentRunner, RayonRunner,
};
use crate::memory;
use crate::metadata::MetadataTable;
use crate::metrics::QueryMetrics;
use crate::options::QuiverOptions;
use crate::runtime::QuiverRuntime;
use crate::source::ListingOptions;
use crate::sql_types::sql_type_name;
use crate::table::{QuiverTable, TableOptions};

use listing_only::answers_from_listing;
pub use relations::{path_tables, uses_wildcard, PathTable};

#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub threads: usize,
    pub executor: ExecutorKind,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self {
            threads,
            executor: ExecutorKind::default(),
        }
    }
}

/// What a statement returned.
#[derive(Debug)]
pub struct QueryOutput {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub metrics: Arc<QueryMetrics>,
}

/// A statement's answer as it is produced: under DataFusion's executor, rows come while the
/// plan runs, so writing them needs no memory for the whole answer. (The fragments
/// executors merge in memory, so theirs comes whole.)
pub struct QueryStream {
    pub schema: SchemaRef,
    pub batches: SendableRecordBatchStream,
    pub metrics: Arc<QueryMetrics>,
}

impl QueryOutput {
    fn into_stream(self) -> QueryStream {
        QueryStream {
            batches: memory_stream(&self.schema, self.batches),
            schema: self.schema,
            metrics: self.metrics,
        }
    }
}

fn memory_stream(schema: &SchemaRef, batches: Vec<RecordBatch>) -> SendableRecordBatchStream {
    let batches = futures::stream::iter(batches.into_iter().map(Ok));
    Box::pin(RecordBatchStreamAdapter::new(Arc::clone(schema), batches))
}

impl QueryStream {
    /// The whole answer, in memory.
    pub async fn collect(self) -> Result<QueryOutput> {
        Ok(QueryOutput {
            batches: self.batches.try_collect().await?,
            schema: self.schema,
            metrics: self.metrics,
        })
    }

    /// Counts the rows that come out, and the time until the last one, in the metrics.
    fn counted(self, started: Instant) -> Self {
        let (rows, ended) = (Arc::clone(&self.metrics), Arc::clone(&self.metrics));
        let counted = self.batches.inspect_ok(move |batch| {
            QueryMetrics::add(&rows.rows_out, batch.num_rows() as u64);
        });
        let end = futures::stream::once(async move {
            ended.record_phase("execute", started.elapsed());
            None
        })
        .filter_map(futures::future::ready);
        Self {
            batches: Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                counted.chain(end),
            )),
            ..self
        }
    }
}

pub struct QuiverSession {
    context: SessionContext,
    runtime: Arc<QuiverRuntime>,
    tables: Arc<relations::ResolvedTables>,
    pool: ComputePool,
    options: SessionOptions,
    remote: Option<Arc<dyn FragmentRunner>>,
    /// The limit the context's memory pool was built for (`quiver.memory_limit`).
    memory_limit: std::sync::Mutex<Option<u64>>,
}

impl QuiverSession {
    pub fn new(options: SessionOptions) -> Result<Self> {
        Self::with_runtime(options, Arc::new(QuiverRuntime::default()))
    }

    /// A session over an existing runtime: its caches (footers, blocks, connections) are
    /// shared, its catalog (views) and settings are its own. A server makes one per request.
    pub fn with_runtime(options: SessionOptions, runtime: Arc<QuiverRuntime>) -> Result<Self> {
        let config = SessionConfig::new()
            .with_target_partitions(options.threads.max(1))
            .with_information_schema(true)
            // Filters pushed into the scan filter rows as the decoder reads them (see
            // `pushdown`); DataFusion's own default is off.
            .set_bool("datafusion.execution.parquet.pushdown_filters", true)
            // Natively DataFusion spreads a scan of fewer partitions than threads (a small
            // table is one bucket) over every thread, as it does for its own scan. Fragments
            // are cut below the first exchange, so there a round-robin exchange above the
            // scan would cut every fragment down to a bare scan: buckets are their parallelism.
            .with_round_robin_repartition(options.executor == ExecutorKind::DataFusion)
            .with_extension(Arc::clone(&runtime))
            .with_option_extension(QuiverOptions::default());
        let memory_limit = memory::default_limit();
        // Process-wide: a small function's default limit purges at once from the start.
        #[cfg(not(target_arch = "wasm32"))]
        crate::allocator::follow_memory_limit(memory_limit);
        let memory = RuntimeEnvBuilder::new()
            .with_memory_pool(memory::pool(memory_limit))
            .with_max_spill_merge_fan_in(memory::SPILL_MERGE_FAN_IN);
        // The browser has no disk: a spill is an error there, where a temporary folder
        // would have been asked of std, which panics (and a panic aborts the module).
        #[cfg(target_arch = "wasm32")]
        let memory = memory.with_disk_manager_builder(
            datafusion::execution::disk_manager::DiskManagerBuilder::default()
                .with_mode(datafusion::execution::disk_manager::DiskManagerMode::Disabled),
        );
        let memory = memory.build_arc()?;
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(memory)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(crate::filter_order::CheapConjunctsFirst))
            .build();
        let context = SessionContext::new_with_state(state);
        // Our scan hands DataFusion bytes already fetched, yet DataFusion still looks up the
        // store of its URL (file:///), which the browser build has none of.
        #[cfg(target_arch = "wasm32")]
        context.register_object_store(
            datafusion::execution::object_store::ObjectStoreUrl::local_filesystem().as_ref(),
            Arc::new(object_store::memory::InMemory::new()),
        );
        let tables = Arc::new(relations::ResolvedTables::default());
        context.register_relation_planner(Arc::new(relations::PathTablePlanner {
            tables: Arc::clone(&tables),
        }))?;
        context.add_optimizer_rule(Arc::new(listing_only::ListingOnlyRule));
        context.add_optimizer_rule(Arc::new(index_answers::IndexAnswersRule));
        let pool = ComputePool::for_target(options.threads)?;
        Ok(Self {
            context,
            runtime,
            tables,
            pool,
            options,
            remote: None,
            memory_limit: std::sync::Mutex::new(memory_limit),
        })
    }

    /// Sends fragments to `runner` (with `ExecutorKind::Remote`).
    pub fn with_fragment_runner(mut self, runner: Arc<dyn FragmentRunner>) -> Self {
        self.remote = Some(runner);
        self
    }

    pub fn pool(&self) -> &ComputePool {
        &self.pool
    }

    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    pub fn runtime(&self) -> &Arc<QuiverRuntime> {
        &self.runtime
    }

    /// Starts a statement: fresh metrics (returned), the memory pool and the block cache
    /// bounded as the session's settings say now.
    pub fn begin_query(&self) -> Result<Arc<QueryMetrics>> {
        // Read in place: `state()` would clone the whole session state every statement.
        let options = QuiverOptions::of(self.context.state_ref().read().config_options());
        let limit = memory::parse_limit(&options.memory_limit)?;
        self.set_memory_limit(limit)?;
        Ok(self.runtime.begin_query(&options, limit))
    }

    /// Gives the session a pool of `limit` bytes when its pool has another. Statements
    /// start one after another, so no reservation is held in the pool it replaces.
    fn set_memory_limit(&self, limit: Option<u64>) -> Result<()> {
        let mut applied = self.memory_limit.lock().unwrap_or_else(|p| p.into_inner());
        if *applied == limit {
            return Ok(());
        }
        #[cfg(not(target_arch = "wasm32"))]
        crate::allocator::follow_memory_limit(limit);
        let state = self.context.state_ref();
        let mut state = state.write();
        let runtime = RuntimeEnvBuilder::from_runtime_env(state.runtime_env())
            .with_memory_pool(memory::pool(limit))
            .build_arc()?;
        *state = SessionStateBuilder::new_from_existing(state.clone())
            .with_runtime_env(runtime)
            .build();
        *applied = limit;
        Ok(())
    }

    /// The S3 settings in force.
    pub fn s3_options(&self) -> crate::source::S3Options {
        QuiverOptions::of(self.context.state_ref().read().config_options()).s3()
    }

    /// Sets a configuration value, as `SET key = value` does (`quiver.coalesce_gap`, or any
    /// of DataFusion's `datafusion.*` settings).
    pub fn set(&self, key: &str, value: &str) -> Result<()> {
        if key.eq_ignore_ascii_case("quiver.memory_limit") {
            memory::parse_limit(value)?;
        }
        self.context
            .state_ref()
            .write()
            .config_mut()
            .options_mut()
            .set(key, value)
    }

    /// Runs every `;`-separated statement in order and returns the last one's output.
    pub async fn run(&self, sql: &str) -> Result<QueryOutput> {
        self.run_streaming(sql).await?.collect().await
    }

    /// Runs every `;`-separated statement in order; the last one's answer comes as it is
    /// produced.
    pub async fn run_streaming(&self, sql: &str) -> Result<QueryStream> {
        if let Some(query) = dialect::explain_cost(sql) {
            let cost = self.estimate_cost(query).await?;
            let options = QuiverOptions::of(self.context.state_ref().read().config_options());
            let batch = cost.batch(&crate::cost::Prices::of(&options))?;
            let output = QueryOutput {
                schema: batch.schema(),
                batches: vec![batch],
                metrics: self.runtime.metrics(),
            };
            return Ok(output.into_stream());
        }
        let sql = dialect::rewrite_summarize(&dialect::rewrite_duckdb_copy(sql));
        let mut statements = DFParser::parse_sql_with_dialect(&sql, &GenericDialect {})?;
        let last = statements
            .pop_back()
            .ok_or_else(|| DataFusionError::Plan("no SQL statement given".into()))?;
        for statement in statements {
            self.stream_any(statement).await?.collect().await?;
        }
        self.stream_any(last).await
    }

    /// COPY, the CALLs we answer ourselves, or a statement for DataFusion.
    async fn stream_any(&self, statement: Statement) -> Result<QueryStream> {
        Ok(match statement {
            Statement::CopyTo(copy) => self.run_copy(copy).await?.into_stream(),
            Statement::Statement(inner) => match inner.as_ref() {
                SqlStatement::Call(function) => {
                    match (
                        index_calls::index_call(function),
                        summarize::summarize_call(function),
                    ) {
                        (Some(call), _) => self.run_index_call(call?).await?.into_stream(),
                        (_, Some(target)) => self.run_summarize(&target?).await?.into_stream(),
                        _ => self.stream_statement(Statement::Statement(inner)).await?,
                    }
                }
                _ => self.stream_statement(Statement::Statement(inner)).await?,
            },
            other => self.stream_statement(other).await?,
        })
    }

    /// What `sql` will cost (`EXPLAIN COST`): its last statement is planned, which reads
    /// footers, and no data page is read; earlier statements run, and what they read counts
    /// (a view's footers).
    pub async fn estimate_cost(&self, sql: &str) -> Result<crate::cost::Cost> {
        let (plan, mut planning) = self.plan_last(sql).await?;
        let config = self.context.state_ref().read().config_options().clone();
        let options = QuiverOptions::of(&config);
        let reads = crate::cost::planned_reads(&plan, &self.runtime, &options).await?;
        planning.add(&self.runtime.metrics().snapshot());
        let mut cost = crate::cost::Cost {
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
            if let Some(runner) = &self.remote {
                let workers = runner.estimate(scan, &config);
                cost.workers.workers += workers.workers;
                cost.workers.gb_seconds += workers.gb_seconds;
            }
        }
        Ok(cost)
    }

    /// What a run spent (`spent`, with its workers' reads added), priced: `--profile`'s line.
    pub fn cost_line(
        &self,
        spent: &crate::metrics::MetricsSnapshot,
        workers: crate::cost::WorkerCost,
    ) -> String {
        let options = QuiverOptions::of(self.context.state_ref().read().config_options());
        crate::cost::Cost::measured(spent, workers).line(&crate::cost::Prices::of(&options))
    }

    /// The physical plan of the last statement of `sql` (earlier ones run, e.g. views).
    pub async fn physical_plan(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self.plan_last(sql).await?.0)
    }

    /// The physical plan of the last statement of `sql`, and what running the earlier
    /// ones read.
    async fn plan_last(
        &self,
        sql: &str,
    ) -> Result<(Arc<dyn ExecutionPlan>, crate::metrics::MetricsSnapshot)> {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
        let last = statements
            .pop_back()
            .ok_or_else(|| DataFusionError::Plan("no SQL statement given".into()))?;
        let mut earlier = crate::metrics::MetricsSnapshot::default();
        for statement in statements {
            earlier.add(&self.run_statement(statement).await?.metrics.snapshot());
        }
        self.begin_query()?;
        let plan = self.logical_plan(last).await?;
        let plan = self
            .context
            .execute_logical_plan(plan)
            .await?
            .create_physical_plan()
            .await?;
        Ok((plan, earlier))
    }

    /// Plans a statement. Its path tables are first made from their listings alone: if
    /// the optimised plan then reads listings only, no file is opened at all. Otherwise
    /// each table reads its first footer for the file columns, and the statement is planned
    /// again.
    async fn logical_plan(&self, mut statement: Statement) -> Result<LogicalPlan> {
        if let Statement::Statement(inner) = &mut statement {
            relations::describe_path_as_query(inner);
        }
        let statement = self.answer_file_subqueries(statement).await;
        let found = self.path_tables_of(&statement)?;
        let planned = self.plan_with_path_tables(&statement, &found).await;
        self.tables.clear();
        planned
    }

    async fn plan_with_path_tables(
        &self,
        statement: &Statement,
        found: &[PathTable],
    ) -> Result<LogicalPlan> {
        let state = self.context.state();
        if found.is_empty() {
            return state.statement_to_plan(statement.clone()).await;
        }
        let named = virtual_columns::names_virtual_column(&statement.to_string());
        let mut listed = Vec::with_capacity(found.len());
        for path_table in found {
            let options = ListingOptions {
                hive_partitioning: path_table.hive_partitioning,
                s3: QuiverOptions::of(state.config_options()).s3(),
            };
            let patterns = path_table.patterns.clone();
            let table = QuiverTable::list(&self.runtime, patterns, &options, named).await?;
            let provider: Arc<dyn TableProvider> = match path_table.metadata {
                // Metadata tables are whole once listed: their footers are read by the scan.
                Some(kind) => Arc::new(MetadataTable::new(kind, table.files())),
                None => Arc::new(table.clone()),
            };
            self.tables.insert(path_table.key.clone(), provider);
            listed.push(table);
        }
        let wildcard = match statement {
            Statement::Statement(inner) => uses_wildcard(inner.as_ref()),
            Statement::Explain(explain) => match explain.statement.as_ref() {
                Statement::Statement(inner) => uses_wildcard(inner.as_ref()),
                _ => true,
            },
            _ => true,
        };
        let planned = if wildcard {
            None
        } else {
            state.statement_to_plan(statement.clone()).await.ok()
        };
        if let Some(plan) = planned {
            if state
                .optimize(&plan)
                .is_ok_and(|optimized| answers_from_listing(&optimized))
            {
                return Ok(plan);
            }
        }
        for (path_table, table) in found.iter().zip(listed) {
            if path_table.metadata.is_some() {
                continue;
            }
            let options = TableOptions {
                schema_override: path_table
                    .schema
                    .as_deref()
                    .map(|s| self.parse_schema(s))
                    .transpose()?,
                union_by_name: path_table.union_by_name,
                ..TableOptions::for_session(state.config_options())
            };
            let full = table.with_file_columns(&self.runtime, &options).await?;
            self.tables.insert(path_table.key.clone(), Arc::new(full));
        }
        let mut statement = statement.clone();
        if let (true, Some(inner)) = (named, sql_statement(&mut statement)) {
            virtual_columns::hide_from_wildcards(inner, &|factor: &TableFactor| {
                relations::relation_of(factor, &self.tables)
            });
        }
        state.statement_to_plan(statement).await
    }

    /// `_path IN (subquery)` with the subquery's answer in its place (see
    /// `file_subqueries`). A subquery that fails on its own (a correlated one), answers
    /// with other than one column, or with too many values, is left as it was.
    async fn answer_file_subqueries(&self, mut statement: Statement) -> Statement {
        let Some(inner) = sql_statement(&mut statement) else {
            return statement;
        };
        file_subqueries::add_join_subqueries(inner);
        let mut answers = vec![];
        for query in file_subqueries::file_subqueries(inner) {
            let subquery =
                Statement::Statement(Box::new(SqlStatement::Query(Box::new(query.clone()))));
            // Boxed: a subquery may hold file subqueries of its own.
            if let Ok(values) = Box::pin(self.single_column_values(subquery)).await {
                answers.push((query, values));
            }
        }
        file_subqueries::substitute(inner, &answers);
        statement
    }

    /// The values of a one-column query, as text.
    async fn single_column_values(&self, statement: Statement) -> Result<Vec<Option<String>>> {
        let plan = self.logical_plan(statement).await?;
        let batches = self
            .context
            .execute_logical_plan(plan)
            .await?
            .collect()
            .await?;
        let mut values = vec![];
        for batch in batches {
            if batch.num_columns() != 1 {
                return Err(DataFusionError::Plan("not one column".into()));
            }
            let column = datafusion::arrow::compute::cast(batch.column(0), &DataType::Utf8)?;
            let column = column.as_string::<i32>();
            values.extend(column.iter().map(|v| v.map(str::to_string)));
            if values.len() > file_subqueries::MAX_VALUES {
                return Err(DataFusionError::Plan("too many values".into()));
            }
        }
        Ok(values)
    }

    /// The path tables a statement names, each once.
    fn path_tables_of(&self, statement: &Statement) -> Result<Vec<PathTable>> {
        let mut found = match statement {
            Statement::Statement(inner) => path_tables(inner.as_ref())?,
            Statement::Explain(explain) => match explain.statement.as_ref() {
                Statement::Statement(inner) => path_tables(inner.as_ref())?,
                _ => vec![],
            },
            _ => vec![],
        };
        let mut seen = std::collections::HashSet::new();
        found.retain(|table| seen.insert(table.key.clone()));
        Ok(found)
    }

    async fn run_statement(&self, statement: Statement) -> Result<QueryOutput> {
        self.stream_statement(statement).await?.collect().await
    }

    async fn stream_statement(&self, statement: Statement) -> Result<QueryStream> {
        let metrics = self.begin_query()?;
        let started = Instant::now();
        let plan = self.logical_plan(statement).await?;
        if let LogicalPlan::Statement(LogicalStatement::SetVariable(set)) = &plan {
            // Refused now, not when the next statement starts, and naming the setting:
            // DataFusion's own message for `SET quiver.coalesce_gap = 'abc'` is only
            // "invalid digit found in string".
            let mut trial = self
                .context
                .state_ref()
                .read()
                .config_options()
                .as_ref()
                .clone();
            trial
                .set(&set.variable, &set.value)
                .and_then(|()| {
                    if set.variable.eq_ignore_ascii_case("quiver.memory_limit") {
                        memory::parse_limit(&set.value).map(|_| ())
                    } else {
                        Ok(())
                    }
                })
                .map_err(|e| {
                    let message = crate::describe(&e);
                    DataFusionError::Plan(if message.contains(set.variable.as_str()) {
                        message
                    } else {
                        format!("{}: {message}", set.variable)
                    })
                })?;
        }
        if let LogicalPlan::DescribeTable(described) = &plan {
            let batch = describe_batch(&described.schema)?;
            let output = QueryOutput {
                schema: batch.schema(),
                batches: vec![batch],
                metrics,
            };
            return Ok(output.into_stream());
        }
        let frame = self.context.execute_logical_plan(plan).await?;
        let physical = frame.create_physical_plan().await?;
        metrics.record_phase("plan", started.elapsed());
        let started = Instant::now();
        let task = self.context.task_ctx();
        let schema = physical.schema();
        let local = RayonRunner(&self.pool);
        let runner: &dyn FragmentRunner = match self.options.executor {
            ExecutorKind::DataFusion => {
                let batches = execute_stream(Arc::clone(&physical), task)?;
                let stream = QueryStream {
                    schema,
                    batches,
                    metrics,
                };
                return Ok(stream.counted(started));
            }
            ExecutorKind::Fragments => &local,
            ExecutorKind::Remote => self.remote.as_deref().ok_or_else(|| {
                DataFusionError::Configuration("no remote executor configured".into())
            })?,
        };
        let batches = execute_with_fragments(Arc::clone(&physical), task, runner).await?;
        let batches = memory_stream(&schema, batches);
        let stream = QueryStream {
            schema,
            batches,
            metrics,
        };
        Ok(stream.counted(started))
    }

    /// Runs COPY's query with this session's executor, then writes its result (see
    /// `copy`); answers with the rows and files written. Fanned out, a query that is one
    /// fragment is written by the workers themselves, each its own files; the manifest
    /// that makes them one output is written here, last.
    async fn run_copy(&self, copy: CopyToStatement) -> Result<QueryOutput> {
        if let Some(format) = copy.stored_as.as_deref() {
            if !format.eq_ignore_ascii_case("parquet") {
                return Err(DataFusionError::NotImplemented(format!(
                    "COPY writes Parquet, not {format}"
                )));
            }
        }
        let query = match copy.source {
            CopyToSource::Query(query) => SqlStatement::Query(query),
            CopyToSource::Relation(name) => Parser::new(&GenericDialect {})
                .try_with_sql(&format!("SELECT * FROM {name}"))
                .and_then(|mut parser| parser.parse_statement())
                .map_err(|e| DataFusionError::Plan(e.to_string()))?,
        };
        let statement = Statement::Statement(Box::new(query));
        let s3 = QuiverOptions::of(self.context.state().config_options()).s3();
        let target = copy::CopyTarget {
            folder: format!("{}/", copy.target.trim_end_matches('/')),
            partition_by: copy.partitioned_by.clone(),
            job: crate::source::unique_id(),
        };
        let single_file = copy.partitioned_by.is_empty() && !copy.target.ends_with('/');
        let fanned_out = if single_file {
            None
        } else {
            self.write_where_fragments_run(&statement, &target).await?
        };
        let (written, metrics) = match fanned_out {
            Some((written, metrics)) => (
                copy::commit(&self.runtime, &s3, &target, written).await?,
                metrics,
            ),
            None => {
                // Rows are encoded as the query produces them, never held whole.
                let mut stream = self.stream_statement(statement).await?;
                let destination = if single_file {
                    copy::Destination::File(copy.target.clone())
                } else {
                    copy::Destination::Folder(target.clone())
                };
                let threads = self.context.state_ref().read().config().target_partitions();
                let mut writer =
                    copy::CopyWriter::new(&self.runtime, &s3, destination, &stream.schema)?
                        .with_threads(threads);
                while let Some(batch) = stream.batches.try_next().await? {
                    writer.write(&batch)?;
                }
                let started = Instant::now();
                let written = writer.finish().await?;
                let written = if single_file {
                    written
                } else {
                    copy::commit(&self.runtime, &s3, &target, written).await?
                };
                stream.metrics.record_phase("write", started.elapsed());
                (written, stream.metrics)
            }
        };
        let rows: u64 = written.iter().map(|f| f.rows).sum();
        let batch = RecordBatch::try_from_iter([
            ("rows", Arc::new(UInt64Array::from(vec![rows])) as ArrayRef),
            (
                "files",
                Arc::new(UInt64Array::from(vec![written.len() as u64])) as ArrayRef,
            ),
        ])?;
        Ok(QueryOutput {
            schema: batch.schema(),
            batches: vec![batch],
            metrics,
        })
    }

    /// `CALL quiver_index_build|refresh|show('glob' [, 'to'])` (see `index_calls`).
    async fn run_index_call(
        &self,
        (action, glob, to): (index_calls::IndexAction, String, Option<String>),
    ) -> Result<QueryOutput> {
        use crate::index::{build_index, refresh_index, show_index};
        use index_calls::IndexAction;
        let metrics = self.begin_query()?;
        let (s3, runtime, to) = (self.s3_options(), &self.runtime, to.as_deref());
        let status = match action {
            IndexAction::Build => build_index(runtime, &glob, to, &s3).await?,
            IndexAction::Refresh => refresh_index(runtime, &glob, to, &s3).await?,
            IndexAction::Show => show_index(runtime, &glob, to, &s3).await?,
        };
        let batch = index_calls::status_batch(&status)?;
        Ok(QueryOutput {
            schema: batch.schema(),
            batches: vec![batch],
            metrics,
        })
    }

    /// SUMMARIZE (see `summarize`): the source's columns, then one aggregate over them.
    async fn run_summarize(&self, target: &str) -> Result<QueryOutput> {
        let source = summarize::source_query(target);
        let parse = |sql: &str| -> Result<Statement> {
            DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?
                .pop_front()
                .ok_or_else(|| DataFusionError::Plan(format!("SUMMARIZE: nothing in {sql}")))
        };
        let columns = self.logical_plan(parse(&source)?).await?;
        let columns = columns.schema().as_arrow().clone();
        let mut output = self
            .run_statement(parse(&summarize::summary_query(&columns, &source))?)
            .await?;
        let answer = datafusion::arrow::compute::concat_batches(&output.schema, &output.batches)?;
        let batch = summarize::summary_batch(&columns, &answer)?;
        output.schema = batch.schema();
        output.batches = vec![batch];
        Ok(output)
    }

    /// With a remote executor, a COPY whose query is a single fragment (scan, filter,
    /// projection) is written where the fragment runs; `None` otherwise.
    async fn write_where_fragments_run(
        &self,
        statement: &Statement,
        target: &copy::CopyTarget,
    ) -> Result<Option<(Vec<copy::WrittenFile>, Arc<QueryMetrics>)>> {
        let Some(runner) = self.remote.as_deref() else {
            return Ok(None);
        };
        if self.options.executor != ExecutorKind::Remote {
            return Ok(None);
        }
        let metrics = self.begin_query()?;
        let plan = self.logical_plan(statement.clone()).await?;
        let mut top = self
            .context
            .execute_logical_plan(plan)
            .await?
            .create_physical_plan()
            .await?;
        // Merging partitions is not work when each partition becomes its own files.
        while matches!(top.name(), "CoalescePartitionsExec" | "CoalesceBatchesExec")
            && top.fetch().is_none()
        {
            let child = Arc::clone(top.children()[0]);
            top = child;
        }
        let context = self.context.task_ctx();
        // A join whose build side travels is written by the workers that probe it.
        let top = crate::exec::broadcast::broadcast_joins(top, &context, runner).await?;
        let mut found = Vec::new();
        travelling_fragments(&top, &context, &mut found)?;
        match found.as_slice() {
            [fragment] if Arc::ptr_eq(&fragment.plan, &top) => {
                match runner.write(fragment, target, &context).await {
                    Some(written) => Ok(Some((written?, metrics))),
                    None => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// `col TYPE, …` in SQL's own type names, mapped to Arrow by DataFusion's planner.
    fn parse_schema(&self, text: &str) -> Result<SchemaRef> {
        let columns = Parser::new(&GenericDialect {})
            .try_with_sql(text)
            .and_then(|mut parser| parser.parse_comma_separated(Parser::parse_column_def))
            .map_err(|e| DataFusionError::Plan(format!("schema '{text}': {e}")))?;
        if columns.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "schema '{text}' names no column"
            )));
        }
        let select = columns
            .iter()
            .map(|c| {
                format!(
                    "CAST(NULL AS {}) AS \"{}\"",
                    c.data_type,
                    c.name.value.replace('"', "\"\"")
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let plan = futures::executor::block_on(
            self.context
                .state()
                .create_logical_plan(&format!("SELECT {select}")),
        )?;
        Ok(Arc::new(plan.schema().as_arrow().clone()))
    }
}

/// The SQL statement itself, or the one EXPLAIN explains.
fn sql_statement(statement: &mut Statement) -> Option<&mut SqlStatement> {
    match statement {
        Statement::Statement(inner) => Some(inner.as_mut()),
        Statement::Explain(explain) => match explain.statement.as_mut() {
            Statement::Statement(inner) => Some(inner.as_mut()),
            _ => None,
        },
        _ => None,
    }
}

/// DESCRIBE's answer as DuckDB gives it: one row per column with its SQL type name.
fn describe_batch(schema: &Schema) -> Result<RecordBatch> {
    let fields = schema.fields();
    let text = |value: &dyn Fn(&Field) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter(fields.iter().map(|f| value(f))))
    };
    Ok(RecordBatch::try_from_iter([
        ("column_name", text(&|f| Some(f.name().clone()))),
        ("column_type", text(&|f| Some(sql_type_name(f.data_type())))),
        (
            "null",
            text(&|f| Some(if f.is_nullable() { "YES" } else { "NO" }.into())),
        ),
        ("key", text(&|_| None)),
        ("default", text(&|_| None)),
        ("extra", text(&|_| None)),
    ])?)
}
