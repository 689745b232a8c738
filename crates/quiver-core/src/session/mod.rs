//! A Quiver session: DataFusion configured with our tables, planner hooks and runtime, and
//! the two ways to drive a plan (DataFusion's own threads, or fragments on rayon).
//!
//! output (what a statement answers) · planning (statements to plans, path tables) ·
//! execution (plans run by the session's executor; EXPLAIN COST) · placing (which executor,
//! and for `auto` here or on Lambda by the estimates) · statements (dispatch,
//! and the statements answered here: COPY, CALL, SUMMARIZE), and the SQL rewrites and
//! optimizer rules they use (duckdb: DuckDB's SQL where DataFusion's differs; relations,
//! path_table, virtual_columns, file_subqueries, listing_only, index_answers, index_calls, summarize);
//! lazy_views (views planned when first named); repeated_ctes (a CTE named more than once
//! computed once); clock_parts (a faster `date_part` of the
//! hour, minute and second).

mod clock_parts;
mod duckdb;
mod execution;
mod file_subqueries;
mod index_answers;
mod index_calls;
mod lazy_views;
mod listing_only;
mod output;
mod partial_skip;
mod path_table;
mod placing;
mod planning;
mod relations;
mod repeated_ctes;
mod statements;
mod summarize;
mod user_macros;
mod virtual_columns;

use std::sync::Arc;

use datafusion::common::config::ConfigExtension;
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::exec::{ComputePool, ExecutorKind, FragmentRunner};
use crate::memory;
use crate::metrics::QueryMetrics;
use crate::options::QuiverOptions;
use crate::runtime::QuiverRuntime;

pub use index_calls::IndexAction;
pub use output::{QueryOutput, QueryStream};
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

