//! Where a query runs (the `auto` executor): here, at the rates this machine was measured
//! at (`rates`), or on Lambda workers, at the worker model's (`FragmentRunner::estimate`);
//! picked by `quiver.place` under `quiver.max_dollars`, and only among the places that can
//! run it (files on this machine never leave it; small queries never pay an invocation).
//! After a run here, what its reads and threads delivered becomes the next estimate's rates.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::{DataFusionError, Result};

use crate::cost::{Cost, PlannedReads, Prices};
use crate::metrics::{QueryMetrics, SpanKind};
use crate::options::QuiverOptions;
use crate::rates::{
    MeasuredRates, ReadSample, ASSUMED_DECODE_BYTES_PER_THREAD_SECOND, ASSUMED_LATENCY_SECONDS,
    ASSUMED_NETWORK_BYTES_PER_SECOND,
};
use crate::runtime::QuiverRuntime;

/// Where a query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Local,
    Lambda,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::Local => "local",
            Place::Lambda => "lambda",
        }
    }
}

/// `quiver.place`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Fastest,
    Cheapest,
    Always(Place),
}

impl Policy {
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "fastest" => Ok(Self::Fastest),
            "cheapest" => Ok(Self::Cheapest),
            "local" => Ok(Self::Always(Place::Local)),
            "lambda" => Ok(Self::Always(Place::Lambda)),
            other => Err(DataFusionError::Plan(format!(
                "quiver.place: '{other}' is not a policy (fastest, cheapest, local, lambda)"
            ))),
        }
    }
}

/// What running a query in one place is estimated to take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub seconds: f64,
    pub dollars: f64,
}

impl Estimate {
    fn text(&self) -> String {
        format!("{:.2} s ${:.6}", self.seconds, self.dollars)
    }
}

/// Where a query runs, why, and the estimates the choice weighed.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub place: Place,
    pub why: String,
    pub local: Estimate,
    /// `None` where Lambda cannot run the query (`why` says why).
    pub lambda: Option<Estimate>,
}

impl Placement {
    /// One line for `--profile`.
    pub fn line(&self) -> String {
        let lambda = self.lambda.map(|e| format!(", lambda {}", e.text()));
        format!(
            "place: {} ({}; estimates: local {}{})",
            self.place.name(),
            self.why,
            self.local.text(),
            lambda.unwrap_or_default()
        )
    }

    /// `EXPLAIN COST`'s row with the placement's columns after `cost`'s.
    pub fn beside(&self, cost: RecordBatch) -> Result<RecordBatch> {
        let schema = cost.schema();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| (**f).clone()).collect();
        let mut columns = cost.columns().to_vec();
        let text = |v: &str| Arc::new(StringArray::from(vec![v.to_string()])) as _;
        let real = |v: Option<f64>| Arc::new(Float64Array::from(vec![v])) as _;
        for (name, nullable, column) in [
            ("place", false, text(self.place.name())),
            ("local_seconds", false, real(Some(self.local.seconds))),
            ("local_dollars", false, real(Some(self.local.dollars))),
            ("lambda_seconds", true, real(self.lambda.map(|e| e.seconds))),
            ("lambda_dollars", true, real(self.lambda.map(|e| e.dollars))),
            ("why", false, text(&self.why)),
        ] {
            let kind = match name {
                "place" | "why" => DataType::Utf8,
                _ => DataType::Float64,
            };
            fields.push(Field::new(name, kind, nullable));
            columns.push(column);
        }
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }
}

/// A planned query, as the estimates need it: its cost here (no workers), its scans'
/// reads, and the one remote source it reads (if exactly one).
pub struct Planned<'a> {
    pub cost: &'a Cost,
    pub reads: &'a [PlannedReads],
    pub source: Option<&'a str>,
}

/// How long and how much running `planned` here takes, on `threads` threads: its bytes at
/// the source's measured bandwidth or its Parquet at the measured decode rate, the slower
/// (a scan fetches ahead while it decodes), after one request's latency; its GETs, and
/// what leaves S3 for the internet.
pub fn local_estimate(
    planned: &Planned,
    rates: &MeasuredRates,
    options: &QuiverOptions,
    threads: usize,
) -> Estimate {
    let decoded: u64 = planned.reads.iter().map(|r| r.planned_bytes).sum();
    let fetched: u64 = planned.reads.iter().map(|r| r.bytes).sum();
    let per_thread =
        (rates.decode_bytes_per_thread_second).or(ASSUMED_DECODE_BYTES_PER_THREAD_SECOND);
    let compute = decoded as f64 / (per_thread * threads.max(1) as f64);
    let (network, latency) = match planned.source {
        Some(key) => {
            let source = rates.source(key);
            let bandwidth = source.bytes_per_second.or(ASSUMED_NETWORK_BYTES_PER_SECOND);
            let latency = source.latency_seconds.or(ASSUMED_LATENCY_SECONDS);
            (fetched as f64 / bandwidth, latency)
        }
        None => (0.0, 0.0),
    };
    let out_of_s3 = match planned.source {
        Some(key) if key.starts_with("s3://") => fetched as f64 / 1e9 * options.price_per_gb_out,
        _ => 0.0,
    };
    Estimate {
        seconds: network.max(compute) + latency,
        dollars: planned.cost.dollars(&Prices::of(options)) + out_of_s3,
    }
}

