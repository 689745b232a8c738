//! The persistent index: one Parquet file with a row per data file (path, etag, size, rows,
//! row groups, and per column its min, max and null count), so a filter drops files before
//! any footer is read. It lives beside the data at the glob's literal prefix
//! (`<prefix>/_quiver_index`, which the listing finds for free) or anywhere else.
//! An entry whose etag differs from the listing's is ignored for that file: a stale index
//! costs speed, never a wrong answer. The format is in docs/index.md.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray,
    StructArray, UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{
    DataType, Field, Fields, Int64Type, Schema, SchemaRef, UInt64Type,
};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{encode_arrow_schema, ArrowWriter};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::footer::arrow_schema;
use crate::metadata::{read_footers, Footer};
use crate::runtime::QuiverRuntime;
use crate::source::{GlobPattern, ObjectMeta, S3Options, INDEX_FILE_NAME};

const FORMAT_KEY: &str = "quiver.index.format";
const FORMAT: &str = "1";
const GLOB_KEY: &str = "quiver.index.glob";
const BUILT_AT_KEY: &str = "quiver.index.built_at_ms";
/// The data files' Arrow schema (as Parquet's `ARROW:schema`), so a table planned from
/// the index needs no footer for its columns.
const SCHEMA_KEY: &str = "quiver.index.schema";

/// Where the index of `pattern` lives by default: at its longest literal prefix.
pub fn default_location(pattern: &str) -> Result<String> {
    let glob = GlobPattern::new(pattern)?;
    let folder = if glob.is_literal() {
        format!("{}/", pattern.trim_end_matches('/'))
    } else {
        glob.prefix().to_string()
    };
    Ok(format!("{folder}{INDEX_FILE_NAME}"))
}

/// An index as read or built: one row per data file.
#[derive(Debug, Clone)]
pub struct FileIndex {
    /// `path, etag, size, rows, row_groups, stats{column{min, max, null_count}}`.
    entries: RecordBatch,
    /// The data files' schema.
    data_schema: SchemaRef,
    pub glob: String,
    pub built_at_ms: u64,
    /// Row of each path in `entries`.
    rows_by_path: HashMap<String, usize>,
}

/// What `refresh` did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RefreshSummary {
    /// Files whose footers were read: new or changed since the last build.
    pub footers_read: usize,
    /// Entries kept as they were.
    pub unchanged: usize,
    /// Entries of files no longer listed.
    pub dropped: usize,
}

impl FileIndex {
    /// Reads every footer of `files` and indexes them.
    pub async fn build(
        runtime: &QuiverRuntime,
        glob: &str,
        files: &[ObjectMeta],
        s3: &S3Options,
    ) -> Result<Self> {
        let footers = read_footers(runtime, files, s3).await?;
        let data_schema = match footers.first() {
            Some(first) => Arc::new(arrow_schema(&first.meta.path, &first.metadata)?),
            None => Arc::new(Schema::empty()),
        };
        let entries = entries_of(&footers, &data_schema)?;
        Self::new(entries, data_schema, glob.to_string(), now_ms())
    }

