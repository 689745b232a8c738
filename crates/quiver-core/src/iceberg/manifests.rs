//! A snapshot's manifest list and its manifests, as the spec lays them out (versions 1 and
//! 2): which manifests hold data or deletes, with their partitions' summaries, and each
//! live file's path, size, rows and per-column bounds and null counts.

use std::collections::HashMap;

use super::avro::{Container, Value};

/// A manifest, as the manifest list describes it.
#[derive(Debug, Clone)]
pub struct ManifestFile {
    pub path: String,
    /// Its size in bytes.
    pub length: i64,
    /// 0: data files; 1: delete files.
    pub content: i64,
    pub sequence_number: i64,
    pub spec_id: i32,
    /// The bounds of each partition field (in its spec's order) over the manifest's files.
    pub partitions: Vec<FieldSummary>,
}

#[derive(Debug, Clone, Default)]
pub struct FieldSummary {
    pub contains_null: bool,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
}

/// What a file holds (`content` in the spec's `data_file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    Data,
    PositionDeletes,
    EqualityDeletes,
}

/// A live file of a manifest (a data or a delete file).
#[derive(Debug, Clone)]
pub struct ManifestEntry {
    pub content: Content,
    pub path: String,
    pub format: String,
    pub records: i64,
    pub size: u64,
    /// `status` of the entry: 0 existing, 1 added.
    pub status: i64,
    /// The data sequence number, inherited from the manifest when the entry has none.
    pub sequence_number: i64,
    /// Its partition: the spec, and the value of each of the spec's fields.
    pub spec_id: i32,
    pub partition: Value,
    pub lower: HashMap<i32, Vec<u8>>,
    pub upper: HashMap<i32, Vec<u8>>,
    pub null_counts: HashMap<i32, i64>,
}

/// The manifests a manifest list names.
pub fn manifest_list(container: &Container) -> Result<Vec<ManifestFile>, String> {
    container
        .records
        .iter()
        .map(|record| {
            let path = record.get("manifest_path").as_str();
            let path = path.ok_or("a manifest list entry without manifest_path")?;
            let partitions = record
                .get("partitions")
                .items()
                .iter()
                .map(|summary| FieldSummary {
                    contains_null: summary.get("contains_null") != &Value::Boolean(false),
                    lower: summary.get("lower_bound").as_bytes().map(<[u8]>::to_vec),
                    upper: summary.get("upper_bound").as_bytes().map(<[u8]>::to_vec),
                })
                .collect();
            Ok(ManifestFile {
                path: path.to_string(),
                length: record.get("manifest_length").as_long().unwrap_or(0),
                content: record.get("content").as_long().unwrap_or(0),
                sequence_number: record.get("sequence_number").as_long().unwrap_or(0),
                spec_id: record.get("partition_spec_id").as_long().unwrap_or(0) as i32,
                partitions,
            })
        })
        .collect()
}

/// The live entries of a manifest (those not marked deleted).
pub fn manifest_entries(
    container: &Container,
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, String> {
    let mut entries = vec![];
    for record in &container.records {
        let status = record.get("status").as_long().unwrap_or(1);
        if status == 2 {
            continue;
        }
        let file = record.get("data_file");
        let path = file.get("file_path").as_str();
        let path = path.ok_or("a manifest entry without file_path")?;
        let content = match file.get("content").as_long().unwrap_or(0) {
            0 => Content::Data,
            1 => Content::PositionDeletes,
            2 => Content::EqualityDeletes,
            other => return Err(format!("{path}: unknown file content {other}")),
        };
        entries.push(ManifestEntry {
            content,
            path: path.to_string(),
            format: file
                .get("file_format")
                .as_str()
                .unwrap_or("PARQUET")
                .to_string(),
            records: file.get("record_count").as_long().unwrap_or(0),
            size: file.get("file_size_in_bytes").as_long().unwrap_or(0).max(0) as u64,
            status,
            sequence_number: record
                .get("sequence_number")
                .as_long()
                .unwrap_or(manifest.sequence_number),
            spec_id: manifest.spec_id,
            partition: file.get("partition").clone(),
            lower: bytes_by_id(file.get("lower_bounds")),
            upper: bytes_by_id(file.get("upper_bounds")),
            null_counts: longs_by_id(file.get("null_value_counts")),
        });
    }
    Ok(entries)
}

/// A map of field id to bytes, which Avro keeps as an array of key-value records.
fn bytes_by_id(value: &Value) -> HashMap<i32, Vec<u8>> {
    value
        .items()
        .iter()
        .filter_map(|kv| {
            Some((
                kv.get("key").as_long()? as i32,
                kv.get("value").as_bytes()?.to_vec(),
            ))
        })
        .collect()
}

fn longs_by_id(value: &Value) -> HashMap<i32, i64> {
    value
        .items()
        .iter()
        .filter_map(|kv| Some((kv.get("key").as_long()? as i32, kv.get("value").as_long()?)))
        .collect()
}
