//! The `quiver` command: parses arguments, runs SQL through quiver-core, prints results;
//! with no command, the interactive shell. All query behaviour lives in the core, where
//! the browser and Lambda get it too.

mod cache;
mod calibrate;
mod catalog;
#[cfg(target_os = "linux")]
mod code_pages;
mod output;
mod progress;
mod sessions;
mod shell;
mod statement_end;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use datafusion::physical_plan::displayable;
use quiver_core::cost::WorkerCost;
use quiver_core::format::OutputFormat;
use quiver_core::metrics::QueryMetrics;
use quiver_core::{describe, ExecutorKind, QuiverSession, SessionOptions};
use quiver_lambda_executor::executor::LambdaRunner;

use output::{closed_pipe, print_stream, Printing};
use progress::Progress;
use sessions::{apply_settings, new_session, query_session};

/// mimalloc (see `quiver_core::allocator`).
#[global_allocator]
static ALLOCATOR: quiver_core::allocator::Allocator = quiver_core::allocator::Allocator;

const EXAMPLES: &str = "\
Examples:
  quiver                                   # the shell (on a terminal)
  quiver < script.sql                      # as `duckdb < script.sql`: every answer, dot commands
  quiver query \"SELECT count(*) FROM 'data/*.parquet'\"
  quiver query --format csv \"SELECT _file, count(*) FROM 'data/**/*.parquet' GROUP BY 1\"
  quiver query \"SELECT * FROM read_parquet('logs/', hive_partitioning => true) WHERE date = '2024-01-01'\"
  quiver query \"SELECT * FROM read_parquet('f.parquet', schema => 'id BIGINT')\"
  echo \"CREATE VIEW t AS SELECT * FROM 'data/*.parquet'; SELECT count(*) FROM t\" | quiver query -
  quiver explain \"SELECT sum(x) FROM 'data/*.parquet' WHERE y > 10\"
  quiver query --executor lambda --function quiver-worker --workers 8 \\
      \"SELECT count(*) FROM 's3://bucket/logs/*.parquet'\"
  quiver query \"SELECT * FROM parquet_metadata('data/*.parquet')\"
  quiver query --set quiver.memory_limit=2GB --format parquet --output sorted.parquet \\
      \"SELECT * FROM 'data/*.parquet' ORDER BY ts\"   # sorts beyond 2 GB spill to disk
  quiver index build 's3://bucket/events/**/*.parquet'

Remote bytes read are kept in ~/.cache/quiver (4 GiB, least recently used leave first), so the
next run reads them from disk (`quiver cache show`, `quiver cache clear`);
QUIVER_DISK_CACHE_BYTES=0 or --set quiver.disk_cache_bytes=0 turns that off.";

const INDEX_EXAMPLES: &str = "\
Examples:
  quiver index build 's3://bucket/events/**/*.parquet'     # writes events/_quiver_index
  quiver index refresh 's3://bucket/events/**/*.parquet'   # reads footers of new or changed files only
  quiver index show 's3://bucket/events/**/*.parquet'
  quiver index build 'data/*.parquet' --to 'idx/data.parquet'
  quiver query --set quiver.index=idx/data.parquet \"SELECT count(*) FROM 'data/*.parquet' WHERE d >= '2024-06-01'\"

Queries use the index beside the data on their own (quiver.index = auto | off | URI).";

#[derive(Parser)]
#[command(
    name = "quiver",
    version,
    about = "SQL over Parquet files: `quiver` alone opens a shell",
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run SQL (several `;`-separated statements run in order; the last one's result prints).
    #[command(after_help = EXAMPLES)]
    Query(QueryArgs),
    /// Show the plan: files, row groups kept and pruned, buckets, bytes planned.
    #[command(after_help = EXAMPLES)]
    Explain(QueryArgs),
    /// Build, refresh or show the persistent index that drops files before their footers
    /// are read.
    #[command(after_help = INDEX_EXAMPLES)]
    Index(IndexArgs),
    /// Show or clear the disk cache, where remote bytes are kept for the next runs.
    Cache(cache::CacheArgs),
    /// Measure this machine's bandwidth to a source and its decode rate, which the `auto`
    /// executor's estimates use (queries run here measure them too); alone, show them.
    Calibrate(calibrate::CalibrateArgs),
}

