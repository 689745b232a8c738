//! A table's metadata file (`*.metadata.json`) as the Iceberg spec lays it out: its
//! schemas, partition specs and snapshots, and the snapshot a query reads (the current one,
//! or one named by id or time). Format versions 1 and 2; fields of later versions are
//! ignored where they change nothing a reader needs.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::scan::FIELD_ID;

/// The parts of `metadata.json` a reader needs.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TableMetadata {
    pub format_version: u8,
    pub location: String,
    /// Version 1 tables may keep only the one `schema`.
    #[serde(default)]
    pub schemas: Vec<IcebergSchema>,
    #[serde(default)]
    pub schema: Option<IcebergSchema>,
    #[serde(default)]
    pub current_schema_id: Option<i32>,
    #[serde(default)]
    pub partition_specs: Vec<PartitionSpec>,
    #[serde(default)]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct IcebergSchema {
    #[serde(default)]
    pub schema_id: i32,
    pub fields: Vec<IcebergField>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IcebergField {
    pub id: i32,
    pub name: String,
    #[serde(default)]
    pub required: bool,
    #[serde(rename = "type")]
    pub kind: Json,
}

/// How a table's files are partitioned: each field a transform of a source column.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionSpec {
    #[serde(default)]
    pub spec_id: i32,
    pub fields: Vec<PartitionField>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionField {
    pub source_id: i32,
    pub transform: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    pub snapshot_id: i64,
    #[serde(default)]
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    #[serde(default)]
    pub manifest_list: Option<String>,
    #[serde(default)]
    pub schema_id: Option<i32>,
    #[serde(default)]
    pub summary: serde_json::Map<String, Json>,
}

/// Which snapshot a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotChoice {
    #[default]
    Current,
    Id(i64),
    /// The last snapshot taken at or before this time (milliseconds since the epoch).
    AsOf(i64),
}

impl TableMetadata {
    pub fn parse(path: &str, bytes: &[u8]) -> Result<Self, String> {
        let metadata: Self = serde_json::from_slice(bytes)
            .map_err(|e| format!("{path} is not an Iceberg table's metadata: {e}"))?;
        if !(1..=3).contains(&metadata.format_version) {
            return Err(format!(
                "{path}: Iceberg format version {} is not supported (1, 2 and 3 are)",
                metadata.format_version
            ));
        }
        Ok(metadata)
    }

    /// The snapshot `choice` names; `None` for a table without snapshots (no rows).
    pub fn snapshot(&self, choice: SnapshotChoice) -> Result<Option<&Snapshot>, String> {
        match choice {
            SnapshotChoice::Current => match self.current_snapshot_id.filter(|&id| id != -1) {
                None => Ok(None),
                Some(id) => self.snapshot(SnapshotChoice::Id(id)),
            },
            SnapshotChoice::Id(id) => match self.snapshots.iter().find(|s| s.snapshot_id == id) {
                Some(found) => Ok(Some(found)),
                None => Err(format!(
                    "the table has no snapshot {id} (it has {})",
                    self.snapshot_ids()
                )),
            },
            SnapshotChoice::AsOf(ms) => self
                .snapshots
                .iter()
                .filter(|s| s.timestamp_ms <= ms)
                .max_by_key(|s| (s.timestamp_ms, s.sequence_number))
                .map(Some)
                .ok_or_else(|| {
                    let at = datafusion::common::ScalarValue::TimestampMillisecond(Some(ms), None);
                    format!("the table has no snapshot at or before {at} (UTC)")
                }),
        }
    }

    fn snapshot_ids(&self) -> String {
        let ids: Vec<String> = self
            .snapshots
            .iter()
            .map(|s| s.snapshot_id.to_string())
            .collect();
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    }

    pub fn spec(&self, id: i32) -> Option<&PartitionSpec> {
        self.partition_specs.iter().find(|s| s.spec_id == id)
    }

    /// The schema a snapshot was written with (time travel reads the table as it was), or
    /// the current one.
    pub fn schema_of(&self, snapshot: Option<&Snapshot>) -> Result<&IcebergSchema, String> {
        let wanted = snapshot
            .and_then(|s| s.schema_id)
            .or(self.current_schema_id);
        let found = match wanted {
            Some(id) => self.schemas.iter().find(|s| s.schema_id == id),
            None => None,
        };
        found
            .or(self.schema.as_ref())
            .or(self.schemas.last())
            .ok_or_else(|| "the table's metadata has no schema".to_string())
    }
}

impl IcebergSchema {
    /// The columns as Arrow types them, each with its field id (`FIELD_ID`): files are
    /// matched to them by id.
    pub fn arrow_schema(&self) -> Result<Schema, String> {
        let fields: Vec<Field> = self
            .fields
            .iter()
            .map(|f| field(f.id, &f.name, &f.kind, f.required))
            .collect::<Result<_, _>>()?;
        Ok(Schema::new(fields))
    }
}

fn field(id: i32, name: &str, kind: &Json, required: bool) -> Result<Field, String> {
    let metadata = [(FIELD_ID.to_string(), id.to_string())].into();
    Ok(Field::new(name, arrow_type(kind)?, !required).with_metadata(metadata))
}

