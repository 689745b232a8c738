//! Parquet metadata as tables, under DuckDB's names and columns so its users can paste:
//! `parquet_metadata` (a row per file, row group and column chunk), `parquet_schema`,
//! `parquet_file_metadata` and `parquet_kv_metadata`. They read footers only: one request
//! per file at most (the footer cache), many in flight, never a data page; a filter on
//! `file_name` drops files before their footers are read.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Int64Builder, RecordBatch, StringBuilder,
    UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::DFSchema;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use futures::stream::{self, StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::{ColumnOrder, ConvertedType, LogicalType, SortOrder, TimeUnit};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use parquet::schema::types::Type as SchemaType;

use crate::footer::arrow_schema;
use crate::options::QuiverOptions;
use crate::prune::files_to_read;
use crate::runtime::QuiverRuntime;
use crate::source::{ObjectMeta, S3Options};

/// 64 footers in flight: listing-sized concurrency for object storage.
const FOOTER_CONCURRENCY: usize = 64;

/// Which metadata table a function call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataKind {
    /// A row per file x row group x column chunk.
    Metadata,
    /// A row per schema element per file.
    Schema,
    /// A row per file.
    FileMetadata,
    /// A row per key-value pair in a footer.
    KvMetadata,
}

impl MetadataKind {
    /// The kind a table function name stands for (`parquet_metadata`, …).
    pub fn from_function(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "parquet_metadata" => Some(Self::Metadata),
            "parquet_schema" => Some(Self::Schema),
            "parquet_file_metadata" => Some(Self::FileMetadata),
            "parquet_kv_metadata" => Some(Self::KvMetadata),
            _ => None,
        }
    }

    pub fn function(self) -> &'static str {
        match self {
            Self::Metadata => "parquet_metadata",
            Self::Schema => "parquet_schema",
            Self::FileMetadata => "parquet_file_metadata",
            Self::KvMetadata => "parquet_kv_metadata",
        }
    }

    pub fn schema(self) -> SchemaRef {
        use DataType::{Binary, Boolean, Int64, UInt64, Utf8};
        let columns: &[(&str, DataType)] = match self {
            Self::Metadata => &[
                ("file_name", Utf8),
                ("row_group_id", Int64),
                ("row_group_num_rows", Int64),
                ("row_group_num_columns", Int64),
                ("row_group_bytes", Int64),
                ("column_id", Int64),
                ("file_offset", Int64),
                ("num_values", Int64),
                ("path_in_schema", Utf8),
                ("type", Utf8),
                ("stats_min", Utf8),
                ("stats_max", Utf8),
                ("stats_null_count", Int64),
                ("stats_distinct_count", Int64),
                ("stats_min_value", Utf8),
                ("stats_max_value", Utf8),
                ("compression", Utf8),
                ("encodings", Utf8),
                ("index_page_offset", Int64),
                ("dictionary_page_offset", Int64),
                ("data_page_offset", Int64),
                ("total_compressed_size", Int64),
                ("total_uncompressed_size", Int64),
                ("bloom_filter_offset", Int64),
                ("bloom_filter_length", Int64),
                ("min_is_exact", Boolean),
                ("max_is_exact", Boolean),
                ("row_group_compressed_bytes", Int64),
            ],
            Self::Schema => &[
                ("file_name", Utf8),
                ("name", Utf8),
                ("type", Utf8),
                ("type_length", Utf8),
                ("repetition_type", Utf8),
                ("num_children", Int64),
                ("converted_type", Utf8),
                ("scale", Int64),
                ("precision", Int64),
                ("field_id", Int64),
                ("logical_type", Utf8),
                ("column_id", Int64),
            ],
            Self::FileMetadata => &[
                ("file_name", Utf8),
                ("created_by", Utf8),
                ("num_rows", Int64),
                ("num_row_groups", Int64),
                ("format_version", Int64),
                ("encryption_algorithm", Utf8),
                ("footer_signing_key_metadata", Utf8),
                ("file_size_bytes", UInt64),
                ("footer_size", UInt64),
            ],
            Self::KvMetadata => &[("file_name", Utf8), ("key", Binary), ("value", Binary)],
        };
        Arc::new(Schema::new(
            columns
                .iter()
                .map(|(name, data_type)| Field::new(*name, data_type.clone(), true))
                .collect::<Vec<_>>(),
        ))
    }

    /// The rows of these files' footers, in the order given.
    pub fn batch(self, footers: &[Footer]) -> Result<RecordBatch> {
        let columns = match self {
            Self::Metadata => metadata_columns(footers)?,
            Self::Schema => schema_columns(footers),
            Self::FileMetadata => file_metadata_columns(footers),
            Self::KvMetadata => kv_columns(footers),
        };
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

/// One file's footer, as the metadata tables read it.
#[derive(Debug, Clone)]
pub struct Footer {
    pub meta: ObjectMeta,
    pub metadata: Arc<ParquetMetaData>,
    /// The footer's encoded length, when known.
    pub encoded_len: Option<u64>,
}

/// The footers of `files`, read concurrently through the runtime's cache, in their order.
pub async fn read_footers(
    runtime: &QuiverRuntime,
    files: &[ObjectMeta],
    s3: &S3Options,
) -> Result<Vec<Footer>> {
    let metrics = &runtime.metrics();
    stream::iter(0..files.len())
        .map(|index| async move {
            let meta = &files[index];
            let source = runtime.sources.for_path(&meta.path, s3)?;
            let metadata = runtime.footer(source.as_ref(), meta, metrics).await?;
            Ok::<_, DataFusionError>(Footer {
                meta: meta.clone(),
                metadata,
                encoded_len: runtime.footers.encoded_len(meta),
            })
        })
        .buffered(FOOTER_CONCURRENCY)
        .try_collect()
        .await
}

/// A metadata table over the files a listing found; footers are read when it is scanned,
/// only for the files a `file_name` filter keeps.
#[derive(Debug)]
pub struct MetadataTable {
    kind: MetadataKind,
    files: Vec<ObjectMeta>,
}

impl MetadataTable {
    pub fn new(kind: MetadataKind, files: Vec<ObjectMeta>) -> Self {
        Self { kind, files }
    }

    /// The files whose name passes the filters on `file_name` alone.
    fn kept_files(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<ObjectMeta>> {
        let on_name: Vec<Expr> = filters
            .iter()
            .filter(|f| {
                let columns = f.column_refs();
                !columns.is_empty() && columns.iter().all(|c| c.name == "file_name")
            })
            .cloned()
            .collect();
        let Some(filter) = conjunction(on_name) else {
            return Ok(self.files.clone());
        };
        let schema = Arc::new(Schema::new(vec![Field::new(
            "file_name",
            DataType::Utf8,
            true,
        )]));
        let names = self.files.iter().map(|f| Some(f.path.as_str()));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(datafusion::arrow::array::StringArray::from_iter(names)) as ArrayRef],
        )?;
        let physical =
            state.create_physical_expr(filter, &DFSchema::try_from(schema.as_ref().clone())?)?;
        let keep = files_to_read(&physical, &batch)?;
        Ok(self
            .files
            .iter()
            .zip(keep)
            .filter(|(_, keep)| *keep)
            .map(|(file, _)| file.clone())
            .collect())
    }
}