    /// The index of `files` (a fresh listing), reading footers only of files that are new
    /// or changed; entries of files no longer listed are dropped.
    pub async fn refresh(
        &self,
        runtime: &QuiverRuntime,
        files: &[ObjectMeta],
        s3: &S3Options,
    ) -> Result<(Self, RefreshSummary)> {
        let (fresh, stale): (Vec<&ObjectMeta>, Vec<&ObjectMeta>) =
            files.iter().partition(|f| self.is_fresh(f));
        let stale: Vec<ObjectMeta> = stale.into_iter().cloned().collect();
        let footers = read_footers(runtime, &stale, s3).await?;
        let data_schema = if self.data_schema.fields().is_empty() {
            match footers.first() {
                Some(first) => Arc::new(arrow_schema(&first.meta.path, &first.metadata)?),
                None => Arc::clone(&self.data_schema),
            }
        } else {
            Arc::clone(&self.data_schema)
        };
        let read = entries_of(&footers, &data_schema)?;
        let kept_rows: Vec<u32> = fresh
            .iter()
            .map(|f| self.rows_by_path[&f.path] as u32)
            .collect();
        let kept = datafusion::arrow::compute::take_record_batch(
            &self.entries,
            &UInt32Array::from(kept_rows),
        )?;
        let kept = align(&kept, read.schema())?;
        let mut joined =
            datafusion::arrow::compute::concat_batches(&read.schema(), [&kept, &read])?;
        // Path order, as listings are.
        let order = datafusion::arrow::compute::sort_to_indices(joined.column(0), None, None)?;
        joined = datafusion::arrow::compute::take_record_batch(&joined, &order)?;
        let listed: std::collections::HashSet<&str> =
            files.iter().map(|f| f.path.as_str()).collect();
        let summary = RefreshSummary {
            footers_read: footers.len(),
            unchanged: fresh.len(),
            dropped: self
                .rows_by_path
                .keys()
                .filter(|p| !listed.contains(p.as_str()))
                .count(),
        };
        let refreshed = Self::new(joined, data_schema, self.glob.clone(), now_ms())?;
        Ok((refreshed, summary))
    }

    fn new(
        entries: RecordBatch,
        data_schema: SchemaRef,
        glob: String,
        built_at_ms: u64,
    ) -> Result<Self> {
        let paths = entries.column(0).as_string::<i32>();
        let rows_by_path = paths
            .iter()
            .enumerate()
            .filter_map(|(row, path)| Some((path?.to_string(), row)))
            .collect();
        Ok(Self {
            entries,
            data_schema,
            glob,
            built_at_ms,
            rows_by_path,
        })
    }

