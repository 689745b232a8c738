//! Results as people and programs read them: a table, CSV (with a header row), JSON (an
//! array of objects), Arrow IPC (file format) or Parquet, written as the batches come. Only
//! the table is cut to fit a screen; the others are always whole.

mod parquet_sink;
mod table;
pub use parquet_sink::ParquetSink;
pub use table::{write_shown_rows, write_table, ShownRows, TableLayout};

use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::{DataFusionError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Table,
    Csv,
    Json,
    Arrow,
    Parquet,
}

impl FromStr for OutputFormat {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "table" => Ok(Self::Table),
            "csv" => Ok(Self::Csv),
            "json" => Ok(Self::Json),
            "arrow" | "ipc" => Ok(Self::Arrow),
            "parquet" => Ok(Self::Parquet),
            other => Err(format!(
                "unknown format '{other}' (table, csv, json, arrow, parquet)"
            )),
        }
    }
}

impl OutputFormat {
    /// Binary formats should not go to a terminal.
    pub fn is_binary(self) -> bool {
        matches!(self, Self::Arrow | Self::Parquet)
    }
}

/// `batch` with its string and binary views compacted where they point into much more
/// than they use. Arrow IPC writes every buffer a view points into, used or not, so a few
/// rows taken from a big batch (a TopK's, a join's strings from its build side) would
/// carry all of it: a worker's output grew threefold, a 20-row answer passed 6 MB.
pub fn compact_views(batch: &RecordBatch) -> Result<RecordBatch> {
    use datafusion::arrow::array::{AsArray, GenericByteViewArray};
    use datafusion::arrow::datatypes::ByteViewType;
    fn compacted<T: ByteViewType + ?Sized>(views: &GenericByteViewArray<T>) -> Option<ArrayRef> {
        let held: usize = views.data_buffers().iter().map(|b| b.len()).sum();
        (held > 2 * views.total_buffer_bytes_used() + 64 * 1024)
            .then(|| Arc::new(views.gc()) as ArrayRef)
    }
    let compacted: Vec<Option<ArrayRef>> = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Utf8View => compacted(column.as_string_view()),
            DataType::BinaryView => compacted(column.as_binary_view()),
            _ => None,
        })
        .collect();
    if compacted.iter().all(Option::is_none) {
        return Ok(batch.clone());
    }
    let columns = compacted
        .into_iter()
        .zip(batch.columns())
        .map(|(new, old)| new.unwrap_or_else(|| Arc::clone(old)))
        .collect();
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

pub fn write_batches<W: Write + Send>(
    format: OutputFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    out: W,
) -> Result<()> {
    write_batches_with_layout(format, schema, batches, &TableLayout::default(), out)
}

/// As `write_batches`, with the table cut to `layout`.
pub fn write_batches_with_layout<W: Write + Send>(
    format: OutputFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    layout: &TableLayout,
    out: W,
) -> Result<()> {
    let mut writer = ResultWriter::new(format, schema, layout, out)?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()
}

/// Writes an answer batch by batch as it is produced, so that memory does not grow with
/// the answer: every format streams; the table keeps only the rows it will show.
pub struct ResultWriter<W: Write + Send> {
    schema: SchemaRef,
    /// Whether any batch came: writers that emit a header only when they see a batch get
    /// an empty one at the end otherwise.
    wrote: bool,
    sink: Sink<W>,
}

enum Sink<W: Write + Send> {
    Table(ShownRows, TableLayout, W),
    Csv(datafusion::arrow::csv::Writer<W>),
    Json(datafusion::arrow::json::ArrayWriter<W>),
    JsonLines(datafusion::arrow::json::LineDelimitedWriter<W>),
    Arrow(datafusion::arrow::ipc::writer::FileWriter<W>),
    Parquet(ParquetSink<W>),
}

/// 122,880 rows (DuckDB's row group): a Parquet writer holds its open row group encoded in
/// memory, so this bounds what writing holds (parquet-rs's default, 1 Mi rows, held over
/// 100 MB of SF 1 lineitem), and gives readers row groups to prune and to split.
pub const PARQUET_ROW_GROUP_ROWS: usize = 122_880;

/// How Quiver writes Parquet (`--format parquet`, COPY): zstd, row groups of
/// `PARQUET_ROW_GROUP_ROWS`.
pub fn parquet_properties() -> parquet::file::properties::WriterProperties {
    use parquet::basic::{Compression, ZstdLevel};
    parquet::file::properties::WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS))
        .build()
}

fn parquet_error(error: parquet::errors::ParquetError) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

impl<W: Write + Send> ResultWriter<W> {
    pub fn new(
        format: OutputFormat,
        schema: &SchemaRef,
        layout: &TableLayout,
        out: W,
    ) -> Result<Self> {
        let sink = match format {
            OutputFormat::Table => Sink::Table(ShownRows::new(layout.max_rows), *layout, out),
            OutputFormat::Csv => Sink::Csv(
                datafusion::arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(out),
            ),
            OutputFormat::Json => Sink::Json(datafusion::arrow::json::ArrayWriter::new(out)),
            OutputFormat::Arrow => Sink::Arrow(
                datafusion::arrow::ipc::writer::FileWriter::try_new(out, schema)?,
            ),
            OutputFormat::Parquet => Sink::Parquet(
                ParquetSink::try_new(out, schema, parquet_properties(), 1)
                    .map_err(parquet_error)?,
            ),
        };
        Ok(Self {
            schema: schema.clone(),
            wrote: false,
            sink,
        })
    }