#[async_trait]
impl TableProvider for MetadataTable {
    fn schema(&self) -> SchemaRef {
        self.kind.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // A filter on file_name drops footers; DataFusion still applies it to rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let runtime = QuiverRuntime::of(state.config())?;
        let s3 = QuiverOptions::of(state.config().options()).s3();
        let files = self.kept_files(state, filters)?;
        let footers = read_footers(&runtime, &files, &s3).await?;
        let batch = self.kind.batch(&footers)?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema(),
            projection.cloned(),
        )?)
    }
}

fn metadata_columns(footers: &[Footer]) -> Result<Vec<ArrayRef>> {
    let mut rows = MetadataRows::default();
    for footer in footers {
        let values = StatisticsText::of(footer)?;
        for (rg_index, rg) in footer.metadata.row_groups().iter().enumerate() {
            for (column_id, chunk) in rg.columns().iter().enumerate() {
                let stats = chunk.statistics();
                // Writers fill the deprecated min/max fields for signed sort orders only.
                let descriptor = chunk.column_descr();
                let signed_order = ColumnOrder::sort_order_for_type(
                    descriptor.logical_type_ref(),
                    descriptor.converted_type(),
                    descriptor.physical_type(),
                ) == SortOrder::SIGNED;
                let (min, max) = values.get(column_id, rg_index);
                let r = &mut rows;
                r.file_name.append_value(&footer.meta.path);
                r.row_group_id.append_value(rg_index as i64);
                r.row_group_num_rows.append_value(rg.num_rows());
                r.row_group_num_columns
                    .append_value(rg.num_columns() as i64);
                r.row_group_bytes.append_value(rg.total_byte_size());
                r.column_id.append_value(column_id as i64);
                r.file_offset.append_value(chunk.file_offset());
                r.num_values.append_value(chunk.num_values());
                r.path_in_schema
                    .append_value(chunk.column_path().parts().join(", "));
                r.physical_type
                    .append_value(format!("{:?}", chunk.column_type()));
                r.stats_min
                    .append_option(min.clone().filter(|_| signed_order));
                r.stats_max
                    .append_option(max.clone().filter(|_| signed_order));
                r.stats_null_count
                    .append_option(stats.and_then(Statistics::null_count_opt).map(|n| n as i64));
                r.stats_distinct_count.append_option(
                    stats
                        .and_then(Statistics::distinct_count_opt)
                        .map(|n| n as i64),
                );
                r.stats_min_value.append_option(min);
                r.stats_max_value.append_option(max);
                r.compression
                    .append_value(codec_name(&format!("{:?}", chunk.compression())));
                let encodings: Vec<String> = chunk.encodings().map(|e| format!("{e:?}")).collect();
                r.encodings.append_value(encodings.join(", "));
                r.index_page_offset.append_option(chunk.index_page_offset());
                r.dictionary_page_offset
                    .append_option(chunk.dictionary_page_offset());
                r.data_page_offset.append_value(chunk.data_page_offset());
                r.total_compressed_size
                    .append_value(chunk.compressed_size());
                r.total_uncompressed_size
                    .append_value(chunk.uncompressed_size());
                r.bloom_filter_offset
                    .append_option(chunk.bloom_filter_offset());
                r.bloom_filter_length
                    .append_option(chunk.bloom_filter_length().map(i64::from));
                r.min_is_exact
                    .append_option(stats.map(|s| s.min_is_exact()));
                r.max_is_exact
                    .append_option(stats.map(|s| s.max_is_exact()));
                r.row_group_compressed_bytes
                    .append_value(rg.compressed_size());
            }
        }
    }
    Ok(rows.finish())
}

