//! Iceberg tables, read from their location as DuckDB's `iceberg_scan` reads them: the
//! metadata file (the newest, or a named version), the snapshot a query asks for, its
//! manifest list, then, per query, only the manifests its filters may need. The manifests'
//! per-file bounds become the table's file index, so filters drop data files before any
//! footer is read; position deletes become row selections of the scan, equality deletes
//! anti-joins.
//!
//! avro (the container files) · spec (metadata.json) · manifests (lists and entries) ·
//! partitions (manifests pruned by their summaries) · bounds (the bounds' binary form) ·
//! deletes (position delete files) · equality (equality delete files) · table (the
//! provider) · introspect (`iceberg_snapshots`, `iceberg_metadata`).

mod avro;
mod bounds;
mod deletes;
mod equality;
mod introspect;
mod manifests;
mod partitions;
mod spec;
mod table;

use bytes::Bytes;
use datafusion::error::{DataFusionError, Result};

use crate::error::QuiverError;
use crate::runtime::QuiverRuntime;
use crate::source::ObjectMeta;

pub use introspect::{metadata_table, snapshots_table};
pub use spec::SnapshotChoice;

pub use table::IcebergTable;

use manifests::ManifestFile;
use spec::{Snapshot, TableMetadata};

/// What of a table a query reads: its rows (`iceberg_scan`), its snapshots
/// (`iceberg_snapshots`) or its manifests' entries (`iceberg_metadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcebergRead {
    Rows,
    Snapshots,
    Metadata,
}

/// How `iceberg_scan` and its siblings were asked to read a table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IcebergOptions {
    pub snapshot: SnapshotChoice,
    /// The metadata version to read (`version => '3'`); the newest otherwise.
    pub version: Option<String>,
    /// Paths in the metadata that start with the table's written location are read under
    /// the location given instead (a table copied or moved since).
    pub allow_moved_paths: bool,
}

/// A table's snapshot as its metadata and manifest list describe it: no manifest read.
#[derive(Debug, Clone)]
pub struct IcebergSnapshot {
    pub location: String,
    pub metadata: TableMetadata,
    pub snapshot: Option<Snapshot>,
    pub manifests: Vec<ManifestFile>,
    options: IcebergOptions,
}

impl IcebergSnapshot {
    /// Reads the metadata file and the chosen snapshot's manifest list.
    pub async fn open(
        runtime: &QuiverRuntime,
        location: &str,
        options: &IcebergOptions,
    ) -> Result<Self> {
        let location = location.trim_end_matches('/').to_string();
        let file = metadata_file(runtime, &location, options.version.as_deref()).await?;
        let bytes = read(runtime, &file).await?;
        let metadata = TableMetadata::parse(&file.path, &bytes).map_err(plan_error)?;
        let snapshot = metadata
            .snapshot(options.snapshot)
            .map_err(|e| plan_error(format!("{location}: {e}")))?
            .cloned();
        let mut opened = Self {
            location,
            metadata,
            snapshot: None,
            manifests: vec![],
            options: options.clone(),
        };
        if let Some(snapshot) = snapshot {
            let list = snapshot.manifest_list.as_deref().ok_or_else(|| {
                plan_error(format!(
                    "{}: snapshot {} keeps its manifests inline (format 1 without a manifest \
                     list), which is not supported",
                    opened.location, snapshot.snapshot_id
                ))
            })?;
            let container = opened.read_avro(runtime, list, None).await?;
            opened.manifests = manifests::manifest_list(&container)
                .map_err(|e| plan_error(format!("{list}: {e}")))?;
            opened.snapshot = Some(snapshot);
        }
        Ok(opened)
    }

    /// Where a path written in the metadata is read from (see `allow_moved_paths`).
    fn resolve(&self, path: &str) -> String {
        let written = self.metadata.location.trim_end_matches('/');
        match path.strip_prefix(written) {
            Some(rest) if self.options.allow_moved_paths && written != self.location => {
                format!("{}{rest}", self.location)
            }
            _ => path.to_string(),
        }
    }

    /// An Avro file the metadata names, of `size` if known.
    async fn read_avro(
        &self,
        runtime: &QuiverRuntime,
        path: &str,
        size: Option<u64>,
    ) -> Result<avro::Container> {
        let path = self.resolve(path);
        let bytes = read(runtime, &object_meta(runtime, &path, size).await?).await?;
        avro::read_container(&bytes).map_err(|e| plan_error(format!("{path}: {e}")))
    }