    /// Files indexed.
    pub fn len(&self) -> usize {
        self.entries.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data files' columns, as the first indexed file has them.
    pub fn data_schema(&self) -> &SchemaRef {
        &self.data_schema
    }

    /// Whether the entry of `file` describes the version the listing sees.
    pub fn is_fresh(&self, file: &ObjectMeta) -> bool {
        self.rows_by_path.get(&file.path).is_some_and(|&row| {
            let etags = self.entries.column(1).as_string::<i32>();
            etags.is_valid(row) && etags.value(row) == file.version
        })
    }

    /// Which of `files` may hold rows that pass `predicate`; files the index does not
    /// describe as listed are kept.
    /// `table_schema` gives the types the predicate compares in (e.g. view types).
    pub fn files_to_read(
        &self,
        predicate: &PruningPredicate,
        files: &[ObjectMeta],
        table_schema: &Schema,
    ) -> Vec<bool> {
        let statistics = IndexStatistics {
            index: self,
            table_schema,
            rows: files
                .iter()
                .map(|f| self.is_fresh(f).then(|| self.rows_by_path[&f.path] as u32))
                .collect(),
        };
        predicate
            .prune(&statistics)
            .unwrap_or_else(|_| vec![true; files.len()])
    }

    /// The rows of `files` together, if the index describes every one as listed.
    pub fn total_rows(&self, files: &[ObjectMeta]) -> Option<i64> {
        let rows = self
            .entries
            .column_by_name("rows")?
            .as_primitive::<Int64Type>();
        files
            .iter()
            .map(|f| {
                self.is_fresh(f)
                    .then(|| rows.value(self.rows_by_path[&f.path]))
            })
            .sum()
    }

    /// The min and max of `column` over `files` (NULLs when every value is NULL), if the
    /// index describes every file as listed with exact statistics for it. Strings and
    /// binaries are never answered: writers may truncate their statistics.
    pub fn min_max(
        &self,
        files: &[ObjectMeta],
        column: &str,
    ) -> Option<(ScalarValue, ScalarValue)> {
        let stats = self.entries.column_by_name("stats")?.as_struct();
        let column = stats.column_by_name(column)?.as_struct();
        let (mins, maxes) = (column.column(0), column.column(1));
        let nulls = column.column(2).as_primitive::<UInt64Type>();
        if matches!(
            mins.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
                | DataType::FixedSizeBinary(_)
        ) {
            return None;
        }
        let rows = self
            .entries
            .column_by_name("rows")?
            .as_primitive::<Int64Type>();
        let mut min = ScalarValue::try_from(mins.data_type()).ok()?;
        let mut max = min.clone();
        for file in files {
            if !self.is_fresh(file) {
                return None;
            }
            let row = self.rows_by_path[&file.path];
            if mins.is_null(row) || maxes.is_null(row) {
                // Unknown, unless the file's values are all NULL.
                let all_null = nulls.is_valid(row) && nulls.value(row) as i64 == rows.value(row);
                if all_null {
                    continue;
                }
                return None;
            }
            let (low, high) = (
                ScalarValue::try_from_array(mins, row).ok()?,
                ScalarValue::try_from_array(maxes, row).ok()?,
            );
            if min.is_null() || low.partial_cmp(&min)?.is_lt() {
                min = low;
            }
            if max.is_null() || high.partial_cmp(&max)?.is_gt() {
                max = high;
            }
        }
        Some((min, max))
    }

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
    pub async fn read(runtime: &QuiverRuntime, meta: &ObjectMeta, s3: &S3Options) -> Result<Self> {
        let metrics = runtime.metrics();
        let whole = 0..meta.size;
        let cached = runtime.blocks.lookup(meta, std::slice::from_ref(&whole));
        let bytes = match cached.held.as_slice() {
            [(0, bytes)] if cached.missing.is_empty() => {
                crate::metrics::QueryMetrics::add(&metrics.cache_hit_bytes, meta.size);
                bytes.clone()
            }
            _ => {
                let source = runtime.sources.for_path(&meta.path, s3)?;
                let bytes = source.get_range(meta, 0..meta.size).await?;
                metrics.record_read(bytes.len() as u64);
                runtime.blocks.insert(meta, &[(0, bytes.clone())]);
                bytes
            }
        };
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
    message
        .header_as_schema()
        .map(datafusion::arrow::ipc::convert::fb_to_schema)
        .ok_or_else(|| DataFusionError::Plan("schema: not an Arrow schema".into()))
}

fn now_ms() -> u64 {
    web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Columns with statistics: the top-level ones that are not nested.
fn indexed_fields(data_schema: &Schema) -> Vec<&Field> {
    data_schema
        .fields()
        .iter()
        .filter(|f| !f.data_type().is_nested())
        .map(|f| f.as_ref())
        .collect()
}

fn stat_fields(data_type: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("min", data_type.clone(), true),
        Field::new("max", data_type.clone(), true),
        Field::new("null_count", DataType::UInt64, true),
    ])
}

/// The entries of these files' footers, with statistics for `data_schema`'s columns.
fn entries_of(footers: &[Footer], data_schema: &Schema) -> Result<RecordBatch> {
    let fields = indexed_fields(data_schema);
    let mut per_column: Vec<[Vec<ScalarValue>; 2]> = vec![[vec![], vec![]]; fields.len()];
    let mut null_counts: Vec<Vec<Option<u64>>> = vec![vec![]; fields.len()];
    for footer in footers {
        let stored = arrow_schema(&footer.meta.path, &footer.metadata)?;
        for (i, field) in fields.iter().enumerate() {
            let (min, max, nulls) = file_statistics(footer, &stored, field);
            per_column[i][0].push(min);
            per_column[i][1].push(max);
            null_counts[i].push(nulls);
        }
    }
    let mut stats_fields = vec![];
    let mut stats_arrays: Vec<ArrayRef> = vec![];
    for ((field, [mins, maxes]), nulls) in fields.iter().zip(per_column).zip(null_counts) {
        let data_type = field.data_type();
        let column = |values: Vec<ScalarValue>| -> Result<ArrayRef> {
            if values.is_empty() {
                return Ok(new_null_array(data_type, 0));
            }
            ScalarValue::iter_to_array(values)
        };
        let children: Vec<ArrayRef> = vec![
            column(mins)?,
            column(maxes)?,
            Arc::new(UInt64Array::from(nulls)),
        ];
        stats_fields.push(Field::new(
            field.name(),
            DataType::Struct(stat_fields(data_type)),
            true,
        ));
        stats_arrays.push(Arc::new(StructArray::try_new(
            stat_fields(data_type),
            children,
            None,
        )?));
    }
    let stats = if stats_fields.is_empty() {
        Arc::new(StructArray::new_empty_fields(footers.len(), None)) as ArrayRef
    } else {
        Arc::new(StructArray::try_new(
            Fields::from(stats_fields),
            stats_arrays,
            None,
        )?)
    };
    let column = |f: &dyn Fn(&Footer) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(footers.iter().map(f)))
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("etag", DataType::Utf8, false),
        Field::new("size", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("row_groups", DataType::Int64, false),
        Field::new("stats", stats.data_type().clone(), false),
    ]));
    Ok(RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                footers.iter().map(|f| f.meta.path.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                footers.iter().map(|f| f.meta.version.as_str()),
            )),
            column(&|f| f.meta.size as i64),
            column(&|f| f.metadata.file_metadata().num_rows()),
            column(&|f| f.metadata.num_row_groups() as i64),
            stats,
        ],
    )?)
}

