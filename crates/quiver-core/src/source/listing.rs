//! From the user's patterns to the list of files a table reads, with the values of the
//! columns that come from the listing alone: hive partitions (`key=value` folders) and the
//! virtual columns `_path`, `_file` and `_size`. Nothing here opens a Parquet file.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::scalar::ScalarValue;
use futures::future::try_join_all;

use super::{hive, is_signed_url, GlobPattern, ObjectMeta, S3Options, Sources};
use crate::error::{QuiverError, Result};

/// The persistent index's file name (see `index`): never a data file of a listing. A
/// Parquet file, but without `.parquet`, so that other engines' `*.parquet` globs over the
/// same folder do not read it as data (and with `_`, which Hive-style readers skip).
pub const INDEX_FILE_NAME: &str = "_quiver_index";

/// Columns every table has without reading a file.
pub const VIRTUAL_COLUMNS: [&str; 3] = ["_path", "_file", "_size"];

#[derive(Debug, Clone, Default)]
pub struct ListingOptions {
    /// `None`: detect (every file under `key=value` folders with the same keys).
    pub hive_partitioning: Option<bool>,
    pub s3: S3Options,
    /// A pattern that names nothing lists no file, rather than being an error (DuckDB's
    /// `glob()`).
    pub nothing_is_empty: bool,
}

#[derive(Debug, Clone)]
pub struct ListedFile {
    pub meta: ObjectMeta,
    /// One value per field of `Listing::hive_fields`.
    pub hive_values: Vec<ScalarValue>,
}

impl ListedFile {
    /// Values of `_path`, `_file`, `_size`, in that order.
    pub fn virtual_values(&self) -> [ScalarValue; 3] {
        let file = self.meta.path.rsplit('/').next().unwrap_or(&self.meta.path);
        [
            ScalarValue::Utf8(Some(self.meta.path.clone())),
            ScalarValue::Utf8(Some(file.to_string())),
            ScalarValue::Int64(Some(self.meta.size as i64)),
        ]
    }
}

#[derive(Debug, Clone)]
pub struct Listing {
    pub files: Vec<ListedFile>,
    pub hive_fields: Vec<FieldRef>,
    /// An index found at the pattern's literal prefix while listing (one pattern only).
    pub index: Option<ObjectMeta>,
}

pub fn virtual_fields() -> [FieldRef; 3] {
    [
        Arc::new(Field::new("_path", DataType::Utf8, false)),
        Arc::new(Field::new("_file", DataType::Utf8, false)),
        Arc::new(Field::new("_size", DataType::Int64, false)),
    ]
}