#[derive(Args)]
struct IndexArgs {
    /// build: index every file; refresh: only new or changed files; show: what it holds.
    #[arg(value_enum)]
    action: IndexAction,
    /// The files to index: a path, folder or glob (local, s3:// or http(s)://).
    glob: String,
    /// Where the index lives (default: `_quiver_index` at the glob's literal prefix).
    #[arg(long, value_name = "URI")]
    to: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// An S3-compatible endpoint, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL).
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// The S3 region (default: AWS_REGION, the profile's, or us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Any setting, as SET does (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum IndexAction {
    Build,
    Refresh,
    Show,
}

#[derive(Args)]
struct QueryArgs {
    /// The SQL, or `-` to read it from standard input.
    sql: String,
    /// Output format: table, csv, json, arrow, parquet.
    #[arg(long, short, default_value = "table")]
    format: OutputFormat,
    /// Rows a table shows at most, the first and last halves (0: all). Other formats are
    /// always whole.
    #[arg(long, value_name = "N", default_value_t = 40)]
    max_rows: usize,
    /// Write the result to this file instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Threads to use (default: all).
    #[arg(long)]
    threads: Option<usize>,
    /// Who drives the plan: `local` (DataFusion's threads here), `fragments` (bucket by
    /// bucket on rayon, as the browser does), `lambda` (fragments fanned out to the
    /// deployed worker function named by --function) or `auto` (here or on Lambda, per
    /// query, by the estimates and `quiver.place`). Default: `auto` where a worker
    /// function is named (--function or QUIVER_WORKER_FUNCTION), else `local`.
    #[arg(long, value_parser = parse_executor)]
    executor: Option<ExecutorKind>,
    /// With `--executor lambda`: the worker function's name or ARN (default:
    /// QUIVER_WORKER_FUNCTION).
    #[arg(long, value_name = "NAME")]
    function: Option<String>,
    /// With `--executor lambda`: the coordinator function, which above
    /// `lambda.tree_threshold` (64) workers is invoked as a sub-coordinator for each group
    /// of them (default: QUIVER_COORDINATOR_FUNCTION; without one, every worker is invoked
    /// from here).
    #[arg(long, value_name = "NAME")]
    coordinator: Option<String>,
    /// With `--executor lambda`: workers per scan (default: one per 256 MiB read).
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// With `--executor lambda`: the Lambda API endpoint, e.g. a local emulator
    /// (default: QUIVER_LAMBDA_ENDPOINT, else AWS).
    #[arg(long, value_name = "URL")]
    lambda_endpoint: Option<String>,
    /// Print rows, requests, bytes read, time per phase and what it cost to standard error.
    #[arg(long)]
    profile: bool,
    /// Say what the query would cost (GETs, bytes, Lambda workers and GB-seconds, dollars)
    /// from its footers alone, reading no data: the same as `EXPLAIN COST <query>`.
    #[arg(long)]
    dry_run: bool,
    /// Merge byte ranges closer than this many bytes into one request (default 1 MiB).
    #[arg(long, value_name = "BYTES")]
    coalesce_gap: Option<u64>,
    /// Never read more than this many bytes in one request (default 16 MiB).
    #[arg(long, value_name = "BYTES")]
    max_coalesced_bytes: Option<u64>,
    /// Requests in flight at once per bucket (default 16).
    #[arg(long, value_name = "N")]
    max_concurrent_requests: Option<usize>,
    /// An S3-compatible endpoint, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL).
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// The S3 region (default: AWS_REGION, the profile's, or us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Read public S3 buckets without credentials.
    #[arg(long)]
    anonymous: bool,
    /// Any setting, as SET does: `--set quiver.block_cache_bytes=0`, `--set
    /// quiver.memory_limit=4GB` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
}

impl QueryArgs {
    /// The executor and the Lambda function it may send fragments to.
    fn lambda(&self) -> sessions::Executor {
        sessions::Executor {
            kind: self.executor,
            function: self.function.clone(),
            coordinator: self.coordinator.clone(),
            endpoint: self.lambda_endpoint.clone(),
        }
    }