/// A file's min, max and null count of `field`, from its row groups' statistics; unknown
/// (null) where any row group with values lacks them, or the file lacks the column.
fn file_statistics(
    footer: &Footer,
    stored: &Schema,
    field: &Field,
) -> (ScalarValue, ScalarValue, Option<u64>) {
    let unknown = || {
        let null = ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null);
        (null.clone(), null, None)
    };
    let metadata = &footer.metadata;
    let descriptor = metadata.file_metadata().schema_descr();
    let row_groups = metadata.row_groups();
    let Ok(converter) = StatisticsConverter::try_new(field.name(), stored, descriptor) else {
        return unknown();
    };
    let (Ok(mins), Ok(maxes), Ok(nulls)) = (
        converter.row_group_mins(row_groups),
        converter.row_group_maxes(row_groups),
        converter.row_group_null_counts(row_groups),
    ) else {
        return unknown();
    };
    let (Ok(mins), Ok(maxes)) = (
        cast(&mins, field.data_type()),
        cast(&maxes, field.data_type()),
    ) else {
        return unknown();
    };
    let null_count = (nulls.null_count() == 0).then(|| nulls.values().iter().sum::<u64>());
    let mut min: Option<ScalarValue> = None;
    let mut max: Option<ScalarValue> = None;
    for (rg, group) in row_groups.iter().enumerate() {
        let all_null = nulls.is_valid(rg) && nulls.value(rg) == group.num_rows() as u64;
        if all_null || group.num_rows() == 0 {
            continue;
        }
        if mins.is_null(rg) || maxes.is_null(rg) {
            return (unknown().0, unknown().1, null_count);
        }
        let (Ok(low), Ok(high)) = (
            ScalarValue::try_from_array(&mins, rg),
            ScalarValue::try_from_array(&maxes, rg),
        ) else {
            return unknown();
        };
        if min
            .as_ref()
            .is_none_or(|m| low.partial_cmp(m).is_some_and(|o| o.is_lt()))
        {
            min = Some(low);
        }
        if max
            .as_ref()
            .is_none_or(|m| high.partial_cmp(m).is_some_and(|o| o.is_gt()))
        {
            max = Some(high);
        }
    }
    let (fallback_min, fallback_max, _) = unknown();
    (
        min.unwrap_or(fallback_min),
        max.unwrap_or(fallback_max),
        null_count,
    )
}