/// An Iceberg type as Arrow's.
pub fn arrow_type(kind: &Json) -> Result<DataType, String> {
    if let Some(name) = kind.as_str() {
        return primitive(name).ok_or_else(|| format!("Iceberg type '{name}' is not supported"));
    }
    let nested = |key: &str| -> Result<Field, String> {
        let id = kind
            .get(format!("{key}-id"))
            .and_then(Json::as_i64)
            .unwrap_or(0) as i32;
        let required = kind
            .get(format!("{key}-required"))
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let inner = kind
            .get(key)
            .ok_or(format!("an Iceberg type without '{key}'"))?;
        field(id, key, inner, required)
    };
    match kind.get("type").and_then(Json::as_str) {
        Some("struct") => {
            let fields = kind.get("fields").and_then(Json::as_array);
            let fields = fields.ok_or("an Iceberg struct without fields")?;
            let children: Vec<Field> = fields
                .iter()
                .map(|f| {
                    let parsed: IcebergField = serde_json::from_value(f.clone())
                        .map_err(|e| format!("an Iceberg struct field: {e}"))?;
                    field(parsed.id, &parsed.name, &parsed.kind, parsed.required)
                })
                .collect::<Result<_, String>>()?;
            Ok(DataType::Struct(Fields::from(children)))
        }
        Some("list") => Ok(DataType::List(Arc::new(nested("element")?))),
        Some("map") => {
            let key = nested("key")?.with_name("key").with_nullable(false);
            let value = nested("value")?.with_name("value");
            let entries = Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![key, value])),
                false,
            );
            Ok(DataType::Map(Arc::new(entries), false))
        }
        _ => Err(format!("Iceberg type {kind} is not supported")),
    }
}

fn primitive(name: &str) -> Option<DataType> {
    let micros = TimeUnit::Microsecond;
    let nanos = TimeUnit::Nanosecond;
    Some(match name {
        "boolean" => DataType::Boolean,
        "int" => DataType::Int32,
        "long" => DataType::Int64,
        "float" => DataType::Float32,
        "double" => DataType::Float64,
        "date" => DataType::Date32,
        "time" => DataType::Time64(micros),
        "timestamp" => DataType::Timestamp(micros, None),
        "timestamptz" => DataType::Timestamp(micros, Some("+00:00".into())),
        "timestamp_ns" => DataType::Timestamp(nanos, None),
        "timestamptz_ns" => DataType::Timestamp(nanos, Some("+00:00".into())),
        "string" => DataType::Utf8,
        "uuid" => DataType::FixedSizeBinary(16),
        "binary" => DataType::Binary,
        _ => {
            if let Some(length) = name
                .strip_prefix("fixed[")
                .and_then(|r| r.strip_suffix(']'))
            {
                return Some(DataType::FixedSizeBinary(length.trim().parse().ok()?));
            }
            let inner = name.strip_prefix("decimal(")?.strip_suffix(')')?;
            let (precision, scale) = inner.split_once(',')?;
            DataType::Decimal128(precision.trim().parse().ok()?, scale.trim().parse().ok()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"{
        "format-version": 2, "table-uuid": "u", "location": "s3://b/wh/db/t",
        "current-schema-id": 1,
        "schemas": [
            {"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"}]},
            {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"},
                {"id": 2, "name": "price", "required": false, "type": "decimal(12, 2)"},
                {"id": 3, "name": "tags", "required": false, "type":
                    {"type": "list", "element-id": 4, "element": "string", "element-required": false}}]}],
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "current-snapshot-id": 20,
        "snapshots": [
            {"snapshot-id": 10, "sequence-number": 1, "timestamp-ms": 1000, "manifest-list": "a", "schema-id": 0},
            {"snapshot-id": 20, "parent-snapshot-id": 10, "sequence-number": 2, "timestamp-ms": 2000, "manifest-list": "b", "schema-id": 1}]
    }"#;

    #[test]
    fn snapshots_are_chosen_by_id_time_or_as_current() {
        let metadata = TableMetadata::parse("m.json", METADATA.as_bytes()).unwrap();
        let id = |choice| metadata.snapshot(choice).unwrap().unwrap().snapshot_id;
        assert_eq!(id(SnapshotChoice::Current), 20);
        assert_eq!(id(SnapshotChoice::Id(10)), 10);
        assert_eq!(id(SnapshotChoice::AsOf(1999)), 10);
        assert_eq!(id(SnapshotChoice::AsOf(5000)), 20);
        let missing = metadata.snapshot(SnapshotChoice::Id(7)).unwrap_err();
        assert!(
            missing.contains("no snapshot 7 (it has 10, 20)"),
            "{missing}"
        );
        assert!(metadata.snapshot(SnapshotChoice::AsOf(10)).is_err());
        let old = metadata.snapshot(SnapshotChoice::Id(10)).unwrap();
        assert_eq!(metadata.schema_of(old).unwrap().fields.len(), 1);
    }

    #[test]
    fn iceberg_types_map_to_arrow_types_with_their_field_ids() {
        let metadata = TableMetadata::parse("m.json", METADATA.as_bytes()).unwrap();
        let schema = metadata.schema_of(None).unwrap().arrow_schema().unwrap();
        assert_eq!(schema.field(0).data_type(), &DataType::Int64);
        assert!(!schema.field(0).is_nullable());
        assert_eq!(schema.field(1).data_type(), &DataType::Decimal128(12, 2));
        let DataType::List(element) = schema.field(2).data_type() else {
            panic!("a list: {:?}", schema.field(2))
        };
        assert_eq!(element.metadata()[FIELD_ID], "4");
        assert!(arrow_type(&Json::String("variant".into())).is_err());
        assert!(TableMetadata::parse("m.json", b"{}").is_err());
    }
}
