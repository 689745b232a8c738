//! Build, refresh and show: what `quiver index` and `CALL quiver_index_*` run.

use datafusion::error::{DataFusionError, Result};

use crate::runtime::QuiverRuntime;
use crate::source::ObjectMeta;

use super::entries::{indexed_fields, now_ms};
use super::{default_location, FileIndex, RefreshSummary};

/// What an index holds and how it compares with a fresh listing (`quiver index show`),
/// or what a build or refresh just wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexStatus {
    pub location: String,
    pub glob: String,
    /// Files it describes.
    pub files: usize,
    /// Columns with min, max and null count.
    pub columns: Vec<String>,
    pub built_at_ms: u64,
    /// Listed files it does not describe as they are now (new or rewritten) ...
    pub changed: usize,
    /// ... and files it describes that are no longer listed.
    pub deleted: usize,
    /// Set by a refresh.
    pub refresh: Option<RefreshSummary>,
}

impl IndexStatus {
    fn of(index: &FileIndex, location: &str, listed: &[ObjectMeta]) -> Self {
        let listed_paths: std::collections::HashSet<&str> =
            listed.iter().map(|f| f.path.as_str()).collect();
        Self {
            location: location.to_string(),
            glob: index.glob.clone(),
            files: index.len(),
            columns: indexed_fields(&index.data_schema)
                .iter()
                .map(|f| f.name().clone())
                .collect(),
            built_at_ms: index.built_at_ms,
            changed: listed.iter().filter(|f| !index.is_fresh(f)).count(),
            deleted: index
                .rows_by_path
                .keys()
                .filter(|p| !listed_paths.contains(p.as_str()))
                .count(),
            refresh: None,
        }
    }

    /// A few lines for people.
    pub fn report(&self) -> String {
        let age_s = now_ms().saturating_sub(self.built_at_ms) / 1000;
        let mut out = format!(
            "index: {}\nglob: {}\nfiles: {} indexed, {} new or changed since, {} deleted since\n\
             columns: {}\nbuilt: {} s ago\n",
            self.location,
            self.glob,
            self.files,
            self.changed,
            self.deleted,
            self.columns.join(", "),
            age_s
        );
        if let Some(refresh) = &self.refresh {
            out.push_str(&format!(
                "refresh: {} footers read, {} entries unchanged, {} dropped\n",
                refresh.footers_read, refresh.unchanged, refresh.dropped
            ));
        }
        out
    }
}

/// The files `glob` names now (no hive columns: an index is of files).
async fn listed(runtime: &QuiverRuntime, glob: &str) -> Result<Vec<ObjectMeta>> {
    let options = crate::source::ListingOptions {
        hive_partitioning: Some(false),
        s3: runtime.query().settings.s3.clone(),
        nothing_is_empty: false,
    };
    let listing =
        crate::source::list_files(&runtime.sources, &[glob.to_string()], &options).await?;
    Ok(listing.files.into_iter().map(|f| f.meta).collect())
}

/// Writes `index` to `location`, whole, and says what it holds of `files`.
async fn write(
    runtime: &QuiverRuntime,
    location: &str,
    index: &FileIndex,
    files: &[ObjectMeta],
) -> Result<IndexStatus> {
    let bytes = index.to_parquet()?;
    runtime.source_for(location)?.put(location, bytes).await?;
    Ok(IndexStatus::of(index, location, files))
}

/// Builds the index of every file `glob` matches and writes it to `to` (default: beside
/// the data). The statement's settings say how to reach them.
pub async fn build_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let files = listed(runtime, glob).await?;
    let index = FileIndex::build(runtime, glob, &files).await?;
    write(runtime, &location, &index, &files).await
}

/// Lists `glob` again and reads footers only of files that are new or changed, dropping
/// entries of deleted ones; builds the index if there is none yet.
pub async fn refresh_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let Some(old) = read_at(runtime, &location).await? else {
        let mut status = build_index(runtime, glob, to).await?;
        status.refresh = Some(RefreshSummary {
            footers_read: status.files,
            ..Default::default()
        });
        return Ok(status);
    };
    let files = listed(runtime, glob).await?;
    let (index, summary) = old.refresh(runtime, &files).await?;
    let index = FileIndex {
        glob: glob.to_string(),
        ..index
    };
    let mut status = write(runtime, &location, &index, &files).await?;
    status.refresh = Some(summary);
    Ok(status)
}

/// What the index of `glob` holds, and how many files changed since it was built.
pub async fn show_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let index = read_at(runtime, &location).await?.ok_or_else(|| {
        DataFusionError::Plan(format!(
            "no index at {location}; build one with: quiver index build '{glob}'"
        ))
    })?;
    let files = listed(runtime, glob).await?;
    Ok(IndexStatus::of(&index, &location, &files))
}

fn location(glob: &str, to: Option<&str>) -> Result<String> {
    match to {
        Some(to) => Ok(to.to_string()),
        None => default_location(glob),
    }
}

/// The index at `location`, or `None` if there is none.
async fn read_at(runtime: &QuiverRuntime, location: &str) -> Result<Option<FileIndex>> {
    match runtime.source_for(location)?.head(location).await {
        Ok(meta) => Ok(Some(FileIndex::read(runtime, &meta).await?)),
        Err(crate::error::QuiverError::NotFound { .. }) => Ok(None),
        Err(other) => Err(other.into()),
    }
}
