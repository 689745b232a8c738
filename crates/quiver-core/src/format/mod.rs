//! Results as people and programs read them: a table, CSV (with a header row), JSON (an
//! array of objects), Arrow IPC (file format) or Parquet. Only the table is cut to fit a
//! screen; the others are always whole.

mod table;
pub use table::{write_table, TableLayout};

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
    mut out: W,
) -> Result<()> {
    let empty = [RecordBatch::new_empty(schema.clone())];
    // Writers that emit a header only when they see a batch get an empty one.
    let batches = if batches.is_empty() {
        &empty[..]
    } else {
        batches
    };
    match format {
        OutputFormat::Table => write_table(schema, batches, layout, &mut out)?,
        OutputFormat::Csv => {
            let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            for batch in batches {
                writer.write(&nested_as_text(batch)?)?;
            }
        }
        OutputFormat::Json => {
            let mut writer = datafusion::arrow::json::ArrayWriter::new(&mut out);
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
            writeln!(out)?;
        }
        OutputFormat::Arrow => {
            let mut writer = datafusion::arrow::ipc::writer::FileWriter::try_new(&mut out, schema)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
        OutputFormat::Parquet => {
            let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema.clone(), None)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            for batch in batches {
                writer
                    .write(batch)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
            }
            writer
                .close()
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
    }
    out.flush()?;
    Ok(())
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
