//! Quiver's settings, per session and per query: `SET quiver.coalesce_gap = 0` in SQL, or
//! CLI flags. They live in DataFusion's config, so they travel with a plan's task context.

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool};

use crate::bucket::{BucketOptions, MAX_BUCKET_BYTES, MIN_BUCKET_BYTES};
use crate::cache::{default_dir, BLOCK_CACHE_BYTES};
use crate::fetch::{FetchOptions, COALESCE_GAP, MAX_COALESCED_BYTES, MAX_CONCURRENT_REQUESTS};
use crate::source::{HedgePolicy, S3Options, HEDGE_MIN_MS, HEDGE_MULTIPLE};

/// A statement's settings, resolved once when it begins (`QuiverRuntime::begin_query`) and
/// carried down from there: no stop below re-reads DataFusion's config.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// As set (`SET quiver.…`, the command's flags); what travels to workers.
    pub options: QuiverOptions,
    pub s3: S3Options,
    pub fetch: FetchOptions,
    pub hedge: HedgePolicy,
    pub index: IndexSetting,
}

impl Settings {
    pub fn of(options: QuiverOptions) -> Self {
        Self {
            s3: options.s3(),
            fetch: options.fetch(),
            hedge: options.hedge(),
            index: options.index(),
            options,
        }
    }
}

/// 16 MiB: TPC-H SF 1's build sides that meet a scan fit (Q5's customers and orders of
/// one year take 3.6 MB), and every worker holds its own copy.
pub const BROADCAST_BYTES: u64 = 16 * 1024 * 1024;

