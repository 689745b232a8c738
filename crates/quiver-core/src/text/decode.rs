//! A text file's chunks into record batches: read in order, a couple ahead, through the
//! metered read, and pushed into arrow's CSV or JSON decoder as they come (a record that
//! spans two chunks is kept by the decoder until its end arrives). A JSON array's outer
//! brackets and commas are taken out on the way, so both layouts decode as a stream.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::stream::{self, BoxStream, StreamExt};
use regex::Regex;

use super::inflate::{Compression, Inflate};
use super::{JsonLayout, SAMPLE_BYTES};
use crate::error::QuiverError;
use crate::metrics::SpanKind;
use crate::read::ObjectReader;

/// The bytes of a file read at once after its first chunk (the sample, which the block
/// cache holds for the first file).
const CHUNK_BYTES: u64 = 4 << 20;
/// Chunks of one file in flight while the one before is decoded.
const CHUNKS_AHEAD: usize = 2;

/// How the files are decoded: the columns as sniffed, and how their text is laid out.
#[derive(Debug, Clone)]
pub struct Decoding {
    pub schema: SchemaRef,
    pub dialect: Dialect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dialect {
    Csv {
        header: bool,
        delimiter: u8,
        quote: u8,
        escape: Option<u8>,
        /// The text that stands for NULL; an empty field otherwise.
        null_string: Option<String>,
    },
    Json(JsonLayout),
}

/// The pattern arrow's CSV reader takes for NULL: exactly `text` (DuckDB's `nullstr`).
pub(super) fn null_pattern(text: &str) -> Regex {
    Regex::new(&format!("^{}$", regex::escape(text))).expect("escaped text is a valid pattern")
}

/// Which of the table's columns a scan returns, in its order: file columns by index, and
/// `filename` (any index past the file columns).
#[derive(Debug, Clone)]
pub struct Projection {
    columns: Vec<usize>,
    file_columns: usize,
}

impl Projection {
    pub fn new(columns: Vec<usize>, file_columns: usize) -> Self {
        Self {
            columns,
            file_columns,
        }
    }

    /// The file columns the decoder makes, in the order the scan returns them.
    fn decoded(&self) -> Vec<usize> {
        let file_columns = self.file_columns;
        self.columns
            .iter()
            .copied()
            .filter(|&c| c < file_columns)
            .collect()
    }

    /// The scan's batch: the decoded columns, with the file's path where `filename` is.
    fn assemble(
        &self,
        schema: &SchemaRef,
        decoded: RecordBatch,
        path: &str,
    ) -> Result<RecordBatch> {
        let rows = decoded.num_rows();
        let mut file_columns = decoded.columns().iter();
        let mut columns = Vec::with_capacity(self.columns.len());
        for &c in &self.columns {
            let column = match c < self.file_columns {
                true => file_columns.next().cloned(),
                false => Some(Arc::new(StringArray::from(vec![path; rows])) as ArrayRef),
            };
            columns.push(column.ok_or_else(|| {
                DataFusionError::Internal("the text decoder made too few columns".into())
            })?);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(schema),
            columns,
            &options,
        )?)
    }
}

/// The batches of `readers`' files, one file after another.
pub fn partition_stream(
    schema: SchemaRef,
    readers: Vec<ObjectReader>,
    decoding: Decoding,
    compression: Option<Compression>,
    projection: Projection,
    batch_size: usize,
) -> SendableRecordBatchStream {
    let output = Arc::clone(&schema);
    let batches = stream::iter(readers)
        .map(move |reader| {
            let path = reader.object.path.clone();
            let schema = Arc::clone(&output);
            let projection = projection.clone();
            let compression = compression.unwrap_or_else(|| Compression::of_path(&path));
            let file =
                match FileDecode::new(reader, &decoding, compression, &projection, batch_size) {
                    Ok(file) => file,
                    Err(error) => return stream::once(async { Err(error) }).boxed(),
                };
            stream::try_unfold(file, |mut file| async move {
                Ok(file.next_batch().await?.map(|batch| (batch, file)))
            })
            .map(move |batch| {
                batch
                    .map_err(|error| text_error(&path, error))
                    .and_then(|batch| projection.assemble(&schema, batch, &path))
            })
            .boxed()
        })
        .flatten();
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}

