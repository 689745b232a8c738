//! What a file holds, without reading its data: size, rows, row groups, writer, columns
//! with their types, compression and sizes, and key-value metadata. Footers come through
//! the runtime's cache, so inspecting before querying costs no second read.

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::Schema;
use datafusion::error::Result;
use parquet::file::metadata::ParquetMetaData;
use serde::Serialize;

use crate::runtime::QuiverRuntime;
use crate::source::{list_files, ListingOptions, ObjectMeta};

#[derive(Debug, Clone, Serialize)]
pub struct FileMetadata {
    pub path: String,
    pub size: u64,
    pub rows: i64,
    pub row_groups: usize,
    pub created_by: Option<String>,
    pub columns: Vec<ColumnMetadata>,
    pub key_value: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ColumnMetadata {
    pub name: String,
    /// The Arrow type the column reads as.
    pub r#type: String,
    pub nullable: bool,
    /// The leaf columns' codecs, as in the first row group.
    pub compression: String,
    pub compressed_bytes: i64,
    pub uncompressed_bytes: i64,
}

/// 100 files at most: a schema view, not a catalogue.
const MAX_FILES: usize = 100;

/// The metadata of every file `pattern` names (a path, URL or glob), in path order, read
/// with the settings of the statement running (`QuiverSession::describe_files`).
pub async fn describe_files(runtime: &QuiverRuntime, pattern: &str) -> Result<Vec<FileMetadata>> {
    let options = ListingOptions {
        hive_partitioning: Some(false),
        s3: runtime.query().settings.s3.clone(),
        nothing_is_empty: false,
    };
    let listing = list_files(&runtime.sources, &[pattern.to_string()], &options).await?;
    let mut described = Vec::new();
    for file in listing.files.iter().take(MAX_FILES) {
        let opened = runtime.open(&file.meta, None).await?;
        described.push(describe(
            &file.meta,
            opened.metadata(),
            &*opened.arrow_schema()?,
        )?);
    }
    Ok(described)
}

fn describe(meta: &ObjectMeta, footer: &ParquetMetaData, schema: &Schema) -> Result<FileMetadata> {
    let file = footer.file_metadata();
    let descriptor = file.schema_descr();
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(root, field)| {
            let leaves: Vec<usize> = (0..descriptor.num_columns())
                .filter(|&leaf| descriptor.get_column_root_idx(leaf) == root)
                .collect();
            let chunks = footer
                .row_groups()
                .iter()
                .flat_map(|rg| leaves.iter().map(move |&leaf| rg.column(leaf)));
            let (compressed, uncompressed) = chunks.fold((0, 0), |(c, u), chunk| {
                (c + chunk.compressed_size(), u + chunk.uncompressed_size())
            });
            let compression = footer
                .row_groups()
                .first()
                .and_then(|rg| leaves.first().map(|&leaf| rg.column(leaf).compression()))
                .map_or_else(String::new, |c| c.to_string());
            ColumnMetadata {
                name: field.name().clone(),
                r#type: field.data_type().to_string(),
                nullable: field.is_nullable(),
                compression,
                compressed_bytes: compressed,
                uncompressed_bytes: uncompressed,
            }
        })
        .collect();
    let key_value = file
        .key_value_metadata()
        .into_iter()
        .flatten()
        // Arrow's own schema copy is long and says nothing a person needs.
        .filter(|kv| kv.key != "ARROW:schema")
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    Ok(FileMetadata {
        path: meta.path.clone(),
        size: meta.size,
        rows: file.num_rows(),
        row_groups: footer.num_row_groups(),
        created_by: file.created_by().map(str::to_string),
        columns,
        key_value,
    })
}