extensions_options! {
    /// Settings under the `quiver.` prefix.
    pub struct QuiverOptions {
        /// Byte ranges closer than this are read in one request.
        pub coalesce_gap: u64, default = COALESCE_GAP
        /// No request reads more than this.
        pub max_coalesced_bytes: u64, default = MAX_COALESCED_BYTES
        /// Requests in flight at once, per bucket.
        pub max_concurrent_requests: usize, default = MAX_CONCURRENT_REQUESTS
        /// A remote read still running after this multiple of the source's recent p95 (for
        /// its size) gets a duplicate, and the first answer wins; 0 turns that off.
        pub hedge_multiple: f64, default = HEDGE_MULTIPLE
        /// No read gets a duplicate before this many milliseconds.
        pub hedge_min_ms: u64, default = HEDGE_MIN_MS
        /// Buckets smaller than this are not split off, unless a thread would idle (then down
        /// to 1 MiB); 0 splits every file for every thread.
        pub min_bucket_bytes: u64, default = MIN_BUCKET_BYTES
        /// Runs larger than this are split whatever the thread count.
        pub max_bucket_bytes: u64, default = MAX_BUCKET_BYTES
        /// A hash join's build side up to this size (in memory) travels inside the fragment
        /// that reads its probe side, so the join runs where that side is read (Lambda
        /// workers, the browser's compute threads); 0 keeps joins on the coordinator.
        pub broadcast_bytes: u64, default = BROADCAST_BYTES
        /// Size of the in-memory block cache of fetched bytes (0 turns it off).
        pub block_cache_bytes: u64, default = BLOCK_CACHE_BYTES
        /// Bound of the disk cache, which keeps remote bytes for the processes after this
        /// one (0 turns it off). The `quiver` command keeps 4 GiB unless the environment's
        /// `QUIVER_DISK_CACHE_BYTES` says otherwise; a library session keeps none.
        pub disk_cache_bytes: u64, default = 0
        /// The disk cache's folder; empty for the user's (`$XDG_CACHE_HOME/quiver`, else
        /// `~/.cache/quiver`).
        pub cache_dir: String, default = String::new()
        /// An S3-compatible endpoint, e.g. `http://127.0.0.1:9000` (else `AWS_ENDPOINT_URL`).
        pub s3_endpoint: Option<String>, default = None
        /// The S3 region (else `AWS_REGION`, the profile's, or us-east-1).
        pub s3_region: Option<String>, default = None
        /// Read public buckets without signing.
        pub s3_anonymous: bool, default = false
        /// Path-style (true) or virtual-hosted (false) addressing; path style with an endpoint.
        pub s3_path_style: Option<bool>, default = None
        /// The persistent index: `auto` (use `_quiver_index` at the glob's literal
        /// prefix if the listing sees one), `off`, or the URI of an index file.
        pub index: String, default = "auto".to_string()
        /// What a query's operators may hold: `auto` (80% of this machine's memory, or of
        /// a Lambda function's), `off`, a share (`50%`) or a size (`4GB`, `512MiB`). Sorts
        /// and aggregates spill to disk beyond it; the block cache keeps to a quarter of it.
        pub memory_limit: String, default = "auto".to_string()
        /// A CTE (or derived table) a statement names more than once, and that aggregates,
        /// is computed once and its rows kept for the statement, as DuckDB does; false plans
        /// every reference on its own, as DataFusion does.
        pub materialize_ctes: bool, default = true
        /// `sum`, `min`, `max` and `count` over `ROWS BETWEEN UNBOUNDED PRECEDING AND
        /// CURRENT ROW` (of whole numbers and decimals) are computed in one pass over the
        /// sorted rows; false leaves them to DataFusion's row-by-row window operator.
        pub running_windows: bool, default = true
        /// A hash join whose inputs are both hashed by its keys into the same partitions
        /// (aggregates grouped by them) joins partition by partition, where DataFusion
        /// would merge a small build side into one table; false leaves DataFusion's pick
        /// (the default of the fragments, Lambda and `auto` executors' sessions).
        pub co_partitioned_joins: bool, default = true
        /// A table read whole that hangs off a fact table by its key, listed before a
        /// filtered one (`FROM customer, store_sales, date_dim WHERE d_year = 2001`), is
        /// joined after the filtered ones; false joins in the order the query lists them,
        /// as DataFusion does.
        pub plain_dimensions_last: bool, default = true
        /// A filter's conjuncts (and an OR's parts) are evaluated in turn, each on the rows
        /// the ones before left undecided, into one bitmap; false evaluates them as
        /// DataFusion's nested ANDs and ORs.
        pub conjuncts_in_turn: bool, default = true
        /// `GROUP BY ... LIMIT n` without `ORDER BY` aggregates only the rows of the first
        /// `n` keys it meets (any `n` whole groups answer it); false aggregates every group,
        /// as DataFusion does (the default of the fragments, Lambda and `auto` executors'
        /// sessions: the keys are chosen across partitions).
        pub first_groups: bool, default = true
        /// A ROLLUP or CUBE (grouping sets one of which holds every other's keys) groups
        /// each partition's rows once, by its finest set, and each coarser set from the
        /// groups of a finer one; false looks every row up once per set, as DataFusion does.
        pub rollup_levels: bool, default = true
        /// Below a grouping that computes nothing (DISTINCT, INTERSECT, EXCEPT), a hash
        /// join's probe rows that agree on every probe column read above, the join keys
        /// and the join filter's columns are dropped but the first, while that drops at
        /// least half of them; false probes them all, as DataFusion does (the default of
        /// the fragments, Lambda and `auto` executors' sessions: the node does not travel).
        pub distinct_probes: bool, default = true
        /// Below a grouping that computes nothing (DISTINCT, COUNT(DISTINCT)'s inner
        /// grouping, INTERSECT, EXCEPT), a row equal to the row before it on every column
        /// the grouping reads is dropped, while that drops a fifth of the rows; false
        /// groups every row, as DataFusion does (the default of the fragments, Lambda and
        /// `auto` executors' sessions: the node does not travel).
        pub adjacent_repeats: bool, default = true
        /// A partial aggregate whose states are all fixed-width (COUNT, SUM, AVG, MIN and
        /// MAX of numbers) stops grouping, and passes its rows on to the final aggregate,
        /// where its groups are this share of the rows it probed; any other keeps
        /// DataFusion's `skip_partial_aggregation_probe_ratio_threshold` (0.8). One value
        /// holds for a whole statement (`session::partial_skip`).
        pub partial_skip_ratio: f64, default = 0.1
        /// S3's price per 1,000 GET requests in dollars (AWS's list price, us-east-1), for
        /// `EXPLAIN COST` and `--profile`.
        pub price_per_1000_gets: f64, default = 0.0004
        /// Lambda's price per GB-second of a function's time (x86, us-east-1).
        pub price_per_gb_second: f64, default = 0.000_016_666_7
        /// Lambda's price per million invocations.
        pub price_per_million_invocations: f64, default = 0.2
        /// S3's price per GB sent out to the internet (the first 10 TB a month), which a
        /// query run outside AWS pays and a Lambda worker in the bucket's region does not;
        /// 0 where this machine is in the bucket's region.
        pub price_per_gb_out: f64, default = 0.09
        /// Who runs statements: `local` (DataFusion here), `fragments`, `lambda`, or `auto`
        /// (here or on Lambda, by `quiver.place`); empty for the session's own.
        pub executor: String, default = String::new()
        /// Where `auto` runs a query: `fastest` or `cheapest` by the two estimates, or
        /// always `local` or `lambda` (files on this machine never leave it).
        pub place: String, default = "fastest".to_string()
        /// The most dollars one query may cost where it runs (0: no ceiling); a query whose
        /// estimate is above it everywhere is refused before it reads a data page.
        pub max_dollars: f64, default = 0.0
        /// Queries reading fewer bytes than this never go to Lambda: one worker's share
        /// (`lambda.bytes_per_worker`) gains nothing from a fan-out but an invocation.
        pub lambda_min_bytes: u64, default = 256 * 1024 * 1024
        /// The deployed coordinator's function URL (Terraform's `function_url`), where the
        /// page sends a query that `quiver.place` puts on Lambda, signed with the page's
        /// keys; empty: the page runs every query itself.
        pub function_url: String, default = String::new()
    }
}

