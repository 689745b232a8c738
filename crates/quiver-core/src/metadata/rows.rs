//! The rows of the metadata tables, built column by column from footers, in DuckDB's
//! column order: a row per row group and column chunk (`parquet_metadata`), per schema
//! element (`parquet_schema`), per file (`parquet_file_metadata`) and per key-value pair
//! (`parquet_kv_metadata`).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Int64Builder, StringBuilder, UInt64Builder,
};
use datafusion::error::Result;
use parquet::basic::{ColumnOrder, ConvertedType, LogicalType, SortOrder};
use parquet::file::statistics::Statistics;
use parquet::schema::types::Type as SchemaType;

use super::text::{codec_name, logical_type_text, StatisticsText};
use crate::runtime::ParquetFile;

pub(super) fn metadata_columns(footers: &[ParquetFile]) -> Result<Vec<ArrayRef>> {
    let mut rows = MetadataRows::default();
    for footer in footers {
        let values = StatisticsText::of(footer)?;
        for (rg_index, rg) in footer.metadata().row_groups().iter().enumerate() {
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
                r.file_name.append_value(&footer.meta().path);
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

pub(super) fn schema_columns(footers: &[ParquetFile]) -> Vec<ArrayRef> {
    let mut rows = SchemaRows::default();
    for footer in footers {
        let descriptor = footer.metadata().file_metadata().schema_descr();
        let mut elements = vec![];
        depth_first(descriptor.root_schema(), &mut elements);
        for (id, element) in elements.into_iter().enumerate() {
            rows.push(&footer.meta().path, id, element);
        }
    }
    rows.finish()
}

/// The columns of `parquet_schema`, being built; `finish` gives them in schema order.
#[derive(Default)]
struct SchemaRows {
    file_name: StringBuilder,
    name: StringBuilder,
    physical: StringBuilder,
    type_length: StringBuilder,
    repetition: StringBuilder,
    children: Int64Builder,
    converted: StringBuilder,
    scale: Int64Builder,
    precision: Int64Builder,
    field_id: Int64Builder,
    logical: StringBuilder,
    column_id: Int64Builder,
}

impl SchemaRows {
    /// The row of schema element `element`, number `id` of the file at `path`.
    fn push(&mut self, path: &str, id: usize, element: &SchemaType) {
        let info = element.get_basic_info();
        self.file_name.append_value(path);
        self.name.append_value(element.name());
        self.column_id.append_value(id as i64);
        // The root has no repetition (the footer parser drops one a writer set).
        self.repetition.append_option(
            info.has_repetition()
                .then(|| format!("{:?}", info.repetition())),
        );
        self.converted.append_option(
            (info.converted_type() != ConvertedType::NONE)
                .then(|| format!("{:?}", info.converted_type())),
        );
        self.field_id
            .append_option(info.has_id().then(|| info.id() as i64));
        self.logical
            .append_option(info.logical_type_ref().map(logical_type_text));
        match element {
            SchemaType::GroupType { fields, .. } => {
                self.physical.append_null();
                self.type_length.append_null();
                self.children.append_value(fields.len() as i64);
                self.scale.append_null();
                self.precision.append_null();
            }
            SchemaType::PrimitiveType {
                physical_type,
                type_length: length,
                scale: s,
                precision: p,
                ..
            } => {
                self.physical.append_value(format!("{physical_type:?}"));
                self.type_length.append_option(
                    (*physical_type == parquet::basic::Type::FIXED_LEN_BYTE_ARRAY)
                        .then(|| length.to_string()),
                );
                self.children.append_null();
                let decimal = info.converted_type() == ConvertedType::DECIMAL
                    || matches!(info.logical_type_ref(), Some(LogicalType::Decimal(_)));
                self.scale.append_option(decimal.then_some(*s as i64));
                self.precision.append_option(decimal.then_some(*p as i64));
            }
        }
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.file_name.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.physical.finish()),
            Arc::new(self.type_length.finish()),
            Arc::new(self.repetition.finish()),
            Arc::new(self.children.finish()),
            Arc::new(self.converted.finish()),
            Arc::new(self.scale.finish()),
            Arc::new(self.precision.finish()),
            Arc::new(self.field_id.finish()),
            Arc::new(self.logical.finish()),
            Arc::new(self.column_id.finish()),
        ]
    }
}

fn depth_first<'a>(element: &'a SchemaType, out: &mut Vec<&'a SchemaType>) {
    out.push(element);
    if let SchemaType::GroupType { fields, .. } = element {
        for field in fields {
            depth_first(field, out);
        }
    }
}

pub(super) fn file_metadata_columns(footers: &[ParquetFile]) -> Vec<ArrayRef> {
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
        let file = footer.metadata().file_metadata();
        file_name.append_value(&footer.meta().path);
        created_by.append_option(file.created_by());
        rows.append_value(file.num_rows());
        row_groups.append_value(footer.metadata().num_row_groups() as i64);
        version.append_value(file.version() as i64);
        // Encrypted footers are not read (the footer cache would fail on them).
        encryption.append_null();
        signing_key.append_null();
        size.append_value(footer.meta().size);
        footer_size.append_value(footer.footer.encoded_len);
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

pub(super) fn kv_columns(footers: &[ParquetFile]) -> Vec<ArrayRef> {
    let mut file_name = StringBuilder::new();
    let mut key = BinaryBuilder::new();
    let mut value = BinaryBuilder::new();
    for footer in footers {
        let pairs = footer.metadata().file_metadata().key_value_metadata();
        for pair in pairs.into_iter().flatten() {
            file_name.append_value(&footer.meta().path);
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
