//! COPY to one CSV or JSON file, as DuckDB writes them: the format by the target's extension
//! (`x.csv`, `x.tsv`, `x.json`, `x.ndjson`) or by `FORMAT csv|json`; CSV with a header line
//! and commas unless `HEADER false` or `DELIMITER '|'` say otherwise, JSON one object per line
//! unless `ARRAY true`. Staged and put as COPY's Parquet files are. A folder of them
//! (PARTITION_BY) is refused: partitioned outputs are Parquet.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use futures::TryStreamExt;

use super::{put_staged, Staging, WrittenFile};
use crate::format::ResultWriter;
use crate::runtime::QuiverRuntime;
use crate::source::S3Options;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextFormat {
    Csv { header: bool, delimiter: u8 },
    Json { array: bool },
}

impl TextFormat {
    /// The text format COPY's target, FORMAT and options ask for; `None` for Parquet.
    pub fn of(
        target: &str,
        stored_as: Option<&str>,
        options: &[(String, String)],
    ) -> Result<Option<Self>> {
        let extension = target.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let format = stored_as.map(str::to_ascii_lowercase).or(extension);
        let option = |key: &str| {
            let key = key.to_ascii_lowercase();
            (options.iter())
                .find(|(k, _)| k.to_ascii_lowercase().trim_start_matches("format.") == key)
                .map(|(_, v)| v.as_str())
        };
        let flag = |key: &str, default: bool| match option(key).map(str::to_ascii_lowercase) {
            None => Ok(default),
            Some(v) if ["true", "1", "on"].contains(&v.as_str()) => Ok(true),
            Some(v) if ["false", "0", "off"].contains(&v.as_str()) => Ok(false),
            Some(v) => Err(DataFusionError::Plan(format!(
                "COPY option {key}: '{v}' is not true or false"
            ))),
        };
        Ok(Some(match format.as_deref() {
            // DuckDB writes `x.tsv` with commas too, unless told.
            Some("csv" | "tsv" | "txt") => {
                let written = ["delimiter", "delim", "sep"].iter().find_map(|k| option(k));
                let delimiter = match written {
                    Some(d) => match d.replace("\\t", "\t").as_bytes() {
                        [byte] => *byte,
                        _ => {
                            return Err(DataFusionError::Plan(format!(
                                "COPY's DELIMITER must be one character, not '{d}'"
                            )))
                        }
                    },
                    None => b',',
                };
                Self::Csv {
                    header: flag("header", true)?,
                    delimiter,
                }
            }
            Some("json" | "ndjson" | "jsonl") => Self::Json {
                array: flag("array", false)?,
            },
            Some(other @ "arrow") => {
                return Err(DataFusionError::NotImplemented(format!(
                    "COPY writes Parquet, CSV and JSON, not {other}; for Arrow run the query \
                     with `quiver query --format arrow --output FILE`"
                )))
            }
            Some("parquet") | None => return Ok(None),
            // A folder, or an extension that names no format: Parquet, as before.
            Some(_) if stored_as.is_none() => return Ok(None),
            Some(other) => {
                return Err(DataFusionError::NotImplemented(format!(
                    "COPY writes Parquet, CSV and JSON, not {other}"
                )))
            }
        }))
    }
}

/// Writes `batches` to the file `path` in `format`, as they come.
pub async fn write_text(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    path: &str,
    format: &TextFormat,
    schema: &SchemaRef,
    mut batches: SendableRecordBatchStream,
) -> Result<WrittenFile> {
    let staging = Staging::for_destination(path)?;
    let mut writer = match format {
        TextFormat::Csv { header, delimiter } => {
            ResultWriter::csv(schema, staging, *header, *delimiter)
        }
        TextFormat::Json { array: false } => ResultWriter::json_lines(schema, staging),
        TextFormat::Json { array: true } => ResultWriter::new(
            crate::format::OutputFormat::Json,
            schema,
            &Default::default(),
            staging,
        )?,
    };
    let mut rows = 0;
    while let Some(batch) = batches.try_next().await? {
        rows += batch.num_rows() as u64;
        writer.write(&batch)?;
    }
    let staging = writer.finish_into()?;
    let bytes = staging.bytes;
    put_staged(runtime, s3, path, staging).await?;
    Ok(WrittenFile {
        path: path.to_string(),
        rows,
        bytes,
        partition: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_extension_or_format_names_the_text_format() {
        let csv = |header, delimiter| Some(TextFormat::Csv { header, delimiter });
        assert_eq!(TextFormat::of("o.csv", None, &[]).unwrap(), csv(true, b','));
        assert_eq!(TextFormat::of("o.tsv", None, &[]).unwrap(), csv(true, b','));
        let tab = options(&[("delimiter", "\\t")]);
        assert_eq!(
            TextFormat::of("o.tsv", None, &tab).unwrap(),
            csv(true, b'\t')
        );
        let told = options(&[("format.header", "false"), ("format.delimiter", "|")]);
        assert_eq!(
            TextFormat::of("o.txt", None, &told).unwrap(),
            csv(false, b'|')
        );
        assert_eq!(
            TextFormat::of("o.out", Some("JSON"), &[]).unwrap(),
            Some(TextFormat::Json { array: false })
        );
        assert_eq!(TextFormat::of("o.parquet", None, &[]).unwrap(), None);
        assert_eq!(TextFormat::of("out/", None, &[]).unwrap(), None);
        assert!(TextFormat::of("o.csv", None, &options(&[("delimiter", "||")])).is_err());
        assert!(TextFormat::of("o.arrow", None, &[]).is_err());
        assert!(TextFormat::of("o", Some("avro"), &[]).is_err());
    }
}
