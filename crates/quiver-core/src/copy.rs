//! `COPY (SELECT ...) TO 'prefix/' (FORMAT parquet, PARTITION_BY (col))`: a query's result
//! written as Parquet files, one folder per partition value (`col=value/`, as Hive and
//! DuckDB lay them out), then a manifest. The manifest is written last and lists every file:
//! a job that fails midway deletes what it wrote and leaves no manifest, so no reader takes
//! half an output for a whole one. DataFusion's own `STORED AS ... PARTITIONED BY` form is
//! accepted too.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Word};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::runtime::QuiverRuntime;
use crate::source::S3Options;

/// The manifest's name inside the target folder.
pub const MANIFEST: &str = "_quiver_manifest.json";

/// DuckDB's option list after `TO 'target'` in DataFusion's words:
/// `(FORMAT parquet, PARTITION_BY (a, b))` becomes `STORED AS PARQUET PARTITIONED BY (a, b)`.
/// Other SQL passes through unchanged.
pub fn rewrite_duckdb_copy(sql: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let is_word =
        |t: &Token, k: Keyword| matches!(t, Token::Word(Word { keyword, .. }) if *keyword == k);
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    let mut in_copy = false;
    let mut depth = 0usize;
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::SemiColon => in_copy = false,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            t if is_word(t, Keyword::COPY) && depth == 0 => in_copy = true,
            _ => {}
        }
        out.push(token.to_string());
        i += 1;
        // After `TO 'target'` at the top level of a COPY, an option list in parentheses.
        if in_copy && depth == 0 && is_word(token, Keyword::TO) {
            let mut j = i;
            while matches!(tokens.get(j), Some(Token::Whitespace(_))) {
                j += 1;
            }
            let Some(Token::SingleQuotedString(_)) = tokens.get(j) else {
                continue;
            };
            let mut k = j + 1;
            while matches!(tokens.get(k), Some(Token::Whitespace(_))) {
                k += 1;
            }
            if !matches!(tokens.get(k), Some(Token::LParen)) {
                continue;
            }
            let Some((clauses, end)) = duckdb_options(&tokens, k) else {
                continue;
            };
            for t in &tokens[i..=j] {
                out.push(t.to_string());
            }
            out.push(format!(" {clauses}"));
            i = end + 1;
        }
    }
    out.concat()
}

/// Parses `(KEY value, KEY (a, b), ...)` starting at `tokens[start]` (the `(`); returns the
/// DataFusion clauses and the index of the closing `)`.
fn duckdb_options(tokens: &[Token], start: usize) -> Option<(String, usize)> {
    let mut depth = 0;
    let mut end = start;
    for (index, token) in tokens.iter().enumerate().skip(start) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    end = index;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner: Vec<&Token> = tokens[start + 1..end]
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut clauses = Vec::new();
    let mut options = Vec::new();
    let mut rest = inner.as_slice();
    while let Some((key, tail)) = rest.split_first() {
        let key = match key {
            Token::Word(w) => w.value.to_ascii_uppercase(),
            _ => return None,
        };
        rest = tail;
        match key.as_str() {
            "PARTITION_BY" => {
                let (columns, tail) = parenthesized_or_one(rest)?;
                clauses.push(format!("PARTITIONED BY ({})", columns.join(", ")));
                rest = tail;
            }
            "FORMAT" => {
                let (value, tail) = rest.split_first()?;
                clauses.push(format!("STORED AS {}", plain(value)?.to_ascii_uppercase()));
                rest = tail;
            }
            other => {
                let (value, tail) = rest.split_first()?;
                options.push(format!(
                    "'format.{}' '{}'",
                    other.to_ascii_lowercase(),
                    plain(value)?.replace('\'', "''")
                ));
                rest = tail;
            }
        }
        if let Some((Token::Comma, tail)) = rest.split_first() {
            rest = tail;
        }
    }
    if !options.is_empty() {
        clauses.push(format!("OPTIONS ({})", options.join(", ")));
    }
    Some((clauses.join(" "), end))
}

