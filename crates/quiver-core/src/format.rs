//! Results as people and programs read them: a table, CSV (with a header row), JSON (an
//! array of objects), Arrow IPC (file format) or Parquet.

use std::io::Write;
use std::str::FromStr;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::util::pretty::pretty_format_batches_with_schema;
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
        OutputFormat::Table => {
            let table = pretty_format_batches_with_schema(schema.clone(), batches)?;
            writeln!(out, "{table}")?;
        }
        OutputFormat::Csv => {
            let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            for batch in batches {
                writer.write(batch)?;
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