pub struct QuiverSession {
    context: SessionContext,
    runtime: Arc<QuiverRuntime>,
    tables: Arc<relations::ResolvedTables>,
    views: lazy_views::LazyViews,
    /// `CREATE MACRO`s, expanded before planning.
    macros: user_macros::UserMacros,
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
        let config = session_config(&options, &runtime);
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
            // Before DataFusion's own planners: DuckDB's `/`, `//` and `^` (see `operators`),
            // and `extract` as the faster `date_part` (see `clock_parts`).
            .with_expr_planners(vec![
                Arc::new(duckdb::operators::DuckDbOperators),
                Arc::new(clock_parts::Extract),
            ])
            .with_default_features()
            .with_analyzer_rules(duckdb_then_default_analyzer_rules())
            .with_physical_optimizer_rule(Arc::new(crate::filter_order::CheapConjunctsFirst))
            .with_physical_optimizer_rule(Arc::new(crate::co_partitioned::CoPartitionedJoins))
            .with_physical_optimizer_rule(Arc::new(crate::scan::JoinsAboveScans))
            .with_physical_optimizer_rule(Arc::new(crate::running_window::RunningAggregates))
            .with_physical_optimizer_rule(Arc::new(crate::first_groups::FirstGroups))
            .with_physical_optimizer_rule(Arc::new(crate::rollup_levels::RollupLevels))
            .with_physical_optimizer_rule(Arc::new(crate::distinct_probes::DistinctProbes))
            .with_physical_optimizer_rule(Arc::new(crate::adjacent_repeats::AdjacentRepeats))
            .build();
        let context = SessionContext::new_with_state(state);
        register_duckdb_functions(&context);
        clock_parts::register(&context);
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
        context.add_optimizer_rule(Arc::new(crate::join_order::PlainDimensionsLast));
        let pool = ComputePool::for_target(options.threads)?;
        Ok(Self {
            context,
            runtime,
            tables,
            views: Default::default(),
            macros: Default::default(),
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
        let options = self.options_now();
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

    /// The `quiver.*` settings as set now; a statement resolves them once, when it
    /// begins (`begin_query`), and carries them down.
    pub fn options_now(&self) -> QuiverOptions {
        // Read in place: `state()` would clone the whole session state every statement.
        QuiverOptions::of(self.context.state_ref().read().config_options())
    }

    /// Adds a settings extension (the Lambda executor's `lambda.*`), so that `SET` and
    /// `set` take its keys.
    pub fn add_settings<T: ConfigExtension>(&self, settings: T) {
        let state = self.context.state_ref();
        let mut state = state.write();
        state.config_mut().options_mut().extensions.insert(settings);
    }

    /// Sets a configuration value, as `SET key = value` does (`quiver.coalesce_gap`, or any
    /// of DataFusion's `datafusion.*` settings).
    pub fn set(&self, key: &str, value: &str) -> Result<()> {
        check_value(key, value)?;
        self.context
            .state_ref()
            .write()
            .config_mut()
            .options_mut()
            .set(key, value)
    }
}

/// What a setting's type lets through and Quiver refuses, checked when it is set rather
/// than by the first statement that reads it (which may be much later, or never).
fn check_value(key: &str, value: &str) -> Result<()> {
    let refused = |why: &str| {
        Err(datafusion::error::DataFusionError::Plan(format!(
            "{key}: {why}"
        )))
    };
    match key.to_ascii_lowercase().as_str() {
        "quiver.memory_limit" => memory::parse_limit(value).map(|_| ()),
        "quiver.place" => crate::exec::place::Policy::parse(value).map(|_| ()),
        "quiver.executor" => placing::executor_named(value).map(|_| ()),
        "quiver.max_dollars" => match value.trim().parse::<f64>() {
            Ok(dollars) if dollars.is_nan() || dollars < 0.0 => refused(&format!(
                "'{value}' is not a ceiling in dollars (0 or more; 0: none)"
            )),
            _ => Ok(()),
        },
        "quiver.partial_skip_ratio" => match value.trim().parse::<f64>() {
            Ok(share) if (0.0..=1.0).contains(&share) => Ok(()),
            _ => refused(&format!(
                "'{value}' is not a share of a partial aggregate's rows (0 to 1)"
            )),
        },
        "quiver.function_url" => match value.trim() {
            "" => Ok(()),
            url if url.starts_with("https://") || url.starts_with("http://") => Ok(()),
            _ => refused(&format!(
                "'{value}' is not a URL (the coordinator's function URL, https://…)"
            )),
        },
        _ => Ok(()),
    }
}

/// DataFusion's analyzer rules, after DuckDB's typed meanings (which must see the SQL's own
/// casts and arguments, before type coercion changes them).
fn duckdb_then_default_analyzer_rules(
) -> Vec<Arc<dyn datafusion::optimizer::AnalyzerRule + Send + Sync>> {
    let mut rules: Vec<Arc<dyn datafusion::optimizer::AnalyzerRule + Send + Sync>> =
        vec![Arc::new(duckdb::typed::DuckDbTypedMeanings)];
    rules.extend(datafusion::optimizer::Analyzer::new().rules);
    rules
}

/// DataFusion's settings as Quiver runs them (DuckDB's habits, filters pushed into scans).
fn session_config(options: &SessionOptions, runtime: &Arc<QuiverRuntime>) -> SessionConfig {
    SessionConfig::new()
        .with_target_partitions(options.threads.max(1))
        .with_information_schema(true)
        // Filters pushed into the scan filter rows as the decoder reads them (see
        // `pushdown`); DataFusion's own default is off.
        .set_bool("datafusion.execution.parquet.pushdown_filters", true)
        // `2.5` is a DECIMAL, as in DuckDB (so `CAST(2.5 AS INT)` rounds as DuckDB's does,
        // and `price < 2.5` compares decimals); DataFusion's default reads a DOUBLE.
        .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
        // NULLs last in both directions, as DuckDB sorts (DataFusion's: first in DESC).
        .set_str("datafusion.sql_parser.default_null_ordering", "nulls_last")
        // Natively DataFusion spreads a scan of fewer partitions than threads (a small
        // table is one bucket) over every thread, as it does for its own scan. Fragments
        // are cut below the first exchange, so there a round-robin exchange above the
        // scan would cut every fragment down to a bare scan: buckets are their parallelism.
        .with_round_robin_repartition(options.executor == ExecutorKind::DataFusion)
        .set_usize(
            "datafusion.execution.skip_partial_aggregation_probe_rows_threshold",
            partial_skip::SKIP_PARTIAL_AGGREGATION_AFTER_ROWS,
        )
        .set_usize(
            "datafusion.optimizer.hash_join_single_partition_threshold",
            collect_left_at_most(options, 16 << 20, 1 << 20),
        )
        .set_usize(
            "datafusion.optimizer.hash_join_single_partition_threshold_rows",
            collect_left_at_most(options, 256 << 10, 128 << 10),
        )
        .with_extension(Arc::clone(runtime))
        .with_option_extension(QuiverOptions {
            // As `collect_left_at_most`: where a join is collected decides how the other
            // executors cut a plan, so they keep DataFusion's pick.
            co_partitioned_joins: options.executor == ExecutorKind::DataFusion,
            first_groups: options.executor == ExecutorKind::DataFusion,
            distinct_probes: options.executor == ExecutorKind::DataFusion,
            adjacent_repeats: options.executor == ExecutorKind::DataFusion,
            ..QuiverOptions::default()
        })
}

/// The largest build side (estimated bytes or rows) that a hash join builds once for every
/// partition to probe (`CollectLeft`), instead of repartitioning both its inputs by key:
/// `at_two` on two threads, down to DataFusion's `default` as threads grow. A repartition
/// hashes and copies every probe row, a cost the threads share; the one build is not
/// shared, so its worth falls with more threads. On two cores DataFusion's 1 MiB / 128 Ki
/// rows repartitioned fact tables against filtered dimensions that kept a few thousand
/// rows: TPC-DS q27's 2.9 million store_sales rows for 27 thousand customer_demographics
/// rows (their estimate: a fifth of 1.9 million). At 16 MiB / 256 Ki rows, interleaved
/// processes, best of 3 (2026-11-30): TPC-DS 0.983x (q27 0.72x, q07 0.74x, q50 0.80x), the
/// TPC-H of tpchgen-cli 0.967x (q05 0.82x, q03 0.86x). More threads were not measured.
/// The other executors keep DataFusion's default, `auto` too (its plan may go to workers):
/// where a join is collected decides how a plan is cut into fragments and what travels to
/// workers (`fragment`, `exec::broadcast`).
fn collect_left_at_most(options: &SessionOptions, at_two: usize, default: usize) -> usize {
    match options.executor {
        ExecutorKind::DataFusion => {
            (at_two / options.threads.saturating_sub(1).max(1)).max(default)
        }
        _ => default,
    }
}

#[cfg(test)]
impl QuiverSession {
    /// Two threads on DataFusion's executor here: the session the plan rules' tests run in.
    pub(crate) fn local_two_threads() -> Self {
        let options = SessionOptions {
            threads: 2,
            executor: ExecutorKind::DataFusion,
        };
        Self::new(options).unwrap()
    }
}

/// DuckDB's functions that DataFusion lacks or names otherwise.
fn register_duckdb_functions(context: &SessionContext) {
    duckdb::vectors::register(context);
    duckdb::aggregates::register(context);
    for functions in [
        duckdb::TEXT,
        duckdb::NUMBERS,
        duckdb::BYTES,
        duckdb::LISTS,
        duckdb::STRUCTS,
        duckdb::HASHES,
    ] {
        duckdb::row_functions::register(context, functions);
    }
}