    /// Every setting the flags make, as (key, value).
    fn settings(&self) -> Result<Vec<(String, String)>, String> {
        let mut settings = vec![];
        let mut add = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                settings.push((key.to_string(), value));
            }
        };
        add(
            "quiver.coalesce_gap",
            self.coalesce_gap.map(|v| v.to_string()),
        );
        add(
            "quiver.max_coalesced_bytes",
            self.max_coalesced_bytes.map(|v| v.to_string()),
        );
        add(
            "quiver.max_concurrent_requests",
            self.max_concurrent_requests.map(|v| v.to_string()),
        );
        add("lambda.workers", self.workers.map(|v| v.to_string()));
        add("quiver.s3_endpoint", self.s3_endpoint.clone());
        add("quiver.s3_region", self.region.clone());
        add(
            "quiver.s3_anonymous",
            self.anonymous.then(|| "true".to_string()),
        );
        for setting in &self.settings {
            let (key, value) = setting
                .split_once('=')
                .ok_or_else(|| format!("--set takes KEY=VALUE, not '{setting}'"))?;
            settings.push((key.trim().to_string(), value.trim().to_string()));
        }
        Ok(settings)
    }
}

fn parse_executor(text: &str) -> Result<ExecutorKind, String> {
    ExecutorKind::parse(text)
        .ok_or_else(|| format!("unknown executor '{text}' (local, fragments, lambda, auto)"))
}

/// The threads that run file system calls (local files are read on tokio's blocking pool):
/// twice the workers, 8 at least. Tokio's default of 512 let a query over 100 local files
/// start 66 threads, each a fresh thread heap whose first page (a 2 MB huge page, zeroed
/// by the kernel) cost more than the footer read it carried: a fifth of a ClickBench
/// `count(*)` over 100 files in `perf`. Reads of cached pages take microseconds, so a few
/// threads keep up; a cold disk still gets a queue of 8 or more.
fn blocking_threads(workers: usize) -> usize {
    (2 * workers).max(8)
}