/// The columns of `parquet_metadata`, being built; `finish` gives them in schema order.
#[derive(Default)]
struct MetadataRows {
    file_name: StringBuilder,
    row_group_id: Int64Builder,
    row_group_num_rows: Int64Builder,
    row_group_num_columns: Int64Builder,
    row_group_bytes: Int64Builder,
    column_id: Int64Builder,
    file_offset: Int64Builder,
    num_values: Int64Builder,
    path_in_schema: StringBuilder,
    physical_type: StringBuilder,
    stats_min: StringBuilder,
    stats_max: StringBuilder,
    stats_null_count: Int64Builder,
    stats_distinct_count: Int64Builder,
    stats_min_value: StringBuilder,
    stats_max_value: StringBuilder,
    compression: StringBuilder,
    encodings: StringBuilder,
    index_page_offset: Int64Builder,
    dictionary_page_offset: Int64Builder,
    data_page_offset: Int64Builder,
    total_compressed_size: Int64Builder,
    total_uncompressed_size: Int64Builder,
    bloom_filter_offset: Int64Builder,
    bloom_filter_length: Int64Builder,
    min_is_exact: BooleanBuilder,
    max_is_exact: BooleanBuilder,
    row_group_compressed_bytes: Int64Builder,
}

impl MetadataRows {
    fn finish(mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.file_name.finish()),
            Arc::new(self.row_group_id.finish()),
            Arc::new(self.row_group_num_rows.finish()),
            Arc::new(self.row_group_num_columns.finish()),
            Arc::new(self.row_group_bytes.finish()),
            Arc::new(self.column_id.finish()),
            Arc::new(self.file_offset.finish()),
            Arc::new(self.num_values.finish()),
            Arc::new(self.path_in_schema.finish()),
            Arc::new(self.physical_type.finish()),
            Arc::new(self.stats_min.finish()),
            Arc::new(self.stats_max.finish()),
            Arc::new(self.stats_null_count.finish()),
            Arc::new(self.stats_distinct_count.finish()),
            Arc::new(self.stats_min_value.finish()),
            Arc::new(self.stats_max_value.finish()),
            Arc::new(self.compression.finish()),
            Arc::new(self.encodings.finish()),
            Arc::new(self.index_page_offset.finish()),
            Arc::new(self.dictionary_page_offset.finish()),
            Arc::new(self.data_page_offset.finish()),
            Arc::new(self.total_compressed_size.finish()),
            Arc::new(self.total_uncompressed_size.finish()),
            Arc::new(self.bloom_filter_offset.finish()),
            Arc::new(self.bloom_filter_length.finish()),
            Arc::new(self.min_is_exact.finish()),
            Arc::new(self.max_is_exact.finish()),
            Arc::new(self.row_group_compressed_bytes.finish()),
        ]
    }
}