fn parenthesized_or_one<'a>(tokens: &'a [&'a Token]) -> Option<(Vec<String>, &'a [&'a Token])> {
    match tokens.split_first()? {
        (Token::LParen, mut rest) => {
            let mut names = Vec::new();
            loop {
                let (token, tail) = rest.split_first()?;
                rest = tail;
                match token {
                    Token::RParen => return Some((names, rest)),
                    Token::Comma => {}
                    other => names.push(other.to_string()),
                }
            }
        }
        (one, rest) => Some((vec![one.to_string()], rest)),
    }
}

fn plain(token: &Token) -> Option<String> {
    match token {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        Token::Number(n, _) => Some(n.clone()),
        _ => None,
    }
}

/// One file COPY wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WrittenFile {
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    /// The partition values, by column.
    pub partition: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Serialize)]
struct Manifest<'a> {
    job: &'a str,
    format: &'static str,
    partition_by: &'a [String],
    rows: u64,
    files: &'a [WrittenFile],
}

/// Where and how to write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyTarget {
    /// A folder: `s3://bucket/prefix/`, `out/`.
    pub folder: String,
    pub partition_by: Vec<String>,
    /// Unique per job, in file names: re-running a job never overwrites another's files.
    pub job: String,
}

/// Writes `batches` under `target` and then the manifest. On any error the files already
/// written are deleted (best effort) and there is no manifest.
pub async fn write_copy(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let written = write_parts(runtime, s3, target, schema, batches).await?;
    commit(runtime, s3, target, written).await
}

/// The files of `batches` under `target`, without a manifest (a worker's share of a job);
/// on error, what was written is deleted again.
pub async fn write_parts(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let mut written = Vec::new();
    match write_files(runtime, s3, target, schema, batches, &mut written).await {
        Ok(()) => Ok(written),
        Err(error) => {
            discard(runtime, s3, &written).await;
            Err(error)
        }
    }
}

/// Makes a job's files visible as complete by writing the manifest that lists them;
/// if that fails, the files are deleted.
pub async fn commit(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    written: Vec<WrittenFile>,
) -> Result<Vec<WrittenFile>> {
    let manifest = Manifest {
        job: &target.job,
        format: "parquet",
        partition_by: &target.partition_by,
        rows: written.iter().map(|f| f.rows).sum(),
        files: &written,
    };
    let result = match serde_json::to_vec_pretty(&manifest) {
        Ok(bytes) => {
            put(
                runtime,
                s3,
                &format!("{}{MANIFEST}", target.folder),
                bytes.into(),
            )
            .await
        }
        Err(e) => Err(DataFusionError::Internal(e.to_string())),
    };
    match result {
        Ok(()) => Ok(written),
        Err(error) => {
            discard(runtime, s3, &written).await;
            Err(error)
        }
    }
}

/// Deletes written files, best effort (a failed job's leftovers are not in any manifest).
pub async fn discard(runtime: &QuiverRuntime, s3: &S3Options, written: &[WrittenFile]) {
    for file in written {
        if let Ok(source) = runtime.sources.for_path(&file.path, s3) {
            let _ = source.delete(&file.path).await;
        }
    }
}

/// COPY to one file, without partitions: the file alone, no manifest (an object store
/// `put` and a local rename are each all or nothing).
pub async fn write_file(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    path: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<WrittenFile>> {
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, Arc::clone(schema), Some(properties()))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    let bytes = buffer.len() as u64;
    put(runtime, s3, path, buffer.into()).await?;
    Ok(vec![WrittenFile {
        path: path.to_string(),
        rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
        bytes,
        partition: BTreeMap::new(),
    }])
}