/// Why Lambda cannot run `planned` (or should not: under the floor), if it cannot.
pub fn lambda_refusal(planned: &Planned, options: &QuiverOptions) -> Option<String> {
    let buckets: u64 = planned.reads.iter().map(|r| r.buckets).sum();
    let local: u64 = planned.reads.iter().map(|r| r.local_buckets).sum();
    let bytes: u64 = planned.reads.iter().map(|r| r.planned_bytes).sum();
    if buckets == 0 {
        return Some("it reads no Parquet".into());
    }
    if local > 0 {
        return Some("it reads files on this machine, which never leave it".into());
    }
    (bytes < options.lambda_min_bytes).then(|| {
        format!(
            "{} MB read, under quiver.lambda_min_bytes ({} MB)",
            bytes.div_ceil(1_000_000),
            options.lambda_min_bytes / 1_000_000
        )
    })
}

/// Picks the place by `policy` among those that can run the query (`lambda` is `Err(why
/// not)` where Lambda cannot) and whose estimate is within `max_dollars` (0: any); refuses
/// with both estimates and the ceiling when none is.
pub fn choose(
    policy: Policy,
    max_dollars: f64,
    local: Estimate,
    lambda: std::result::Result<Estimate, String>,
) -> Result<Placement> {
    let placement = |place, why: String| Placement {
        place,
        why,
        local,
        lambda: lambda.clone().ok(),
    };
    let within = |e: &Estimate| max_dollars <= 0.0 || e.dollars <= max_dollars;
    let mut order = match (&lambda, policy) {
        (Err(why), _) => vec![(Place::Local, format!("not lambda: {why}"))],
        (Ok(_), Policy::Always(place)) => {
            vec![(place, format!("quiver.place = '{}'", place.name()))]
        }
        (Ok(remote), Policy::Fastest) => {
            let lambda_first = (remote.seconds, remote.dollars) < (local.seconds, local.dollars);
            ranked(lambda_first, "faster")
        }
        (Ok(remote), Policy::Cheapest) => {
            let lambda_first = (remote.dollars, remote.seconds) < (local.dollars, local.seconds);
            ranked(lambda_first, "cheaper")
        }
    };
    if max_dollars > 0.0 {
        order.retain(|(place, _)| match place {
            Place::Local => within(&local),
            Place::Lambda => lambda.as_ref().is_ok_and(within),
        });
    }
    match order.into_iter().next() {
        Some((place, why)) => Ok(placement(place, why)),
        None => {
            let lambda = lambda
                .as_ref()
                .ok()
                .map(|e| format!(", ${:.6} on Lambda", e.dollars));
            Err(DataFusionError::Plan(format!(
                "the query is estimated at ${:.6} here{}, above quiver.max_dollars (${max_dollars})",
                local.dollars,
                lambda.unwrap_or_default()
            )))
        }
    }
}

/// Both places, the policy's pick first, then the other (under a ceiling, the pick may be
/// out of reach).
fn ranked(lambda_first: bool, better: &str) -> Vec<(Place, String)> {
    let (first, second) = match lambda_first {
        true => (Place::Lambda, Place::Local),
        false => (Place::Local, Place::Lambda),
    };
    vec![
        (first, format!("the {better}")),
        (second, format!("the {better} is above quiver.max_dollars")),
    ]
}

/// Where a plan reads: its one remote source (if exactly one), and whether it reads only
/// this machine's files. Found once per statement, for its placement and its observation.
#[derive(Debug, Clone, Default)]
pub struct ReadFrom {
    pub source: Option<String>,
    pub only_here: bool,
}

impl ReadFrom {
    /// `sources` as `source::remote_key` names them (`None` for this machine's files).
    pub fn of(sources: std::collections::BTreeSet<Option<String>>) -> Self {
        let only_here = sources.iter().all(Option::is_none);
        let mut sources = sources;
        let source = match sources.len() {
            1 => sources.pop_first().flatten(),
            _ => None,
        };
        Self { source, only_here }
    }
}