/// Expands every pattern (concurrently) and derives the hive columns.
pub async fn list_files(
    sources: &Sources,
    patterns: &[String],
    options: &ListingOptions,
) -> Result<Listing> {
    let listed = try_join_all(
        patterns
            .iter()
            .map(|p| expand_or_empty(sources, p, options)),
    )
    .await?;
    let index = match listed.as_slice() {
        [(_, index)] => index.clone(),
        _ => None,
    };
    let mut metas: Vec<ObjectMeta> = listed.into_iter().flat_map(|(files, _)| files).collect();
    metas.sort_by(|a, b| a.path.cmp(&b.path));
    metas.dedup_by(|a, b| a.path == b.path);

    let segments: Vec<Vec<(String, Option<String>)>> =
        metas.iter().map(|m| hive::segments(&m.path)).collect();
    let keys: Vec<String> = segments
        .first()
        .map(|s| s.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let consistent = !keys.is_empty()
        && segments
            .iter()
            .all(|s| s.iter().map(|(k, _)| k).eq(keys.iter()));
    let use_hive = match options.hive_partitioning {
        Some(false) => false,
        Some(true) if !consistent && !metas.is_empty() => {
            return Err(QuiverError::invalid(format!(
                "hive_partitioning: the files under {} do not all sit under the same key=value folders",
                patterns.join(", ")
            )))
        }
        _ => consistent,
    };
    if !use_hive {
        let files = metas
            .into_iter()
            .map(|meta| ListedFile {
                meta,
                hive_values: vec![],
            })
            .collect();
        return Ok(Listing {
            files,
            hive_fields: vec![],
            index,
        });
    }

    let types: Vec<DataType> = (0..keys.len())
        .map(|i| infer_type(segments.iter().map(|s| s[i].1.as_deref())))
        .collect();
    let hive_fields = keys
        .iter()
        .zip(&types)
        .map(|(k, t)| Arc::new(Field::new(k, t.clone(), true)))
        .collect();
    let files = metas
        .into_iter()
        .zip(segments)
        .map(|(meta, segs)| {
            let hive_values = segs
                .iter()
                .zip(&types)
                .map(|((_, v), t)| typed_value(v.as_deref(), t))
                .collect();
            ListedFile { meta, hive_values }
        })
        .collect();
    Ok(Listing {
        files,
        hive_fields,
        index,
    })
}

/// `expand`, with nothing named an empty listing where the options say so.
async fn expand_or_empty(
    sources: &Sources,
    pattern: &str,
    options: &ListingOptions,
) -> Result<(Vec<ObjectMeta>, Option<ObjectMeta>)> {
    match expand(sources, pattern, &options.s3).await {
        Err(QuiverError::NoMatch { .. } | QuiverError::NotFound { .. })
            if options.nothing_is_empty =>
        {
            Ok((vec![], None))
        }
        other => other,
    }
}

/// The files `pattern` names, and the index at its literal prefix if the listing saw one.
async fn expand(
    sources: &Sources,
    pattern: &str,
    s3: &S3Options,
) -> Result<(Vec<ObjectMeta>, Option<ObjectMeta>)> {
    let source = sources.for_path(pattern, s3)?;
    if is_signed_url(pattern) {
        return Ok((vec![source.head(pattern).await?], None));
    }
    let glob = GlobPattern::new(pattern)?;
    let is_index = |m: &ObjectMeta| m.path.rsplit('/').next() == Some(INDEX_FILE_NAME);
    let (folder, found) = if glob.is_literal() {
        match source.head(pattern).await {
            Ok(meta) => return Ok((vec![meta], None)),
            Err(QuiverError::NotFound { .. }) => {
                // Not an object: maybe a folder (a prefix), whose Parquet files we take.
                let folder = format!("{}/", pattern.trim_end_matches('/'));
                let found = source.list(&folder).await.unwrap_or_default();
                (folder, found)
            }
            Err(other) => return Err(other),
        }
    } else {
        let found = match source.list(glob.prefix()).await {
            Ok(found) => found,
            Err(QuiverError::NotFound { .. }) => vec![],
            Err(other) => return Err(other),
        };
        (glob.prefix().to_string(), found)
    };
    let index_path = format!("{folder}{INDEX_FILE_NAME}");
    let index = found.iter().find(|m| m.path == index_path).cloned();
    let matched: Vec<_> = found
        .into_iter()
        .filter(|m| !is_index(m))
        .filter(|m| {
            if glob.is_literal() {
                m.path.ends_with(".parquet")
            } else {
                glob.matches(&m.path)
            }
        })
        .collect();
    if matched.is_empty() {
        return Err(if glob.is_literal() {
            QuiverError::NotFound {
                path: pattern.to_string(),
            }
        } else {
            QuiverError::NoMatch {
                pattern: pattern.to_string(),
            }
        });
    }
    Ok((matched, index))
}

/// Integers, then dates, then strings: the narrowest type every value (NULLs aside)
/// parses as.
fn infer_type<'a>(values: impl Iterator<Item = Option<&'a str>> + Clone) -> DataType {
    let present = values.flatten();
    if present.clone().all(|v| v.parse::<i64>().is_ok()) {
        DataType::Int64
    } else if present.clone().all(is_date) {
        DataType::Date32
    } else {
        DataType::Utf8
    }
}

fn is_date(value: &str) -> bool {
    value.len() == 10 && ScalarValue::try_from_string(value.to_string(), &DataType::Date32).is_ok()
}

fn typed_value(value: Option<&str>, data_type: &DataType) -> ScalarValue {
    let Some(value) = value else {
        return ScalarValue::try_from(data_type).unwrap_or(ScalarValue::Null);
    };
    ScalarValue::try_from_string(value.to_string(), data_type)
        .unwrap_or_else(|_| ScalarValue::Utf8(Some(value.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_types_are_the_narrowest_that_fit() {
        assert_eq!(
            infer_type([Some("1"), Some("20")].into_iter()),
            DataType::Int64
        );
        assert_eq!(
            infer_type([Some("2024-01-02")].into_iter()),
            DataType::Date32
        );
        assert_eq!(
            infer_type([Some("A"), Some("1")].into_iter()),
            DataType::Utf8
        );
        assert_eq!(infer_type([None, Some("3")].into_iter()), DataType::Int64);
    }
}
