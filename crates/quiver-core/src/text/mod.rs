//! CSV and JSON files as tables, as DuckDB's `read_csv` and `read_json` read them: the
//! columns and their types sniffed from the first file's first MiB (delimiter, header,
//! BIGINT / DOUBLE / DATE / TIMESTAMP / BOOLEAN / VARCHAR), then every file streamed
//! through the one metered read in chunks, each decoded as it arrives, only the columns
//! the query uses. Files are dealt to partitions whole: a text file has no row groups to
//! split it by.
//!
//! sniff (the columns from a sample) · decode (a file's chunks into batches) · inflate
//! (gzip and zstd files).

mod decode;
mod inflate;
mod sniff;

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::ExecutionPlan;

use crate::error::QuiverError;
use crate::metrics::SpanKind;
use crate::read::ObjectReader;
use crate::runtime::QuiverRuntime;
use crate::source::ObjectMeta;

pub use inflate::Compression;

/// The first bytes of the first file that the columns are sniffed from.
const SAMPLE_BYTES: u64 = 1 << 20;

/// DuckDB's `read_csv` options that Quiver honours; `None` is "sniff it".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsvOptions {
    pub delimiter: Option<u8>,
    pub header: Option<bool>,
    pub quote: Option<u8>,
    pub escape: Option<u8>,
    /// The text that stands for NULL (DuckDB's `nullstr`); an empty field otherwise.
    pub null_string: Option<String>,
    /// Every column VARCHAR, nothing inferred.
    pub all_varchar: bool,
}

/// How a JSON file holds its rows (DuckDB's `format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonLayout {
    /// An array if the file starts with `[`, else objects one after another.
    #[default]
    Auto,
    /// Objects one after another (newline-delimited JSON).
    Lines,
    /// One array of objects.
    Array,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextKind {
    Csv(CsvOptions),
    Json(JsonLayout),
}

/// How a table's text files are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFiles {
    pub kind: TextKind,
    /// A last column `filename` with each row's file (DuckDB's `filename = true`).
    pub filename: bool,
    /// `None`: each file's by its extension (`.gz`, `.zst`).
    pub compression: Option<Compression>,
}

impl TextFiles {
    /// What a path's extension says it holds (`.csv`, `.tsv`, `.json`, `.ndjson`, …,
    /// compressed too: `.csv.gz`); `None` for anything else (Parquet, in Quiver's eyes).
    pub fn by_extension(path: &str) -> Option<Self> {
        let extension = Compression::strip(path)
            .rsplit_once('.')?
            .1
            .to_ascii_lowercase();
        let kind = match extension.as_str() {
            "csv" | "txt" => TextKind::Csv(CsvOptions::default()),
            "tsv" | "tab" => TextKind::Csv(CsvOptions {
                delimiter: Some(b'\t'),
                ..CsvOptions::default()
            }),
            "json" => TextKind::Json(JsonLayout::Auto),
            "ndjson" | "jsonl" => TextKind::Json(JsonLayout::Lines),
            _ => return None,
        };
        Some(Self {
            kind,
            filename: false,
            compression: None,
        })
    }
}

/// A table over CSV or JSON files: its columns were sniffed when it was made; its rows
/// are read when it is scanned.
#[derive(Debug)]
pub struct TextTable {
    files: Vec<ObjectMeta>,
    /// `None`: each file's by its extension.
    compression: Option<Compression>,
    /// The files' columns as sniffed, then (for `filename`) the file's path.
    schema: SchemaRef,
    /// The columns the decoder makes (`schema` without `filename`) and the CSV dialect or
    /// JSON layout it reads them in.
    decoding: decode::Decoding,
}

impl TextTable {
    /// The table over `files` (in order), its columns sniffed from the first one's first MiB.
    pub async fn open(
        runtime: &QuiverRuntime,
        files: Vec<ObjectMeta>,
        reading: TextFiles,
    ) -> Result<Self> {
        let Some(first) = files.first() else {
            return Err(QuiverError::invalid("no file to read (the listing was empty)").into());
        };
        let reader = runtime.reader(first)?;
        let end = first.size.min(SAMPLE_BYTES);
        let sample = if end == 0 {
            bytes::Bytes::new()
        } else {
            reader
                .read_kept(0..end, SpanKind::Data, &first.path)
                .await?
        };
        let whole = end == first.size;
        let compression =
            (reading.compression).unwrap_or_else(|| Compression::of_path(&first.path));
        let sample = inflate::sample(compression, sample, whole).map_err(|e| {
            QuiverError::text(
                &first.path,
                e.to_string().trim_start_matches("Parser error: "),
            )
        })?;
        let decoding = sniff::decoding(&reading.kind, &sample, whole)
            .map_err(|reason| QuiverError::text(&first.path, reason))?;
        let mut fields = decoding.schema.fields().to_vec();
        if reading.filename {
            fields.push(Arc::new(Field::new("filename", DataType::Utf8, false)));
        }
        Ok(Self {
            files,
            compression: reading.compression,
            schema: Arc::new(Schema::new(fields)),
            decoding,
        })
    }
}

#[async_trait]
impl TableProvider for TextTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let runtime = QuiverRuntime::of(state.config())?;
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let columns = projection.unwrap_or(&all).clone();
        let schema = Arc::new(self.schema.project(&columns)?);
        let file_columns = self.decoding.schema.fields().len();
        let plan = decode::Projection::new(columns, file_columns);
        let partitions = state
            .config()
            .target_partitions()
            .min(self.files.len())
            .max(1);
        let mut dealt: Vec<Vec<ObjectReader>> = vec![vec![]; partitions];
        for (i, file) in self.files.iter().enumerate() {
            dealt[i % partitions].push(runtime.reader(file)?);
        }
        let streams = dealt
            .into_iter()
            .map(|readers| {
                Arc::new(TextPartition {
                    schema: Arc::clone(&schema),
                    readers,
                    decoding: self.decoding.clone(),
                    compression: self.compression,
                    projection: plan.clone(),
                    batch_size: state.config().batch_size(),
                }) as Arc<dyn PartitionStream>
            })
            .collect();
        Ok(Arc::new(StreamingTableExec::try_new(
            schema,
            streams,
            None,
            vec![],
            false,
            limit,
        )?))
    }
}

/// One partition's files, read one after another.
#[derive(Debug)]
struct TextPartition {
    schema: SchemaRef,
    readers: Vec<ObjectReader>,
    decoding: decode::Decoding,
    compression: Option<Compression>,
    projection: decode::Projection,
    batch_size: usize,
}

impl PartitionStream for TextPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _context: Arc<TaskContext>) -> SendableRecordBatchStream {
        decode::partition_stream(
            Arc::clone(&self.schema),
            self.readers.clone(),
            self.decoding.clone(),
            self.compression,
            self.projection.clone(),
            self.batch_size,
        )
    }
}
