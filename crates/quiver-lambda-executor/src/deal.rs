//! Dealing a fragment's buckets: one request per worker, balanced by bytes, or one per
//! sub-coordinator (each with its workers' shares) above the tree threshold. Every request
//! carries the fragment's template (inline, or through the result prefix when too big),
//! the query's `quiver.*` settings and its limits.

use std::collections::BTreeMap;

use datafusion::common::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use quiver_core::bucket::{assign_to_workers, Bucket};
use quiver_core::copy::CopyTarget;
use quiver_core::fragment::Fragment;
use quiver_core::options::QuiverOptions;
use quiver_core::source::unique_id;

use crate::options::LambdaOptions;
use crate::protocol::WorkerRequest;
use crate::results::Results;
use crate::runner::LambdaRunner;

/// What a fragment's workers do with its output.
pub(crate) enum Task<'a> {
    /// Return it (inline, or through the result prefix).
    Return,
    /// For COPY: write it under the target.
    Write(&'a CopyTarget),
    /// For an exchange's first wave: hash it into parts, written as one object.
    Exchange,
}

impl LambdaRunner {
    /// The requests for one fragment, and the function they go to when it is not the
    /// worker (a sub-coordinator). Workers run `template` (the fragment's, or an exchange
    /// side's, with its empty scan) over their buckets. A fragment too big for a request is
    /// written under the result prefix first (`fragment_key`); delete it with
    /// `discard_shipped` once the requests are answered.
    pub(crate) async fn requests(
        &self,
        fragment: &Fragment,
        template: &[u8],
        context: &TaskContext,
        task: Task<'_>,
    ) -> Result<(Option<&str>, Vec<WorkerRequest>)> {
        let options = LambdaOptions::of(context.session_config().options());
        let buckets = fragment.buckets();
        let bytes: u64 = buckets.iter().map(|b| b.bytes).sum();
        let shares = assign_to_workers(&buckets, options.worker_count(bytes, buckets.len()));
        let base = WorkerRequest {
            write: match task {
                Task::Write(target) => Some(target.clone()),
                _ => None,
            },
            exchange: matches!(task, Task::Exchange),
            ..request_for(template, context).await?
        };
        let threshold = options.tree_threshold.max(1);
        match &self.coordinator_function {
            // An exchange's sides write parts that only workers can; no sub-coordinator.
            Some(coordinator) if shares.len() > threshold && !base.exchange => {
                let requests = shares
                    .chunks(threshold)
                    .enumerate()
                    .map(|(i, group)| sub_coordinator_request(fragment, &base, i, group))
                    .collect();
                Ok((Some(coordinator.as_str()), requests))
            }
            _ => {
                let requests = shares
                    .iter()
                    .enumerate()
                    .map(|(i, share)| {
                        let (files, buckets) = fragment.work_for(share);
                        WorkerRequest {
                            worker: i,
                            files,
                            buckets,
                            ..base.clone()
                        }
                    })
                    .collect();
                Ok((None, requests))
            }
        }
    }
}

/// The request of sub-coordinator `i`, which invokes the workers of `group` (at most the
/// tree threshold's count), each with its share.
fn sub_coordinator_request(
    fragment: &Fragment,
    base: &WorkerRequest,
    i: usize,
    group: &[Vec<Bucket>],
) -> WorkerRequest {
    let all: Vec<Bucket> = group.iter().flatten().cloned().collect();
    let (files, renumbered) = fragment.work_for(&all);
    let mut rest = renumbered.as_slice();
    let fan_out = group
        .iter()
        .map(|share| {
            let (mine, others) = rest.split_at(share.len());
            rest = others;
            mine.to_vec()
        })
        .collect();
    WorkerRequest {
        worker: i,
        files,
        buckets: renumbered,
        fan_out: Some(fan_out),
        ..base.clone()
    }
}

/// A request for a new query id running `template`, with the query's settings and
/// limits and no work yet. The template travels inline, or through the result prefix when
/// it is too big for a request (`ship_fragment`).
pub(crate) async fn request_for(template: &[u8], context: &TaskContext) -> Result<WorkerRequest> {
    let config = context.session_config().options();
    let options = LambdaOptions::of(config);
    let query_id = format!("q-{}", unique_id());
    let (fragment, fragment_key) = Results::of(context)?
        .ship_fragment(
            template,
            request_room(&options),
            options.result_prefix.as_deref(),
            &query_id,
        )
        .await?;
    Ok(WorkerRequest {
        query_id,
        worker: 0,
        fragment,
        fragment_key,
        files: vec![],
        buckets: vec![],
        settings: quiver_settings(config),
        result_prefix: options.result_prefix.clone(),
        inline_limit: options.inline_bytes,
        fan_out: None,
        write: None,
        exchange: false,
        join: vec![],
    })
}

/// The bytes of a fragment a request carries inline: Lambda takes 6 MB per request, and
/// base64 makes the fragment a third bigger.
pub(crate) fn request_room(options: &LambdaOptions) -> usize {
    options.inline_bytes * 3 / 4
}

/// Deletes the fragment requests carried through the result prefix, if they did.
pub(crate) async fn discard_shipped(key: Option<String>, context: &TaskContext) {
    if let (Some(key), Ok(results)) = (key, Results::of(context)) {
        results.discard([key.as_str()]).await;
    }
}

/// The query's `quiver.*` settings, so that workers read as the coordinator planned; all
/// but the memory limit and the disk cache, which are each process's own (a worker's are
/// its function's).
/// DataFusion lists an extension's entries without its prefix (`block_cache_bytes`), so
/// they are taken from the extension and prefixed here; filtering the session's entries by
/// `quiver.` found none, and workers ran on their defaults (their block cache on when a
/// query turned it off).
pub fn quiver_settings(config: &ConfigOptions) -> BTreeMap<String, String> {
    use datafusion::common::config::ExtensionOptions;
    QuiverOptions::of(config)
        .entries()
        .into_iter()
        .filter_map(|entry| {
            let key = entry.key.trim_start_matches('.');
            let own = ["memory_limit", "disk_cache_bytes", "cache_dir"].contains(&key);
            (!own).then_some(())?;
            Some((format!("quiver.{key}"), entry.value?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_the_query_s_quiver_settings() {
        let mut config = ConfigOptions::new();
        config.extensions.insert(QuiverOptions::default());
        config.set("quiver.block_cache_bytes", "0").unwrap();
        config.set("quiver.coalesce_gap", "4096").unwrap();
        config.set("quiver.memory_limit", "2MB").unwrap();
        config.set("quiver.disk_cache_bytes", "1000").unwrap();
        let settings = quiver_settings(&config);
        // The coordinator's memory limit and disk cache are its own; a worker has its
        // function's.
        for own in ["memory_limit", "disk_cache_bytes", "cache_dir"] {
            let key = format!("quiver.{own}");
            assert!(!settings.contains_key(&key), "{settings:?}");
        }
        assert_eq!(
            settings.get("quiver.block_cache_bytes").map(String::as_str),
            Some("0")
        );
        assert_eq!(
            settings.get("quiver.coalesce_gap").map(String::as_str),
            Some("4096")
        );
        // Each travels back in: a worker's session takes every key it is sent.
        let mut worker = ConfigOptions::new();
        worker.extensions.insert(QuiverOptions::default());
        for (key, value) in &settings {
            worker.set(key, value).unwrap();
        }
        assert_eq!(QuiverOptions::of(&worker).block_cache_bytes, 0);
    }
}
