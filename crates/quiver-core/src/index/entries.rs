//! Entries from footers: a file's min, max and null count per column from its row groups'
//! statistics; a refresh reads the footers of new or changed files only.

use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StructArray,
    UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;

use crate::runtime::{ParquetFile, QuiverRuntime};
use crate::source::ObjectMeta;

use super::{FileIndex, RefreshSummary};

impl FileIndex {
    /// Reads every footer of `files` and indexes them.
    pub async fn build(runtime: &QuiverRuntime, glob: &str, files: &[ObjectMeta]) -> Result<Self> {
        let footers = runtime.open_all(files).await?;
        let data_schema = match footers.first() {
            Some(first) => first.arrow_schema()?,
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
    ) -> Result<(Self, RefreshSummary)> {
        let (fresh, stale): (Vec<&ObjectMeta>, Vec<&ObjectMeta>) =
            files.iter().partition(|f| self.is_fresh(f));
        let stale: Vec<ObjectMeta> = stale.into_iter().cloned().collect();
        let footers = runtime.open_all(&stale).await?;
        let data_schema = if self.data_schema.fields().is_empty() {
            match footers.first() {
                Some(first) => first.arrow_schema()?,
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
}

pub(super) fn now_ms() -> u64 {
    web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Columns with statistics: the top-level ones that are not nested.
pub fn indexed_fields(data_schema: &Schema) -> Vec<&Field> {
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

/// What an index says of one file: its rows, row groups and, per indexed column of the
/// data schema (see `indexed_fields`), its min, max and null count (null: unknown).
#[derive(Debug, Clone)]
pub struct FileEntry {
    pub meta: ObjectMeta,
    pub rows: i64,
    pub row_groups: i64,
    pub statistics: Vec<(ScalarValue, ScalarValue, Option<u64>)>,
}

impl FileIndex {
    /// An index of files whose statistics are known without their footers (an Iceberg
    /// table's manifests keep them). `exact`: whether its rows and bounds may answer a
    /// count or a min/max (not when deletes apply to the files).
    pub fn of_entries(data_schema: SchemaRef, files: &[FileEntry], exact: bool) -> Result<Self> {
        let entries = entries_batch(files, &data_schema)?;
        let mut index = Self::new(entries, data_schema, String::new(), now_ms())?;
        index.answers = exact;
        Ok(index)
    }
}

/// The entries of these files' footers, with statistics for `data_schema`'s columns.
fn entries_of(footers: &[ParquetFile], data_schema: &Schema) -> Result<RecordBatch> {
    let fields = indexed_fields(data_schema);
    let mut files = Vec::with_capacity(footers.len());
    for footer in footers {
        let stored = footer.arrow_schema()?;
        files.push(FileEntry {
            meta: footer.meta().clone(),
            rows: footer.metadata().file_metadata().num_rows(),
            row_groups: footer.metadata().num_row_groups() as i64,
            statistics: fields
                .iter()
                .map(|field| file_statistics(footer, &stored, field))
                .collect(),
        });
    }
    entries_batch(&files, data_schema)
}

fn entries_batch(files: &[FileEntry], data_schema: &Schema) -> Result<RecordBatch> {
    let fields = indexed_fields(data_schema);
    let mut stats_fields = vec![];
    let mut stats_arrays: Vec<ArrayRef> = vec![];
    for (i, field) in fields.iter().enumerate() {
        let data_type = field.data_type();
        let column = |values: Vec<ScalarValue>| -> Result<ArrayRef> {
            if values.is_empty() {
                return Ok(new_null_array(data_type, 0));
            }
            ScalarValue::iter_to_array(values)
        };
        let of = |f: &FileEntry| f.statistics[i].clone();
        let children: Vec<ArrayRef> = vec![
            column(files.iter().map(|f| of(f).0).collect())?,
            column(files.iter().map(|f| of(f).1).collect())?,
            Arc::new(UInt64Array::from_iter(files.iter().map(|f| of(f).2))),
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
        Arc::new(StructArray::new_empty_fields(files.len(), None)) as ArrayRef
    } else {
        Arc::new(StructArray::try_new(
            Fields::from(stats_fields),
            stats_arrays,
            None,
        )?)
    };
    let column = |f: &dyn Fn(&FileEntry) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(files.iter().map(f)))
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
                files.iter().map(|f| f.meta.path.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                files.iter().map(|f| f.meta.version.as_str()),
            )),
            column(&|f| f.meta.size as i64),
            column(&|f| f.rows),
            column(&|f| f.row_groups),
            stats,
        ],
    )?)
}

/// A file's min, max and null count of `field`, from its row groups' statistics; unknown
/// (null) where any row group with values lacks them, or the file lacks the column.
fn file_statistics(
    footer: &ParquetFile,
    stored: &Schema,
    field: &Field,
) -> (ScalarValue, ScalarValue, Option<u64>) {
    let unknown = || {
        let null = ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null);
        (null.clone(), null, None)
    };
    let metadata = footer.metadata();
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
