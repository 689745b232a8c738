//! What a query did: requests, bytes, cache hits, buckets, time per phase. Counters are
//! atomics shared by every bucket of a query; `snapshot` reads them into one plain value,
//! the only shape they leave in (`--profile`, the progress bar, the page's profile, the
//! Lambda functions' responses).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use web_time::Instant;

#[derive(Debug, Default)]
pub struct QueryMetrics {
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub footer_requests: AtomicU64,
    pub footer_cache_hits: AtomicU64,
    /// Bytes served by the block cache instead of a request.
    pub cache_hit_bytes: AtomicU64,
    /// Pieces and bytes served by the disk cache (kept by an earlier process).
    pub disk_cache_hits: AtomicU64,
    pub disk_cache_hit_bytes: AtomicU64,
    /// Reads the range plan did not foresee (served, but counted so that a gap shows).
    pub unplanned_requests: AtomicU64,
    /// Late reads that got a duplicate request (see `source::hedge`).
    pub hedged_requests: AtomicU64,
    /// Requests given up unfinished because their duplicate answered first.
    pub abandoned_requests: AtomicU64,
    pub files: AtomicU64,
    pub files_pruned: AtomicU64,
    /// Files the persistent index ruled out: their footers were never read.
    pub files_index_pruned: AtomicU64,
    /// An Iceberg table's manifests read, and those its manifest list's partition
    /// summaries ruled out (never read).
    pub manifests: AtomicU64,
    pub manifests_pruned: AtomicU64,
    pub row_groups: AtomicU64,
    pub row_groups_pruned: AtomicU64,
    pub buckets_total: AtomicU64,
    pub buckets_done: AtomicU64,
    pub bytes_planned: AtomicU64,
    pub rows_out: AtomicU64,
    phases: Mutex<Vec<(&'static str, Duration)>>,
    /// Where the statement ran and why, when the `auto` executor chose (see `exec::place`).
    placed: Mutex<Option<String>>,
    /// Every request and bucket computation over time, for the profile's waterfall.
    pub timeline: Timeline,
}

/// 20,000 spans at most: a picture of a query, not a trace of every request of a huge one.
const MAX_SPANS: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// A request for a footer.
    Footer,
    /// A request for column chunks.
    Data,
    /// Decoding and computing one bucket.
    Compute,
}

/// One request or computation: which lane (file and row groups, or bucket) and when, in
/// milliseconds since the query began.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub kind: SpanKind,
    pub lane: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub bytes: u64,
}

/// The last part of a path, to name lanes.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[derive(Debug, Default)]
pub struct Timeline {
    origin: OnceLock<Instant>,
    spans: Mutex<Vec<Span>>,
}

impl Timeline {
    /// Marks a span's start (the first mark is the timeline's origin).
    pub fn begin(&self) -> Instant {
        self.origin.get_or_init(Instant::now);
        Instant::now()
    }

    pub fn end(&self, started: Instant, kind: SpanKind, lane: String, bytes: u64) {
        let origin = *self.origin.get_or_init(Instant::now);
        let ms = |t: Instant| t.saturating_duration_since(origin).as_secs_f64() * 1e3;
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if spans.len() < MAX_SPANS {
            spans.push(Span {
                kind,
                lane,
                start_ms: ms(started),
                end_ms: ms(Instant::now()),
                bytes,
            });
        }
    }

    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The counters of a query at one moment, as every face reports them. Its JSON is what
/// `web/src/quiver-wasm.ts` types as `Metrics` (a test keeps the two in step).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricsSnapshot {
    pub rows_out: u64,
    pub files: u64,
    pub files_pruned: u64,
    pub files_index_pruned: u64,
    pub manifests: u64,
    pub manifests_pruned: u64,
    pub row_groups: u64,
    pub row_groups_pruned: u64,
    pub buckets_total: u64,
    pub buckets_done: u64,
    pub requests: u64,
    pub footer_requests: u64,
    pub unplanned_requests: u64,
    pub hedged_requests: u64,
    pub abandoned_requests: u64,
    pub bytes_read: u64,
    pub bytes_planned: u64,
    pub footer_cache_hits: u64,
    pub cache_hit_bytes: u64,
    pub disk_cache_hits: u64,
    pub disk_cache_hit_bytes: u64,
    /// Time per phase, in the order phases first ran.
    pub phases: Vec<Phase>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub ms: f64,
}

impl MetricsSnapshot {
    /// Adds another query's (or worker's) counters and phase times to these.
    pub fn add(&mut self, other: &MetricsSnapshot) {
        self.rows_out += other.rows_out;
        self.files += other.files;
        self.files_pruned += other.files_pruned;
        self.files_index_pruned += other.files_index_pruned;
        self.manifests += other.manifests;
        self.manifests_pruned += other.manifests_pruned;
        self.row_groups += other.row_groups;
        self.row_groups_pruned += other.row_groups_pruned;
        self.buckets_total += other.buckets_total;
        self.buckets_done += other.buckets_done;
        self.requests += other.requests;
        self.footer_requests += other.footer_requests;
        self.unplanned_requests += other.unplanned_requests;
        self.hedged_requests += other.hedged_requests;
        self.abandoned_requests += other.abandoned_requests;
        self.bytes_read += other.bytes_read;
        self.bytes_planned += other.bytes_planned;
        self.footer_cache_hits += other.footer_cache_hits;
        self.cache_hit_bytes += other.cache_hit_bytes;
        self.disk_cache_hits += other.disk_cache_hits;
        self.disk_cache_hit_bytes += other.disk_cache_hit_bytes;
        for phase in &other.phases {
            self.add_phase(&phase.name, phase.ms);
        }
    }

