//! What a query did: requests, bytes, cache hits, buckets, time per phase. Counters are
//! atomics shared by every bucket of a query, read by `--profile` and the progress bar.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Serialize;
use web_time::Instant;

#[derive(Debug, Default)]
pub struct QueryMetrics {
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub footer_requests: AtomicU64,
    pub footer_cache_hits: AtomicU64,
    /// Bytes served by the block cache instead of a request.
    pub cache_hit_bytes: AtomicU64,
    /// Reads the range plan did not foresee (served, but counted so that a gap shows).
    pub unplanned_requests: AtomicU64,
    pub files: AtomicU64,
    pub files_pruned: AtomicU64,
    pub row_groups: AtomicU64,
    pub row_groups_pruned: AtomicU64,
    pub buckets_total: AtomicU64,
    pub buckets_done: AtomicU64,
    pub bytes_planned: AtomicU64,
    pub rows_out: AtomicU64,
    phases: Mutex<Vec<(&'static str, Duration)>>,
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

    pub fn phases(&self) -> Vec<(&'static str, Duration)> {
        self.phases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A few lines for people, as `--profile` prints them.
    pub fn report(&self) -> String {
        let g = Self::get;
        let mut out = format!(
            "rows: {}\nfiles: {} read, {} pruned by the listing\nrow groups: {} read, {} pruned by statistics\n\
             buckets: {} ({} done)\nrequests: {} ({} for footers, {} unplanned), {} bytes read, {} bytes planned\n\
             footer cache hits: {}, block cache hits: {} bytes\n",
            g(&self.rows_out),
            g(&self.files),
            g(&self.files_pruned),
            g(&self.row_groups),
            g(&self.row_groups_pruned),
            g(&self.buckets_total),
            g(&self.buckets_done),
            g(&self.requests),
            g(&self.footer_requests),
            g(&self.unplanned_requests),
            g(&self.bytes_read),
            g(&self.bytes_planned),
            g(&self.footer_cache_hits),
            g(&self.cache_hit_bytes),
        );
        for (name, elapsed) in self.phases() {
            out.push_str(&format!(
                "time {name}: {:.1} ms\n",
                elapsed.as_secs_f64() * 1e3
            ));
        }
        out
    }
}
