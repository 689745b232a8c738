//! A progress bar on standard error for queries that run longer than a second, when standard
//! error is a terminal: buckets done and bytes read.

use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quiver_core::runtime::QuiverRuntime;

pub struct Progress {
    task: tokio::task::JoinHandle<()>,
    bar: ProgressBar,
}

impl Progress {
    pub fn start(runtime: Arc<QuiverRuntime>) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let shown = bar.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let bar = shown;
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed} buckets {pos}/{len} · {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            loop {
                let now = runtime.metrics().snapshot();
                bar.set_length(now.buckets_total);
                bar.set_position(now.buckets_done);
                bar.set_message(format!("{:.1} MB read", now.bytes_read as f64 / 1e6));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { task, bar }
    }

    pub fn finish(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}