    /// CSV with or without a header line, fields between `delimiter`s (COPY's options).
    pub fn csv(schema: &SchemaRef, out: W, header: bool, delimiter: u8) -> Self {
        let writer = datafusion::arrow::csv::WriterBuilder::new()
            .with_header(header)
            .with_delimiter(delimiter)
            .build(out);
        Self {
            schema: schema.clone(),
            wrote: false,
            sink: Sink::Csv(writer),
        }
    }

    /// JSON, one object per line, NULLs written out (as DuckDB's COPY writes JSON).
    pub fn json_lines(schema: &SchemaRef, out: W) -> Self {
        let writer = datafusion::arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, datafusion::arrow::json::writer::LineDelimited>(out);
        Self {
            schema: schema.clone(),
            wrote: false,
            sink: Sink::JsonLines(writer),
        }
    }

    /// Parquet's columns encoded on `threads` threads (one by default; never more in the
    /// browser, which cannot start threads this way).
    pub fn with_threads(mut self, threads: usize) -> Self {
        if let Sink::Parquet(sink) = &mut self.sink {
            sink.set_threads(threads);
        }
        self
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.wrote = true;
        match &mut self.sink {
            Sink::Table(rows, _, _) => rows.push(batch),
            Sink::Csv(writer) => writer.write(&nested_as_text(batch)?)?,
            Sink::Json(writer) => writer.write(batch)?,
            Sink::JsonLines(writer) => writer.write(batch)?,
            Sink::Arrow(writer) => writer.write(&compact_views(batch)?)?,
            Sink::Parquet(writer) => writer.write(batch).map_err(parquet_error)?,
        }
        Ok(())
    }

    /// Ends the output (footers, closing brackets) and flushes it.
    pub fn finish(self) -> Result<()> {
        self.finish_into().map(drop)
    }

    /// `finish`, handing back what it wrote to.
    pub fn finish_into(mut self) -> Result<W> {
        if !self.wrote {
            self.write(&RecordBatch::new_empty(self.schema.clone()))?;
        }
        let mut out = match self.sink {
            Sink::Table(rows, layout, mut out) => {
                write_shown_rows(&self.schema, &rows, &layout, &mut out)?;
                out
            }
            Sink::Csv(writer) => writer.into_inner(),
            Sink::Json(mut writer) => {
                writer.finish()?;
                let mut out = writer.into_inner();
                writeln!(out)?;
                out
            }
            Sink::JsonLines(mut writer) => {
                writer.finish()?;
                writer.into_inner()
            }
            Sink::Arrow(mut writer) => {
                writer.finish()?;
                writer.into_inner()?
            }
            Sink::Parquet(writer) => writer.into_inner().map_err(parquet_error)?,
        };
        out.flush()?;
        Ok(out)
    }
}

/// The batch with its nested columns (lists, structs, maps) as text, `[1, 2]` and `{a: 1}`
/// as DuckDB writes them: Arrow's CSV writer takes none.
fn nested_as_text(batch: &RecordBatch) -> Result<RecordBatch> {
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| f.data_type().is_nested())
    {
        return Ok(batch.clone());
    }
    let options = FormatOptions::default();
    let mut fields = vec![];
    let mut columns = vec![];
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if !field.data_type().is_nested() {
            fields.push(Arc::clone(field));
            columns.push(Arc::clone(column));
            continue;
        }
        let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
        let text: StringArray = (0..column.len())
            .map(|i| column.is_valid(i).then(|| formatter.value(i).to_string()))
            .collect();
        fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, true)));
        columns.push(Arc::new(text) as ArrayRef);
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, StringViewArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Two rows sliced from 100,000 long strings: Arrow IPC of the batch as it is carries
    /// every string; compacted, two.
    #[test]
    fn compacted_views_keep_only_the_strings_they_use() {
        let strings: Vec<String> = (0..100_000)
            .map(|i| format!("a string past twelve bytes {i}"))
            .collect();
        let column = StringViewArray::from_iter_values(&strings).slice(500, 2);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "s",
            DataType::Utf8View,
            false,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(column)]).unwrap();
        let ipc = |batch: &RecordBatch| {
            let mut out = Vec::new();
            let mut writer =
                datafusion::arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())
                    .unwrap();
            writer.write(batch).unwrap();
            writer.finish().unwrap();
            drop(writer);
            out.len()
        };
        let compacted = compact_views(&batch).unwrap();
        assert_eq!(compacted, batch, "the same values");
        assert!(ipc(&batch) > 2_000_000, "{}", ipc(&batch));
        assert!(ipc(&compacted) < 2_000, "{}", ipc(&compacted));
        let small = compact_views(&compacted).unwrap();
        assert!(
            small
                .column(0)
                .to_data()
                .ptr_eq(&compacted.column(0).to_data()),
            "left as is"
        );
    }
}