fn main() -> ExitCode {
    #[cfg(target_os = "linux")]
    code_pages::keep_cached();
    #[cfg(unix)]
    quiver_core::source::mapped::exit_clearly_on_bus_error();
    let cli = Cli::parse();
    let threads = match &cli.command {
        Some(Command::Query(args) | Command::Explain(args)) => args.threads,
        Some(Command::Index(_) | Command::Cache(_) | Command::Calibrate(_)) | None => None,
    }
    .unwrap_or_else(|| SessionOptions::default().threads)
    .max(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .max_blocking_threads(blocking_threads(threads))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            report_error(&format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let outcome = match cli.command {
        Some(command) => runtime.block_on(run(command, threads)),
        None if std::io::stdin().is_terminal() => {
            new_session(SessionOptions::default()).and_then(|s| shell::run(&runtime, s))
        }
        // Piped SQL runs as a script, as `duckdb < script.sql` does.
        None => new_session(SessionOptions::default())
            .and_then(|s| shell::run_script(&runtime, s, std::io::stdin().lock())),
    };
    let code = match outcome {
        Ok(()) => 0,
        Err(message) => {
            report_error(&message);
            1
        }
    };
    drop(runtime);
    exit_now(code)
}

/// Ends the process once everything of ours is dropped (the session, and its temporary
/// folder with it), without the C library's exit handlers: mimalloc's frees all its memory
/// there, page by page, which the system does at exit anyway (2-3 ms of a TPC-H query).
#[cfg(unix)]
fn exit_now(code: u8) -> ExitCode {
    extern "C" {
        fn _exit(code: std::ffi::c_int) -> !;
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit ends the process at once; nothing of ours is left to run or drop.
    unsafe { _exit(code.into()) }
}

#[cfg(not(unix))]
fn exit_now(code: u8) -> ExitCode {
    ExitCode::from(code)
}

fn report_error(message: &str) {
    eprintln!("error: {message}");
}

async fn run(command: Command, threads: usize) -> Result<(), String> {
    let explain = matches!(command, Command::Explain(_));
    let args = match command {
        Command::Query(args) | Command::Explain(args) => args,
        Command::Index(args) => return run_index(args).await,
        Command::Cache(args) => return cache::run(args),
        Command::Calibrate(args) => return calibrate::run(args, threads).await,
    };
    let sql = read_sql(&args)?;
    let (session, lambda) = query_session(&args.lambda(), &args.settings()?, threads).await?;
    if explain {
        let plan = session
            .physical_plan(&sql)
            .await
            .map_err(|e| describe(&e))?;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        return write_text(&args, &text);
    }

    let printing = Printing {
        format: args.format,
        layout: quiver_core::format::TableLayout {
            max_rows: args.max_rows,
            ..Printing::for_terminal().layout
        },
        threads,
    };
    // Rows streamed to the terminal and a bar redrawn on it would garble each other; a table
    // is printed whole at the end.
    let rows_on_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let progress = (printing.format == OutputFormat::Table || !rows_on_terminal)
        .then(|| Progress::start(Arc::clone(session.runtime())));
    let printed = match session.run_streaming(&sql).await {
        Ok(answer) => {
            let metrics = Arc::clone(&answer.metrics);
            print_stream(&printing, answer, args.output.as_deref())
                .await
                .map(|()| metrics)
        }
        Err(e) => Err(describe(&e)),
    };
    if let Some(progress) = progress {
        progress.finish();
    }
    let metrics = printed?;
    if args.profile {
        print_profile(&session, &metrics, lambda.as_deref());
    }
    Ok(())
}

/// The statement to run: the argument, or standard input for `-`; priced only with
/// `--dry-run`.
fn read_sql(args: &QueryArgs) -> Result<String, String> {
    let sql = if args.sql == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading SQL from standard input: {e}"))?;
        text
    } else {
        args.sql.clone()
    };
    Ok(match args.dry_run {
        true => format!("EXPLAIN COST {sql}"),
        false => sql,
    })
}

/// `--profile`: what the statement did, its cost, and what its Lambda workers did.
fn print_profile(session: &QuiverSession, metrics: &QueryMetrics, lambda: Option<&LambdaRunner>) {
    eprint!("{}", metrics.report());
    if let Some(placed) = metrics.placed() {
        eprintln!("{placed}");
    }
    let mut spent = metrics.snapshot();
    let mut on_workers = WorkerCost::default();
    // Under `auto`, a query run here invoked none.
    let workers = lambda
        .map(|runner| runner.take_metrics())
        .filter(|workers| workers.invocations > 0);
    if let Some(workers) = &workers {
        spent.add(&workers.reads);
        on_workers = workers.cost();
    }
    eprintln!("{}", session.cost_line(&spent, on_workers));
    if let Some(workers) = workers {
        eprintln!(
            "lambda workers: {} buckets, {} rows out, {} bytes out, {} bytes exchanged, \
             {} requests, {} bytes read, {} MB held by the largest, {} hedged, \
             {} sub-coordinators",
            workers.buckets,
            workers.rows,
            workers.bytes,
            workers.exchanged,
            workers.reads.requests,
            workers.reads.bytes_read,
            workers.peak_memory.div_ceil(1 << 20),
            workers.hedged,
            workers.sub_coordinators
        );
    }
}

/// `quiver index build|refresh|show`: the session gives the settings (S3 endpoint, region).
async fn run_index(args: IndexArgs) -> Result<(), String> {
    let session = new_session(SessionOptions::default())?;
    let mut settings = args.settings.clone();
    if let Some(endpoint) = &args.s3_endpoint {
        settings.push(format!("quiver.s3_endpoint={endpoint}"));
    }
    if let Some(region) = &args.region {
        settings.push(format!("quiver.s3_region={region}"));
    }
    apply_settings(&session, &settings)?;
    let action = match args.action {
        IndexAction::Build => quiver_core::session::IndexAction::Build,
        IndexAction::Refresh => quiver_core::session::IndexAction::Refresh,
        IndexAction::Show => quiver_core::session::IndexAction::Show,
    };
    let status = session
        .index(action, &args.glob, args.to.as_deref())
        .await
        .map_err(|e| describe(&e))?;
    let text = if args.json {
        serde_json::to_string_pretty(&status).map_err(|e| e.to_string())?
    } else {
        status.report().trim_end().to_string()
    };
    println!("{text}");
    Ok(())
}

fn write_text(args: &QueryArgs, text: &str) -> Result<(), String> {
    match &args.output {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display())),
        None => match writeln!(std::io::stdout(), "{text}") {
            Err(e) if !closed_pipe(&e) => Err(format!("writing to standard output: {e}")),
            _ => Ok(()),
        },
    }
}