/// A name for a COPY job, unique enough for file names: time, process and a counter.
pub fn job_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{nanos:x}-{:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

/// Writes one object through the runtime's sources (so the query's S3 settings apply).
pub async fn put(runtime: &QuiverRuntime, s3: &S3Options, path: &str, bytes: Bytes) -> Result<()> {
    runtime.sources.for_path(path, s3)?.put(path, bytes).await?;
    Ok(())
}

async fn write_files(
    runtime: &QuiverRuntime,
    s3: &S3Options,
    target: &CopyTarget,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    written: &mut Vec<WrittenFile>,
) -> Result<()> {
    let key_columns = target
        .partition_by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                DataFusionError::Plan(format!(
                    "PARTITION_BY column '{name}' is not in the query's result ({})",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    // Partition columns live in folder names, not in the files (as Hive and DuckDB do).
    let kept: Vec<usize> = (0..schema.fields().len())
        .filter(|i| !key_columns.contains(i))
        .collect();
    let file_schema = Arc::new(schema.project(&kept)?);
    let mut groups: BTreeMap<Vec<Option<String>>, Vec<RecordBatch>> = BTreeMap::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        for (key, rows) in split_by_key(batch, &key_columns)? {
            let part = take_record_batch(batch, &UInt32Array::from(rows))?.project(&kept)?;
            groups.entry(key).or_default().push(part);
        }
    }
    if groups.is_empty() && key_columns.is_empty() {
        groups.insert(vec![], vec![]);
    }
    let properties = properties();
    for (key, parts) in groups {
        let mut folder = target.folder.clone();
        for (name, value) in target.partition_by.iter().zip(&key) {
            folder.push_str(&format!("{name}={}/", hive_value(value.as_deref())));
        }
        let path = format!("{folder}part-{}.parquet", target.job);
        let mut buffer = Vec::new();
        let mut writer = ArrowWriter::try_new(
            &mut buffer,
            Arc::clone(&file_schema),
            Some(properties.clone()),
        )?;
        for part in &parts {
            writer.write(part)?;
        }
        writer.close()?;
        let bytes = buffer.len() as u64;
        put(runtime, s3, &path, buffer.into()).await?;
        written.push(WrittenFile {
            path,
            rows: parts.iter().map(|p| p.num_rows() as u64).sum(),
            bytes,
            partition: target.partition_by.iter().cloned().zip(key).collect(),
        });
    }
    Ok(())
}

/// Row indexes of `batch` per distinct value of its key columns, as text.
fn split_by_key(
    batch: &RecordBatch,
    key_columns: &[usize],
) -> Result<BTreeMap<Vec<Option<String>>, Vec<u32>>> {
    let texts = key_columns
        .iter()
        .map(|&i| cast(batch.column(i), &DataType::Utf8))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let texts: Vec<&datafusion::arrow::array::StringArray> = texts
        .iter()
        .map(|a| {
            a.as_any()
                .downcast_ref()
                .expect("cast to Utf8 gives strings")
        })
        .collect();
    let mut groups: BTreeMap<Vec<Option<String>>, Vec<u32>> = BTreeMap::new();
    for row in 0..batch.num_rows() {
        let key = texts
            .iter()
            .map(|a| (!a.is_null(row)).then(|| a.value(row).to_string()))
            .collect();
        groups.entry(key).or_default().push(row as u32);
    }
    Ok(groups)
}

/// A value as a folder name: Hive's escaping of `/`, `=`, `%` and the like; NULL as Hive's
/// default partition.
fn hive_value(value: Option<&str>) -> String {
    let Some(value) = value else {
        return "__HIVE_DEFAULT_PARTITION__".into();
    };
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_control() || "\"#%'*/:=?\\{}[]^".contains(c) {
            for byte in c.to_string().bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckdb_options_become_datafusion_clauses() {
        let sql =
            "COPY (SELECT a, b FROM t) TO 's3://b/out/' (FORMAT parquet, PARTITION_BY (a, b));";
        assert_eq!(
            rewrite_duckdb_copy(sql),
            "COPY (SELECT a, b FROM t) TO 's3://b/out/' STORED AS PARQUET PARTITIONED BY (a, b);"
        );
        assert_eq!(
            rewrite_duckdb_copy("COPY t TO 'o/' (FORMAT 'parquet', PARTITION_BY a)"),
            "COPY t TO 'o/' STORED AS PARQUET PARTITIONED BY (a)"
        );
        let untouched = "SELECT '(x)' AS to_do FROM t WHERE b IN (1, 2)";
        assert_eq!(rewrite_duckdb_copy(untouched), untouched);
    }

    #[test]
    fn hive_values_escape_what_paths_cannot_hold() {
        assert_eq!(hive_value(Some("a/b=c")), "a%2Fb%3Dc");
        assert_eq!(hive_value(Some("1995-03-15")), "1995-03-15");
        assert_eq!(hive_value(None), "__HIVE_DEFAULT_PARTITION__");
    }
}
