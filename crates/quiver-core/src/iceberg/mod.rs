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

use crate::runtime::QuiverRuntime;

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
        let metadata_path = metadata_path(runtime, &location, options.version.as_deref()).await?;
        let bytes = read_object(runtime, &metadata_path).await?;
        let metadata = TableMetadata::parse(&metadata_path, &bytes).map_err(plan_error)?;
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
            let container = opened.read_avro(runtime, list).await?;
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

    async fn read_avro(&self, runtime: &QuiverRuntime, path: &str) -> Result<avro::Container> {
        let path = self.resolve(path);
        let bytes = read_object(runtime, &path).await?;
        avro::read_container(&bytes).map_err(|e| plan_error(format!("{path}: {e}")))
    }

    /// The live entries of `manifest`.
    async fn entries(
        &self,
        runtime: &QuiverRuntime,
        manifest: &ManifestFile,
    ) -> Result<Vec<manifests::ManifestEntry>> {
        let container = self.read_avro(runtime, &manifest.path).await?;
        let mut entries = manifests::manifest_entries(&container, manifest)
            .map_err(|e| plan_error(format!("{}: {e}", manifest.path)))?;
        for entry in &mut entries {
            entry.path = self.resolve(&entry.path);
        }
        Ok(entries)
    }
}

/// The metadata file of the table at `location`: the location itself if it names one,
/// else `version` (a number or a file name), else the version hint, else the newest file
/// in `metadata/` (by the version number its name starts with).
async fn metadata_path(
    runtime: &QuiverRuntime,
    location: &str,
    version: Option<&str>,
) -> Result<String> {
    if location.ends_with(".metadata.json") || location.ends_with(".metadata.json.gz") {
        return Ok(location.to_string());
    }
    let folder = format!("{location}/metadata");
    let files = runtime
        .source_for(&folder)?
        .list(&format!("{folder}/"))
        .await
        .unwrap_or_default();
    let hint = match version {
        Some(v) => Some(v.to_string()),
        None => match read_object(runtime, &format!("{folder}/version-hint.text")).await {
            Ok(text) => Some(String::from_utf8_lossy(&text).trim().to_string()),
            Err(_) => None,
        },
    };
    let names: Vec<&str> = files
        .iter()
        .filter_map(|f| f.path.rsplit('/').next())
        .filter(|name| name.ends_with(".metadata.json"))
        .collect();
    let chosen = match &hint {
        Some(hint) if hint.ends_with(".metadata.json") => Some(hint.clone()),
        Some(hint) => names
            .iter()
            .find(|name| version_of(name) == hint.parse().ok())
            .map(|name| name.to_string())
            .or_else(|| Some(format!("v{hint}.metadata.json"))),
        None => names
            .iter()
            .max_by_key(|name| version_of(name))
            .map(|name| name.to_string()),
    };
    match chosen {
        Some(name) => Ok(format!("{folder}/{name}")),
        None => Err(plan_error(format!(
            "{location} is not an Iceberg table: no metadata file in {folder}/ (name the \
             metadata file itself, e.g. iceberg_scan('{folder}/00003-….metadata.json'))"
        ))),
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

/// A whole object (metadata, manifest lists and manifests are small and read once).
async fn read_object(runtime: &QuiverRuntime, path: &str) -> Result<Bytes> {
    let meta = runtime.source_for(path)?.head(path).await?;
    Ok(runtime.reader(&meta)?.whole("iceberg").await?)
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