    /// Adds `ms` to the phase `name`, appending it if new.
    pub fn add_phase(&mut self, name: &str, ms: f64) {
        match self.phases.iter_mut().find(|p| p.name == name) {
            Some(phase) => phase.ms += ms,
            None => self.phases.push(Phase {
                name: name.to_string(),
                ms,
            }),
        }
    }

    /// A few lines for people, as `--profile` prints them.
    pub fn report(&self) -> String {
        let mut out = format!(
            "rows: {}\nfiles: {} read, {} pruned ({} of them by the index{}, no footer read)\nrow groups: {} read, {} pruned by statistics\n\
             buckets: {} ({} done)\nrequests: {} ({} for footers, {} unplanned, {} hedged, {} abandoned), {} bytes read, {} bytes planned\n\
             footer cache hits: {}, block cache hits: {} bytes, disk cache hits: {} ({} bytes)\n",
            self.rows_out,
            self.files,
            self.files_pruned,
            self.files_index_pruned,
            // An Iceberg table's index is its manifests' bounds.
            if self.manifests > 0 { " or the manifests' bounds" } else { "" },
            self.row_groups,
            self.row_groups_pruned,
            self.buckets_total,
            self.buckets_done,
            self.requests,
            self.footer_requests,
            self.unplanned_requests,
            self.hedged_requests,
            self.abandoned_requests,
            self.bytes_read,
            self.bytes_planned,
            self.footer_cache_hits,
            self.cache_hit_bytes,
            self.disk_cache_hits,
            self.disk_cache_hit_bytes,
        );
        if self.manifests + self.manifests_pruned > 0 {
            out.push_str(&format!(
                "manifests: {} read, {} pruned by their partitions\n",
                self.manifests, self.manifests_pruned
            ));
        }
        for phase in &self.phases {
            out.push_str(&format!("time {}: {:.1} ms\n", phase.name, phase.ms));
        }
        out
    }
}

impl QueryMetrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    pub fn record_read(&self, bytes: u64) {
        self.requests.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes, Relaxed);
    }

    /// Adds `elapsed` to the phase `name` (phases keep the order they first appear in).
    pub fn record_phase(&self, name: &'static str, elapsed: Duration) {
        let mut phases = self.phases.lock().unwrap_or_else(|p| p.into_inner());
        match phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => *total += elapsed,
            None => phases.push((name, elapsed)),
        }
    }

    pub fn set_placed(&self, line: String) {
        *self.placed.lock().unwrap_or_else(|p| p.into_inner()) = Some(line);
    }

    /// Where the statement ran and why, if a placement was chosen.
    pub fn placed(&self) -> Option<String> {
        self.placed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn phases(&self) -> Vec<(&'static str, Duration)> {
        self.phases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let g = Self::get;
        MetricsSnapshot {
            rows_out: g(&self.rows_out),
            files: g(&self.files),
            files_pruned: g(&self.files_pruned),
            files_index_pruned: g(&self.files_index_pruned),
            manifests: g(&self.manifests),
            manifests_pruned: g(&self.manifests_pruned),
            row_groups: g(&self.row_groups),
            row_groups_pruned: g(&self.row_groups_pruned),
            buckets_total: g(&self.buckets_total),
            buckets_done: g(&self.buckets_done),
            requests: g(&self.requests),
            footer_requests: g(&self.footer_requests),
            unplanned_requests: g(&self.unplanned_requests),
            hedged_requests: g(&self.hedged_requests),
            abandoned_requests: g(&self.abandoned_requests),
            bytes_read: g(&self.bytes_read),
            bytes_planned: g(&self.bytes_planned),
            footer_cache_hits: g(&self.footer_cache_hits),
            cache_hit_bytes: g(&self.cache_hit_bytes),
            disk_cache_hits: g(&self.disk_cache_hits),
            disk_cache_hit_bytes: g(&self.disk_cache_hit_bytes),
            phases: self
                .phases()
                .into_iter()
                .map(|(name, elapsed)| Phase {
                    name: name.to_string(),
                    ms: elapsed.as_secs_f64() * 1e3,
                })
                .collect(),
        }
    }

    /// A few lines for people, as `--profile` prints them.
    pub fn report(&self) -> String {
        self.snapshot().report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page types this JSON by hand (`interface Metrics` in web/src/quiver-wasm.ts):
    /// a field added here and not there, or renamed on one side, fails this test.
    #[test]
    fn the_page_types_every_field_of_the_snapshot() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/src/quiver-wasm.ts");
        let typescript = std::fs::read_to_string(path).expect("web/src/quiver-wasm.ts");
        let start = typescript
            .find("export interface Metrics {")
            .expect("interface Metrics in quiver-wasm.ts");
        let body = &typescript[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
        let mut typed: Vec<&str> = body
            .lines()
            .filter_map(|line| line.trim().split_once(':'))
            .map(|(name, _)| name.trim())
            .filter(|name| !name.starts_with("//") && !name.starts_with('*'))
            .collect();
        let json = serde_json::to_value(MetricsSnapshot::default()).unwrap();
        let mut fields: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        typed.sort_unstable();
        fields.sort_unstable();
        assert_eq!(typed, fields);
    }

    #[test]
    fn snapshots_add_counters_and_phases_by_name() {
        let mut total = MetricsSnapshot::default();
        let mut one = MetricsSnapshot {
            requests: 2,
            bytes_read: 100,
            ..Default::default()
        };
        one.add_phase("run", 5.0);
        total.add(&one);
        one.add_phase("encode", 1.0);
        total.add(&one);
        assert_eq!((total.requests, total.bytes_read), (4, 200));
        let phases: Vec<(&str, f64)> = total
            .phases
            .iter()
            .map(|p| (p.name.as_str(), p.ms))
            .collect();
        assert_eq!(phases, [("run", 10.0), ("encode", 1.0)]);
    }
}