/// `batch` with `schema`'s columns: statistics of columns it lacks are null (unknown).
fn align(batch: &RecordBatch, schema: SchemaRef) -> Result<RecordBatch> {
    if batch.schema() == schema {
        return Ok(batch.clone());
    }
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) if field.name() == "stats" => align_stats(column, field.data_type()),
            Some(column) => Ok(Arc::clone(column)),
            None => Ok(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn align_stats(column: &ArrayRef, wanted: &DataType) -> Result<ArrayRef> {
    let DataType::Struct(fields) = wanted else {
        return Ok(Arc::clone(column));
    };
    let have = column.as_struct();
    let children = fields
        .iter()
        .map(|field| match have.column_by_name(field.name()) {
            Some(child) if child.data_type() == field.data_type() => Ok(Arc::clone(child)),
            _ => Ok(new_null_array(field.data_type(), column.len())),
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    if fields.is_empty() {
        return Ok(Arc::new(StructArray::new_empty_fields(column.len(), None)));
    }
    Ok(Arc::new(StructArray::try_new(
        fields.clone(),
        children,
        None,
    )?))
}

/// The index's statistics for some files (one container each): rows of `index.entries`,
/// `None` where the index does not describe the file as listed.
struct IndexStatistics<'a> {
    index: &'a FileIndex,
    table_schema: &'a Schema,
    rows: Vec<Option<u32>>,
}

impl IndexStatistics<'_> {
    /// The statistic `name` (`min`, `max`, `null_count`) of `column`, per container.
    fn statistic(&self, column: &Column, name: &str) -> Option<ArrayRef> {
        let column_name = &column.name;
        let stats = self.index.entries.column_by_name("stats")?.as_struct();
        let column = stats.column_by_name(&column.name)?.as_struct();
        let values = take(
            column.column_by_name(name)?,
            &UInt32Array::from(self.rows.clone()),
            None,
        )
        .ok()?;
        match self.table_schema.field_with_name(column_name).ok() {
            Some(field) if name != "null_count" && field.data_type() != values.data_type() => {
                cast(&values, field.data_type()).ok()
            }
            _ => Some(values),
        }
    }

    fn entry(&self, name: &str) -> Option<ArrayRef> {
        let values = self.index.entries.column_by_name(name)?;
        take(values, &UInt32Array::from(self.rows.clone()), None).ok()
    }
}

impl PruningStatistics for IndexStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "min")
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "max")
    }

    fn num_containers(&self) -> usize {
        self.rows.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.statistic(column, "null_count")
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let rows = self.entry("rows")?;
        cast(&rows, &DataType::UInt64).ok()
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}

/// What an index holds and how it compares with a fresh listing (`quiver index show`),
/// or what a build or refresh just wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexStatus {
    pub location: String,
    pub glob: String,
    /// Files it describes.
    pub files: usize,
    /// Columns with min, max and null count.
    pub columns: Vec<String>,
    pub built_at_ms: u64,
    /// Listed files it does not describe as they are now (new or rewritten) ...
    pub changed: usize,
    /// ... and files it describes that are no longer listed.
    pub deleted: usize,
    /// Set by a refresh.
    pub refresh: Option<RefreshSummary>,
}

impl IndexStatus {
    fn of(index: &FileIndex, location: &str, listed: &[ObjectMeta]) -> Self {
        let listed_paths: std::collections::HashSet<&str> =
            listed.iter().map(|f| f.path.as_str()).collect();
        Self {
            location: location.to_string(),
            glob: index.glob.clone(),
            files: index.len(),
            columns: indexed_fields(&index.data_schema)
                .iter()
                .map(|f| f.name().clone())
                .collect(),
            built_at_ms: index.built_at_ms,
            changed: listed.iter().filter(|f| !index.is_fresh(f)).count(),
            deleted: index
                .rows_by_path
                .keys()
                .filter(|p| !listed_paths.contains(p.as_str()))
                .count(),
            refresh: None,
        }
    }