    /// The live entries of `manifest`.
    async fn entries(
        &self,
        runtime: &QuiverRuntime,
        manifest: &ManifestFile,
    ) -> Result<Vec<manifests::ManifestEntry>> {
        let size = u64::try_from(manifest.length).ok().filter(|&l| l > 0);
        let container = self.read_avro(runtime, &manifest.path, size).await?;
        let mut entries = manifests::manifest_entries(&container, manifest)
            .map_err(|e| plan_error(format!("{}: {e}", manifest.path)))?;
        for entry in &mut entries {
            entry.path = self.resolve(&entry.path);
        }
        Ok(entries)
    }
}

/// The metadata file of the table at `location`: the location itself if it names one, else
/// `version` (a number, or a file name with or without `.metadata.json`), else the newest
/// file `metadata/` lists (by the version its name starts with), else the version hint.
async fn metadata_file(
    runtime: &QuiverRuntime,
    location: &str,
    version: Option<&str>,
) -> Result<ObjectMeta> {
    if location.ends_with(".metadata.json") || location.ends_with(".metadata.json.gz") {
        return object_meta(runtime, location, None).await;
    }
    let folder = format!("{location}/metadata");
    // A source that cannot list (HTTP without index pages) may still have a version hint.
    let listing = runtime
        .source_for(&folder)?
        .list(&format!("{folder}/"))
        .await;
    let listed = listing.as_deref().unwrap_or_default();
    let files: Vec<(&str, &ObjectMeta)> = listed
        .iter()
        .filter_map(|f| Some((f.path.rsplit('/').next()?, f)))
        .filter(|(name, _)| name.ends_with(".metadata.json"))
        .collect();
    let named = |wanted: &str| {
        let number: Option<u64> = wanted.trim_start_matches('v').parse().ok();
        let found = files.iter().find(|(name, _)| {
            *name == wanted
                || name.strip_suffix(".metadata.json") == Some(wanted)
                || (number.is_some() && version_of(name) == number)
        });
        found.map(|(_, meta)| (*meta).clone())
    };
    // A name the listing lacks is asked for by HEAD.
    let hinted = |hint: &str| match named(hint) {
        Some(meta) => Ok(meta),
        None if hint.ends_with(".metadata.json") => Err(format!("{folder}/{hint}")),
        None => Err(format!("{folder}/v{hint}.metadata.json")),
    };
    let chosen = match version {
        Some(version) => hinted(version),
        None => match files.iter().max_by_key(|(name, _)| version_of(name)) {
            Some((_, newest)) => Ok((*newest).clone()),
            None => match read_whole(runtime, &format!("{folder}/version-hint.text")).await {
                Ok(text) => hinted(String::from_utf8_lossy(&text).trim()),
                // A listing that failed other than by finding nothing (a denied request, an
                // unreachable store) says more than "no table".
                Err(_) => {
                    if let Err(failed) = listing {
                        if !matches!(failed, QuiverError::NotFound { .. }) {
                            return Err(failed.into());
                        }
                    }
                    return Err(plan_error(format!(
                        "{location} is not an Iceberg table: no metadata file in {folder}/ \
                         (name the metadata file itself, e.g. \
                         iceberg_scan('{folder}/00003-….metadata.json'))"
                    )));
                }
            },
        },
    };
    match chosen {
        Ok(listed) => Ok(listed),
        Err(path) => object_meta(runtime, &path, None).await,
    }
}

/// The version a metadata file's name starts with: `v3.metadata.json`, `00003-….metadata.json`.
fn version_of(name: &str) -> Option<u64> {
    let digits: String = name
        .trim_start_matches('v')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// An object Iceberg never rewrites under its name: remotely, known from the metadata alone
/// when its `size` is (no HEAD); locally a stat, as the local source holds reads to a file's
/// size and time.
async fn object_meta(runtime: &QuiverRuntime, path: &str, size: Option<u64>) -> Result<ObjectMeta> {
    let remote = path.contains("://") && !path.starts_with("file://");
    match size {
        Some(size) if remote => Ok(ObjectMeta {
            path: path.to_string(),
            size,
            version: format!("iceberg {size}"),
        }),
        _ => Ok(runtime.source_for(path)?.head(path).await?),
    }
}

/// A whole object (metadata, manifest lists and manifests are small and read once).
async fn read(runtime: &QuiverRuntime, meta: &ObjectMeta) -> Result<Bytes> {
    Ok(runtime.reader(meta)?.whole("iceberg").await?)
}

/// A whole object known by its path alone.
async fn read_whole(runtime: &QuiverRuntime, path: &str) -> Result<Bytes> {
    read(runtime, &object_meta(runtime, path, None).await?).await
}

fn plan_error(message: impl Into<String>) -> DataFusionError {
    DataFusionError::Plan(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions_are_read_from_either_naming() {
        assert_eq!(version_of("v12.metadata.json"), Some(12));
        assert_eq!(version_of("00003-1b2c.metadata.json"), Some(3));
        assert_eq!(version_of("metadata.json"), None);
    }
}