/// After a run here of `seconds` on `threads` threads: the bandwidth and latency of its
/// reads (when all came from one remote source), and its decode rate when it did not wait
/// for the network (it read only this machine's files, or its requests were in flight under
/// a quarter of the run).
pub fn observe(
    runtime: &QuiverRuntime,
    metrics: &QueryMetrics,
    read: &ReadFrom,
    seconds: f64,
    threads: usize,
) {
    let requests = (metrics.timeline.spans().into_iter())
        .filter(|span| span.kind != SpanKind::Compute)
        .map(|span| {
            let small = span.kind == SpanKind::Footer;
            (span.start_ms / 1e3, span.end_ms / 1e3, span.bytes, small)
        })
        .collect();
    let sample = ReadSample::of(requests);
    if let Some(source) = &read.source {
        runtime.rates.observe_source(source, sample);
    }
    if read.only_here || sample.busy_seconds < seconds / 4.0 {
        let planned = QueryMetrics::get(&metrics.bytes_planned);
        runtime.rates.observe_decode(planned, seconds, threads);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK_HERE: Estimate = Estimate {
        seconds: 1.0,
        dollars: 0.5,
    };
    const QUICK_THERE: Estimate = Estimate {
        seconds: 0.5,
        dollars: 0.01,
    };

    #[test]
    fn fastest_and_cheapest_pick_by_their_measure() {
        let slow_cheap = Estimate {
            seconds: 9.0,
            dollars: 0.001,
        };
        let fast = choose(Policy::Fastest, 0.0, slow_cheap, Ok(QUICK_THERE)).unwrap();
        assert_eq!(
            (fast.place, fast.why.as_str()),
            (Place::Lambda, "the faster")
        );
        let cheap = choose(Policy::Cheapest, 0.0, slow_cheap, Ok(QUICK_THERE)).unwrap();
        assert_eq!(cheap.place, Place::Local);
        let line = fast.line();
        assert!(
            line.starts_with("place: lambda (the faster; estimates: local 9.00 s"),
            "{line}"
        );
    }

    #[test]
    fn a_place_that_cannot_run_the_query_is_never_picked() {
        let why = "it reads files on this machine".to_string();
        for policy in [Policy::Fastest, Policy::Always(Place::Lambda)] {
            let placed = choose(policy, 0.0, QUICK_HERE, Err(why.clone())).unwrap();
            assert_eq!(placed.place, Place::Local);
            assert_eq!(placed.why, format!("not lambda: {why}"));
            assert_eq!(placed.lambda, None);
        }
    }

    #[test]
    fn the_ceiling_moves_the_query_or_refuses_it_naming_both_estimates() {
        let moved = choose(
            Policy::Always(Place::Local),
            0.1,
            QUICK_HERE,
            Ok(QUICK_THERE),
        );
        assert!(
            moved.is_err(),
            "an explicit place is kept, and it is over the ceiling"
        );
        let fastest = Estimate {
            seconds: 0.1,
            dollars: 2.0,
        };
        let moved = choose(Policy::Fastest, 1.0, QUICK_HERE, Ok(fastest)).unwrap();
        assert_eq!(moved.place, Place::Local);
        assert_eq!(moved.why, "the faster is above quiver.max_dollars");
        let refused = choose(Policy::Cheapest, 0.001, QUICK_HERE, Ok(QUICK_THERE)).unwrap_err();
        let message = refused.to_string();
        assert!(
            message.contains("$0.500000 here, $0.010000 on Lambda")
                && message.contains("quiver.max_dollars ($0.001)"),
            "{message}"
        );
    }

    #[test]
    fn the_local_estimate_is_the_slower_of_network_and_decoding() {
        let reads = [PlannedReads {
            buckets: 4,
            planned_bytes: 1_000_000_000,
            bytes: 500_000_000,
            requests: 40,
            local_buckets: 0,
        }];
        let cost = Cost {
            data_gets: 1000,
            ..Cost::default()
        };
        let planned = Planned {
            cost: &cost,
            reads: &reads,
            source: Some("s3://b"),
        };
        let options = QuiverOptions::default();
        let rates = MeasuredRates::default();
        // 500 MB at 50 MB/s (10 s) beats 1 GB at 2 x 188 MB/s (2.7 s); then 30 ms.
        let estimate = local_estimate(&planned, &rates, &options, 2);
        assert!((estimate.seconds - 10.03).abs() < 1e-9, "{estimate:?}");
        // 1,000 GETs and 0.5 GB out of S3.
        assert!(
            (estimate.dollars - (0.0004 + 0.045)).abs() < 1e-9,
            "{estimate:?}"
        );
        assert_eq!(
            lambda_refusal(&planned, &options),
            None,
            "1 GB is over the floor"
        );
        let on_disk = Planned {
            source: None,
            ..planned
        };
        assert!((local_estimate(&on_disk, &rates, &options, 2).seconds - 2.66).abs() < 0.01);
    }
}