/// `ZSTD(ZstdLevel(1))` is `ZSTD`: the level is the writer's, not the file's.
fn codec_name(debug: &str) -> String {
    debug.split('(').next().unwrap_or(debug).to_string()
}

/// Row-group min and max of every leaf column of one file, as text in the column's logical
/// type (dates as dates, decimals with their scale), as DuckDB shows them.
struct StatisticsText {
    /// Per leaf column, per row group: (min, max).
    values: Vec<Vec<(Option<String>, Option<String>)>>,
}

impl StatisticsText {
    fn of(footer: &Footer) -> Result<Self> {
        let metadata = &footer.metadata;
        let descriptor = metadata.file_metadata().schema_descr();
        let schema = arrow_schema(&footer.meta.path, metadata)?;
        let row_groups = metadata.row_groups();
        let values = (0..descriptor.num_columns())
            .map(|leaf| {
                let column = descriptor.column(leaf);
                // Top-level columns convert through Arrow; nested ones show physical values.
                let converted = (column.path().parts().len() == 1)
                    .then(|| {
                        let converter =
                            StatisticsConverter::try_new(column.name(), &schema, descriptor)
                                .ok()?;
                        let mins = converter.row_group_mins(row_groups).ok()?;
                        let maxes = converter.row_group_maxes(row_groups).ok()?;
                        Some((texts(&mins), texts(&maxes)))
                    })
                    .flatten();
                (0..row_groups.len())
                    .map(|rg| {
                        let stats = row_groups[rg].column(leaf).statistics();
                        match &converted {
                            Some((mins, maxes)) => (mins[rg].clone(), maxes[rg].clone()),
                            None => (
                                stats.and_then(|s| s.min_bytes_opt().map(|b| physical_text(s, b))),
                                stats.and_then(|s| s.max_bytes_opt().map(|b| physical_text(s, b))),
                            ),
                        }
                    })
                    .collect()
            })
            .collect();
        Ok(Self { values })
    }

    fn get(&self, leaf: usize, row_group: usize) -> (Option<String>, Option<String>) {
        self.values[leaf][row_group].clone()
    }
}

/// Each value of `array` as DuckDB writes it: timestamps with a space, blobs escaped.
fn texts(array: &ArrayRef) -> Vec<Option<String>> {
    if let DataType::Binary | DataType::LargeBinary | DataType::FixedSizeBinary(_) =
        array.data_type()
    {
        let bytes = datafusion::arrow::compute::cast(array, &DataType::Binary);
        if let Ok(bytes) = bytes {
            let bytes = bytes
                .as_any()
                .downcast_ref::<datafusion::arrow::array::BinaryArray>()
                .cloned();
            if let Some(bytes) = bytes {
                return bytes.iter().map(|b| b.map(blob_text)).collect();
            }
        }
    }
    let options = FormatOptions::default()
        .with_null("\u{0}")
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
        .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f%:z"));
    let Ok(formatter) = ArrayFormatter::try_new(array.as_ref(), &options) else {
        return vec![None; array.len()];
    };
    (0..array.len())
        .map(|i| {
            let text = formatter.value(i).to_string();
            (array.is_valid(i) && text != "\u{0}").then_some(text)
        })
        .collect()
}