/// Arrow's message, with the file it is about; a value that does not parse gets a hint,
/// since the columns' types came from a sample.
fn text_error(path: &str, error: DataFusionError) -> DataFusionError {
    let mut reason = match error {
        DataFusionError::ArrowError(inner, _) => inner.to_string(),
        other => return other,
    };
    reason = reason.trim_start_matches("Parser error: ").to_string();
    if reason.contains("while parsing value") || reason.contains("Error parsing") {
        reason.push_str(
            " (the column types come from the first MiB of the first file; read every \
             column as text with all_varchar = true)",
        );
    }
    QuiverError::text(path, reason).into()
}

/// Arrow's push decoders, CSV and JSON, behind one face.
trait PushDecoder: Send {
    /// Takes what it can of `bytes` (stopping when a batch is full); the bytes taken.
    fn decode(&mut self, bytes: &[u8]) -> std::result::Result<usize, ArrowError>;
    fn flush(&mut self) -> std::result::Result<Option<RecordBatch>, ArrowError>;
}

impl PushDecoder for datafusion::arrow::csv::reader::Decoder {
    fn decode(&mut self, bytes: &[u8]) -> std::result::Result<usize, ArrowError> {
        self.decode(bytes)
    }
    fn flush(&mut self) -> std::result::Result<Option<RecordBatch>, ArrowError> {
        self.flush()
    }
}

impl PushDecoder for datafusion::arrow::json::reader::Decoder {
    fn decode(&mut self, bytes: &[u8]) -> std::result::Result<usize, ArrowError> {
        self.decode(bytes)
    }
    fn flush(&mut self) -> std::result::Result<Option<RecordBatch>, ArrowError> {
        self.flush()
    }
}

/// One file being decoded.
struct FileDecode {
    chunks: BoxStream<'static, crate::error::Result<Bytes>>,
    /// Of the chunk at hand, what the decoder has not taken yet.
    pending: Bytes,
    decoder: Box<dyn PushDecoder>,
    inflate: Inflate,
    unwrap: ArrayUnwrap,
    /// All chunks are in; `ended`: the decoder was told so too.
    finished: bool,
    ended: bool,
}

impl FileDecode {
    fn new(
        reader: ObjectReader,
        decoding: &Decoding,
        compression: Compression,
        projection: &Projection,
        batch_size: usize,
    ) -> Result<Self> {
        let decoded = projection.decoded();
        let (decoder, layout): (Box<dyn PushDecoder>, _) = match &decoding.dialect {
            Dialect::Csv {
                header,
                delimiter,
                quote,
                escape,
                null_string,
            } => {
                let mut builder =
                    datafusion::arrow::csv::ReaderBuilder::new(Arc::clone(&decoding.schema))
                        .with_header(*header)
                        .with_delimiter(*delimiter)
                        .with_quote(*quote)
                        .with_batch_size(batch_size)
                        .with_projection(decoded);
                if let Some(escape) = escape {
                    builder = builder.with_escape(*escape);
                }
                if let Some(null) = null_string {
                    builder = builder.with_null_regex(null_pattern(null));
                }
                (Box::new(builder.build_decoder()), JsonLayout::Lines)
            }
            Dialect::Json(layout) => {
                let schema = Schema::new(
                    (decoded.iter())
                        .map(|&c| decoding.schema.fields()[c].clone())
                        .collect::<Vec<_>>(),
                );
                let decoder = datafusion::arrow::json::ReaderBuilder::new(Arc::new(schema))
                    .with_batch_size(batch_size)
                    .with_coerce_primitive(true)
                    .build_decoder()?;
                (Box::new(decoder), *layout)
            }
        };
        Ok(Self {
            chunks: chunks(reader),
            pending: Bytes::new(),
            decoder,
            inflate: Inflate::new(compression)?,
            unwrap: ArrayUnwrap::new(layout),
            finished: false,
            ended: false,
        })
    }