impl ConfigExtension for QuiverOptions {
    const PREFIX: &'static str = "quiver";
}

impl QuiverOptions {
    /// The settings in force in `config` (defaults if the session never set any).
    pub fn of(config: &ConfigOptions) -> Self {
        config.extensions.get::<Self>().cloned().unwrap_or_default()
    }

    pub fn fetch(&self) -> FetchOptions {
        FetchOptions {
            coalesce_gap: self.coalesce_gap,
            max_coalesced_bytes: self.max_coalesced_bytes,
            max_concurrent_requests: self.max_concurrent_requests,
        }
    }

    pub fn hedge(&self) -> HedgePolicy {
        HedgePolicy {
            multiple: self.hedge_multiple,
            floor: std::time::Duration::from_millis(self.hedge_min_ms),
        }
    }

    pub fn s3(&self) -> S3Options {
        S3Options {
            // An empty value (SET quiver.s3_region = '') is the default again.
            endpoint: self.s3_endpoint.clone().filter(|e| !e.is_empty()),
            region: self.s3_region.clone().filter(|r| !r.is_empty()),
            anonymous: self.s3_anonymous
                || std::env::var("AWS_SKIP_SIGNATURE")
                    .is_ok_and(|v| v.eq_ignore_ascii_case("true")),
            path_style: self.s3_path_style,
        }
    }

    /// Where the disk cache lives, if it is on.
    pub fn disk_cache_dir(&self) -> Option<std::path::PathBuf> {
        if self.disk_cache_bytes == 0 {
            return None;
        }
        match self.cache_dir.trim() {
            "" => default_dir(),
            dir => Some(dir.into()),
        }
    }

    /// Where to look for a table's index.
    pub fn index(&self) -> IndexSetting {
        match self.index.trim() {
            "" | "auto" => IndexSetting::Auto,
            "off" | "false" | "none" => IndexSetting::Off,
            uri => IndexSetting::At(uri.to_string()),
        }
    }

    /// How a scan's buckets and partitions are planned: these settings, `threads`, and the
    /// limit of the query's memory `pool` (the planner's, and a Lambda worker's own).
    pub fn buckets(&self, threads: usize, pool: &dyn MemoryPool) -> BucketOptions {
        let limit = match pool.memory_limit() {
            MemoryLimit::Finite(bytes) => Some(bytes as u64),
            _ => None,
        };
        BucketOptions {
            min_bucket_bytes: self.min_bucket_bytes,
            max_bucket_bytes: self.max_bucket_bytes,
            ..BucketOptions::for_threads(threads)
        }
        .within_memory_limit(limit)
    }
}

/// `quiver.index`, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IndexSetting {
    /// The index beside the data, if the listing saw one.
    #[default]
    Auto,
    Off,
    /// An index file anywhere (a path or URL).
    At(String),
}