/// A physical value as text: numbers as numbers, bytes as UTF-8 where they are.
fn physical_text(stats: &Statistics, bytes: &[u8]) -> String {
    let fixed = |n: usize| bytes.get(..n).map(|b| b.to_vec()).unwrap_or_default();
    match stats {
        Statistics::Int32(_) => {
            i32::from_le_bytes(fixed(4).try_into().unwrap_or_default()).to_string()
        }
        Statistics::Int64(_) => {
            i64::from_le_bytes(fixed(8).try_into().unwrap_or_default()).to_string()
        }
        Statistics::Float(_) => {
            f32::from_le_bytes(fixed(4).try_into().unwrap_or_default()).to_string()
        }
        Statistics::Double(_) => {
            f64::from_le_bytes(fixed(8).try_into().unwrap_or_default()).to_string()
        }
        Statistics::Boolean(_) => (bytes.first() == Some(&1)).to_string(),
        _ => match std::str::from_utf8(bytes) {
            Ok(text) => text.to_string(),
            Err(_) => blob_text(bytes),
        },
    }
}

/// Bytes as DuckDB shows a BLOB: printable ASCII as is, the rest as `\xNN`.
fn blob_text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) && b != b'\\' {
                (b as char).to_string()
            } else {
                format!("\\x{b:02X}")
            }
        })
        .collect()
}

fn schema_columns(footers: &[Footer]) -> Vec<ArrayRef> {
    let mut file_name = StringBuilder::new();
    let mut name = StringBuilder::new();
    let mut physical = StringBuilder::new();
    let mut type_length = StringBuilder::new();
    let mut repetition = StringBuilder::new();
    let mut children = Int64Builder::new();
    let mut converted = StringBuilder::new();
    let mut scale = Int64Builder::new();
    let mut precision = Int64Builder::new();
    let mut field_id = Int64Builder::new();
    let mut logical = StringBuilder::new();
    let mut column_id = Int64Builder::new();
    for footer in footers {
        let root = footer.metadata.file_metadata().schema_descr().root_schema();
        let mut elements = vec![];
        depth_first(root, &mut elements);
        for (id, element) in elements.into_iter().enumerate() {
            let info = element.get_basic_info();
            file_name.append_value(&footer.meta.path);
            name.append_value(element.name());
            column_id.append_value(id as i64);
            // The root has no repetition (the footer parser drops one a writer set).
            repetition.append_option(
                info.has_repetition()
                    .then(|| format!("{:?}", info.repetition())),
            );
            converted.append_option(
                (info.converted_type() != ConvertedType::NONE)
                    .then(|| format!("{:?}", info.converted_type())),
            );
            field_id.append_option(info.has_id().then(|| info.id() as i64));
            logical.append_option(info.logical_type_ref().map(logical_type_text));
            match element {
                SchemaType::GroupType { fields, .. } => {
                    physical.append_null();
                    type_length.append_null();
                    children.append_value(fields.len() as i64);
                    scale.append_null();
                    precision.append_null();
                }
                SchemaType::PrimitiveType {
                    physical_type,
                    type_length: length,
                    scale: s,
                    precision: p,
                    ..
                } => {
                    physical.append_value(format!("{physical_type:?}"));
                    type_length.append_option(
                        (*physical_type == parquet::basic::Type::FIXED_LEN_BYTE_ARRAY)
                            .then(|| length.to_string()),
                    );
                    children.append_null();
                    let decimal = info.converted_type() == ConvertedType::DECIMAL
                        || matches!(info.logical_type_ref(), Some(LogicalType::Decimal(_)));
                    scale.append_option(decimal.then_some(*s as i64));
                    precision.append_option(decimal.then_some(*p as i64));
                }
            }
        }
    }
    vec![
        Arc::new(file_name.finish()),
        Arc::new(name.finish()),
        Arc::new(physical.finish()),
        Arc::new(type_length.finish()),
        Arc::new(repetition.finish()),
        Arc::new(children.finish()),
        Arc::new(converted.finish()),
        Arc::new(scale.finish()),
        Arc::new(precision.finish()),
        Arc::new(field_id.finish()),
        Arc::new(logical.finish()),
        Arc::new(column_id.finish()),
    ]
}