    /// The next batch of the file, `None` at its end.
    async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if !self.pending.is_empty() {
                let taken = self.decoder.decode(&self.pending)?;
                self.pending.advance(taken);
                if !self.pending.is_empty() {
                    // The decoder stopped short: its batch is full.
                    match self.decoder.flush()? {
                        Some(batch) => return Ok(Some(batch)),
                        None if taken == 0 => {
                            return Err(DataFusionError::Internal(
                                "the text decoder took no bytes and made no batch".into(),
                            ))
                        }
                        None => {}
                    }
                }
                continue;
            }
            if self.ended {
                return Ok(None);
            }
            if self.finished {
                // An empty push ends the last record, which may lack its newline.
                self.ended = true;
                self.decoder.decode(&[])?;
                return Ok(self.decoder.flush()?);
            }
            let text = match self.chunks.next().await {
                Some(chunk) => self.inflate.apply(chunk?)?,
                None => {
                    self.finished = true;
                    self.inflate.finish()?
                }
            };
            self.pending = self.unwrap.apply(text);
        }
    }
}

/// The file's bytes in order: the sample's range first (which the block cache holds for
/// the file the columns were sniffed from), then `CHUNK_BYTES` at a time, uncached.
fn chunks(reader: ObjectReader) -> BoxStream<'static, crate::error::Result<Bytes>> {
    let size = reader.object.size;
    let first = size.min(SAMPLE_BYTES);
    let rest = (first..size)
        .step_by(CHUNK_BYTES as usize)
        .map(move |start| start..(start + CHUNK_BYTES).min(size));
    let ranges = (first > 0).then_some(0..first).into_iter().chain(rest);
    stream::iter(ranges)
        .map(move |range| {
            let reader = reader.clone();
            async move {
                let lane = reader.object.path.clone();
                if range.start == 0 {
                    reader.read_kept(range, SpanKind::Data, &lane).await
                } else {
                    reader.read(range, SpanKind::Data, &lane).await
                }
            }
        })
        .buffered(CHUNKS_AHEAD)
        .boxed()
}

/// Takes a JSON array's outer `[`, `]` and the commas between its elements out of a byte
/// stream (a newline in a comma's place), leaving the elements one after another, as
/// newline-delimited JSON: arrow's decoder reads that as it streams. Strings are skipped
/// whole, escapes included, across chunks.
#[derive(Debug, Clone)]
pub(super) struct ArrayUnwrap {
    /// Whether the stream is an array: `None` until its first non-blank byte says.
    array: Option<bool>,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl ArrayUnwrap {
    pub(super) fn new(layout: JsonLayout) -> Self {
        Self {
            array: match layout {
                JsonLayout::Auto => None,
                JsonLayout::Lines => Some(false),
                JsonLayout::Array => Some(true),
            },
            depth: 0,
            in_string: false,
            escaped: false,
        }
    }

    pub(super) fn apply(&mut self, chunk: Bytes) -> Bytes {
        if self.array.is_none() {
            if let Some(first) = chunk.iter().find(|b| !b.is_ascii_whitespace()) {
                self.array = Some(*first == b'[');
            }
        }
        if self.array != Some(true) {
            return chunk;
        }
        let mut out = Vec::with_capacity(chunk.len());
        for &byte in chunk.iter() {
            if self.in_string {
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                out.push(byte);
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    if self.depth == 1 {
                        continue;
                    }
                }
                b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        continue;
                    }
                }
                b',' if self.depth == 1 => {
                    out.push(b'\n');
                    continue;
                }
                _ => {}
            }
            out.push(byte);
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwrapped(layout: JsonLayout, chunks: &[&str]) -> String {
        let mut unwrap = ArrayUnwrap::new(layout);
        chunks
            .iter()
            .map(|c| unwrap.apply(Bytes::from(c.to_string())))
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn an_array_becomes_its_elements_one_per_line_across_chunks() {
        let text = unwrapped(
            JsonLayout::Auto,
            &[
                " [{\"a\": [1, 2], \"s\": \"x,]\\\"",
                "[\"}, {\"a\": []",
                "}]",
            ],
        );
        assert_eq!(text, " {\"a\": [1, 2], \"s\": \"x,]\\\"[\"}\n {\"a\": []}");
    }

    #[test]
    fn objects_one_after_another_pass_unchanged() {
        let lines = "{\"a\": [1]}\n{\"a\": [2]}\n";
        assert_eq!(
            unwrapped(JsonLayout::Auto, &["  ", lines]),
            format!("  {lines}")
        );
        assert_eq!(unwrapped(JsonLayout::Lines, &[lines]), lines);
    }
}
