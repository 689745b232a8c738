//! The index as stored: a Parquet file (the entries) with its format version, glob, build
//! time and the data's Arrow schema in the key-value metadata.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use datafusion::arrow::datatypes::Schema;
use datafusion::error::{DataFusionError, Result};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{encode_arrow_schema, ArrowWriter};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::runtime::QuiverRuntime;
use crate::source::ObjectMeta;

use super::FileIndex;

const FORMAT_KEY: &str = "quiver.index.format";
const FORMAT: &str = "1";
const GLOB_KEY: &str = "quiver.index.glob";
const BUILT_AT_KEY: &str = "quiver.index.built_at_ms";
/// The data files' Arrow schema (as Parquet's `ARROW:schema`), so a table planned from
/// the index needs no footer for its columns.
const SCHEMA_KEY: &str = "quiver.index.schema";

impl FileIndex {
    /// The index as a Parquet file that any engine reads.
    pub fn to_parquet(&self) -> Result<Bytes> {
        let metadata = vec![
            KeyValue::new(FORMAT_KEY.to_string(), FORMAT.to_string()),
            KeyValue::new(GLOB_KEY.to_string(), self.glob.clone()),
            KeyValue::new(BUILT_AT_KEY.to_string(), self.built_at_ms.to_string()),
            KeyValue::new(
                SCHEMA_KEY.to_string(),
                encode_arrow_schema(&self.data_schema),
            ),
        ];
        let properties = WriterProperties::builder()
            .set_key_value_metadata(Some(metadata))
            .build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, self.entries.schema(), Some(properties))?;
        writer.write(&self.entries)?;
        writer.close()?;
        Ok(Bytes::from(out))
    }

    /// An index from its Parquet bytes; `path` names it in errors.
    pub fn from_parquet(path: &str, bytes: Bytes) -> Result<Self> {
        let not_index = |reason: String| {
            DataFusionError::Plan(format!("{path} is not a Quiver index: {reason}"))
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| not_index(e.to_string()))?;
        let pairs: HashMap<String, String> = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .into_iter()
            .flatten()
            .filter_map(|kv| Some((kv.key.clone(), kv.value.clone()?)))
            .collect();
        match pairs.get(FORMAT_KEY).map(String::as_str) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(not_index(format!(
                    "format {other}, this build reads {FORMAT}"
                )))
            }
            None => return Err(not_index(format!("no {FORMAT_KEY} key"))),
        }
        let data_schema = pairs
            .get(SCHEMA_KEY)
            .map(|encoded| decode_arrow_schema(encoded))
            .transpose()
            .map_err(|e| not_index(e.to_string()))?
            .unwrap_or_else(Schema::empty);
        let schema = builder.schema().clone();
        let batches = builder
            .build()
            .map_err(|e| not_index(e.to_string()))?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let entries = datafusion::arrow::compute::concat_batches(&schema, &batches)?;
        Self::new(
            entries,
            Arc::new(data_schema),
            pairs.get(GLOB_KEY).cloned().unwrap_or_default(),
            pairs
                .get(BUILT_AT_KEY)
                .and_then(|t| t.parse().ok())
                .unwrap_or_default(),
        )
    }

    /// Reads the index at `meta`: one request, none while the block cache holds this
    /// version (a session's later statements).
    pub async fn read(runtime: &QuiverRuntime, meta: &ObjectMeta) -> Result<Self> {
        let bytes = runtime.reader(meta)?.whole("index").await?;
        Self::from_parquet(&meta.path, bytes)
    }
}

/// Arrow's schema from its `ARROW:schema` encoding (IPC, base64).
fn decode_arrow_schema(encoded: &str) -> Result<Schema> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| DataFusionError::Plan(e.to_string()))?;
    // An IPC message may start with a continuation marker and length.
    let message = if bytes.len() > 8 && bytes[..4] == [0xff; 4] {
        &bytes[8..]
    } else {
        &bytes[..]
    };
    let message = datafusion::arrow::ipc::root_as_message(message)
        .map_err(|e| DataFusionError::Plan(format!("schema: {e}")))?;
    let schema = message
        .header_as_schema()
        .ok_or_else(|| DataFusionError::Plan("schema: not an Arrow schema".into()))?;
    crate::error::contain_panic(|| datafusion::arrow::ipc::convert::fb_to_schema(schema))
        .map_err(|panic| DataFusionError::Plan(format!("schema: malformed ({panic})")))
}