fn depth_first<'a>(element: &'a SchemaType, out: &mut Vec<&'a SchemaType>) {
    out.push(element);
    if let SchemaType::GroupType { fields, .. } = element {
        for field in fields {
            depth_first(field, out);
        }
    }
}

/// A logical type as the Parquet Thrift definition prints it (DuckDB shows this form).
fn logical_type_text(logical: &LogicalType) -> String {
    let unit = |unit: &TimeUnit| match unit {
        TimeUnit::MILLIS => "TimeUnit(MILLIS=MilliSeconds(), MICROS=<null>, NANOS=<null>)",
        TimeUnit::MICROS => "TimeUnit(MILLIS=<null>, MICROS=MicroSeconds(), NANOS=<null>)",
        _ => "TimeUnit(MILLIS=<null>, MICROS=<null>, NANOS=NanoSeconds())",
    };
    match logical {
        LogicalType::String => "StringType()".into(),
        LogicalType::Date => "DateType()".into(),
        LogicalType::Decimal(d) => {
            format!("DecimalType(scale={}, precision={})", d.scale, d.precision)
        }
        LogicalType::Integer(i) => format!(
            "IntType(bitWidth={}, isSigned={})",
            i.bit_width,
            u8::from(i.is_signed)
        ),
        LogicalType::Timestamp(t) => format!(
            "TimestampType(isAdjustedToUTC={}, unit={})",
            u8::from(t.is_adjusted_to_u_t_c),
            unit(&t.unit)
        ),
        LogicalType::Time(t) => format!(
            "TimeType(isAdjustedToUTC={}, unit={})",
            u8::from(t.is_adjusted_to_u_t_c),
            unit(&t.unit)
        ),
        other => format!("{other:?}"),
    }
}

fn file_metadata_columns(footers: &[Footer]) -> Vec<ArrayRef> {
    let mut file_name = StringBuilder::new();
    let mut created_by = StringBuilder::new();
    let mut rows = Int64Builder::new();
    let mut row_groups = Int64Builder::new();
    let mut version = Int64Builder::new();
    let mut encryption = StringBuilder::new();
    let mut signing_key = StringBuilder::new();
    let mut size = UInt64Builder::new();
    let mut footer_size = UInt64Builder::new();
    for footer in footers {
        let file = footer.metadata.file_metadata();
        file_name.append_value(&footer.meta.path);
        created_by.append_option(file.created_by());
        rows.append_value(file.num_rows());
        row_groups.append_value(footer.metadata.num_row_groups() as i64);
        version.append_value(file.version() as i64);
        // Encrypted footers are not read (the footer cache would fail on them).
        encryption.append_null();
        signing_key.append_null();
        size.append_value(footer.meta.size);
        footer_size.append_option(footer.encoded_len);
    }
    vec![
        Arc::new(file_name.finish()),
        Arc::new(created_by.finish()),
        Arc::new(rows.finish()),
        Arc::new(row_groups.finish()),
        Arc::new(version.finish()),
        Arc::new(encryption.finish()),
        Arc::new(signing_key.finish()),
        Arc::new(size.finish()),
        Arc::new(footer_size.finish()),
    ]
}

fn kv_columns(footers: &[Footer]) -> Vec<ArrayRef> {
    let mut file_name = StringBuilder::new();
    let mut key = BinaryBuilder::new();
    let mut value = BinaryBuilder::new();
    for footer in footers {
        let pairs = footer.metadata.file_metadata().key_value_metadata();
        for pair in pairs.into_iter().flatten() {
            file_name.append_value(&footer.meta.path);
            key.append_value(pair.key.as_bytes());
            value.append_option(pair.value.as_deref().map(str::as_bytes));
        }
    }
    vec![
        Arc::new(file_name.finish()),
        Arc::new(key.finish()),
        Arc::new(value.finish()),
    ]
}