    /// A few lines for people.
    pub fn report(&self) -> String {
        let age_s = now_ms().saturating_sub(self.built_at_ms) / 1000;
        let mut out = format!(
            "index: {}\nglob: {}\nfiles: {} indexed, {} new or changed since, {} deleted since\n\
             columns: {}\nbuilt: {} s ago\n",
            self.location,
            self.glob,
            self.files,
            self.changed,
            self.deleted,
            self.columns.join(", "),
            age_s
        );
        if let Some(refresh) = &self.refresh {
            out.push_str(&format!(
                "refresh: {} footers read, {} entries unchanged, {} dropped\n",
                refresh.footers_read, refresh.unchanged, refresh.dropped
            ));
        }
        out
    }
}

/// The files `glob` names now (no hive columns: an index is of files).
async fn listed(runtime: &QuiverRuntime, glob: &str, s3: &S3Options) -> Result<Vec<ObjectMeta>> {
    let options = crate::source::ListingOptions {
        hive_partitioning: Some(false),
        s3: s3.clone(),
    };
    let listing =
        crate::source::list_files(&runtime.sources, &[glob.to_string()], &options).await?;
    Ok(listing.files.into_iter().map(|f| f.meta).collect())
}

/// Builds the index of every file `glob` matches and writes it to `to` (default: beside
/// the data).
pub async fn build_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
    s3: &S3Options,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let files = listed(runtime, glob, s3).await?;
    let index = FileIndex::build(runtime, glob, &files, s3).await?;
    runtime
        .sources
        .put(&location, s3, index.to_parquet()?)
        .await?;
    Ok(IndexStatus::of(&index, &location, &files))
}

/// Lists `glob` again and reads footers only of files that are new or changed, dropping
/// entries of deleted ones; builds the index if there is none yet.
pub async fn refresh_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
    s3: &S3Options,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let Some(old) = read_at(runtime, &location, s3).await? else {
        let mut status = build_index(runtime, glob, to, s3).await?;
        status.refresh = Some(RefreshSummary {
            footers_read: status.files,
            ..Default::default()
        });
        return Ok(status);
    };
    let files = listed(runtime, glob, s3).await?;
    let (index, summary) = old.refresh(runtime, &files, s3).await?;
    let index = FileIndex {
        glob: glob.to_string(),
        ..index
    };
    runtime
        .sources
        .put(&location, s3, index.to_parquet()?)
        .await?;
    let mut status = IndexStatus::of(&index, &location, &files);
    status.refresh = Some(summary);
    Ok(status)
}

/// What the index of `glob` holds, and how many files changed since it was built.
pub async fn show_index(
    runtime: &QuiverRuntime,
    glob: &str,
    to: Option<&str>,
    s3: &S3Options,
) -> Result<IndexStatus> {
    let location = location(glob, to)?;
    let index = read_at(runtime, &location, s3).await?.ok_or_else(|| {
        DataFusionError::Plan(format!(
            "no index at {location}; build one with: quiver index build '{glob}'"
        ))
    })?;
    let files = listed(runtime, glob, s3).await?;
    Ok(IndexStatus::of(&index, &location, &files))
}

fn location(glob: &str, to: Option<&str>) -> Result<String> {
    match to {
        Some(to) => Ok(to.to_string()),
        None => default_location(glob),
    }
}

/// The index at `location`, or `None` if there is none.
async fn read_at(
    runtime: &QuiverRuntime,
    location: &str,
    s3: &S3Options,
) -> Result<Option<FileIndex>> {
    let source = runtime.sources.for_path(location, s3)?;
    match source.head(location).await {
        Ok(meta) => Ok(Some(FileIndex::read(runtime, &meta, s3).await?)),
        Err(crate::error::QuiverError::NotFound { .. }) => Ok(None),
        Err(other) => Err(other.into()),
    }
}
