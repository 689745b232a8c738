//! Decimals stored as fixed-length byte arrays (as pyarrow, Spark and tpchgen write them)
//! are converted here, not in arrow-rs's reader, which sign-extends each value byte by
//! byte: that conversion was 31% of TPC-H Q6's time and 19% of Q1's (SF 1, `perf`).
//!
//! The decoder is handed a footer in which those columns are plain FIXED_LEN_BYTE_ARRAY,
//! so it reads them as `FixedSizeBinary`, and `restore` turns each batch's such columns
//! into `Decimal128` with a conversion compiled for each width.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, FixedSizeBinaryArray, RecordBatch,
};
use datafusion::arrow::buffer::ScalarBuffer;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
use parquet::file::metadata::{FileMetaData, ParquetMetaData};
use parquet::schema::types::{SchemaDescriptor, Type, TypePtr};

/// A file's footer as its decoder reads it, and the schema the decoder is given for it.
pub struct DecodingFooter {
    pub metadata: Arc<ParquetMetaData>,
    /// The table's file columns, with the columns converted here as `FixedSizeBinary`.
    pub file_schema: SchemaRef,
}

/// The footer with its fixed-length decimal columns unannotated, where the table reads
/// them as `Decimal128`; `None` when the file has none.
pub fn decoding_footer(metadata: &ParquetMetaData, file_schema: &Schema) -> Option<DecodingFooter> {
    let file = metadata.file_metadata();
    let root = file.schema_descr().root_schema();
    let mut converted = false;
    let fields: Vec<TypePtr> = root
        .get_fields()
        .iter()
        .map(|column| match width_if_converted(column, file_schema) {
            Some(width) => {
                converted = true;
                let info = column.get_basic_info();
                let plain =
                    Type::primitive_type_builder(info.name(), PhysicalType::FIXED_LEN_BYTE_ARRAY)
                        .with_repetition(info.repetition())
                        .with_length(width)
                        .with_id(info.has_id().then(|| info.id()))
                        .build()
                        .map(Arc::new);
                plain.unwrap_or_else(|_| Arc::clone(column))
            }
            None => Arc::clone(column),
        })
        .collect();
    if !converted {
        return None;
    }
    let root = Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .ok()?;
    let schema = Arc::new(SchemaDescriptor::new(Arc::new(root)));
    let footer = FileMetaData::new(
        file.version(),
        file.num_rows(),
        file.created_by().map(str::to_string),
        file.key_value_metadata().cloned(),
        Arc::clone(&schema),
        file.column_orders().cloned(),
    );
    let metadata = ParquetMetaData::new(footer, metadata.row_groups().to_vec());
    let fields = file_schema.fields().iter().map(|field| {
        let plain = schema
            .root_schema()
            .get_fields()
            .iter()
            .find(|c| c.name() == field.name() && is_plain_fixed(c));
        match plain {
            Some(column) => Arc::new(
                field
                    .as_ref()
                    .clone()
                    .with_data_type(DataType::FixedSizeBinary(type_length(column))),
            ),
            None => Arc::clone(field),
        }
    });
    Some(DecodingFooter {
        metadata: Arc::new(metadata),
        file_schema: Arc::new(Schema::new_with_metadata(
            fields.collect::<Vec<_>>(),
            file_schema.metadata().clone(),
        )),
    })
}

/// The width of a top-level fixed-length decimal column of up to 16 bytes that the table
/// reads as `Decimal128`.
fn width_if_converted(column: &TypePtr, file_schema: &Schema) -> Option<i32> {
    if !column.is_primitive() || column.get_physical_type() != PhysicalType::FIXED_LEN_BYTE_ARRAY {
        return None;
    }
    let info = column.get_basic_info();
    let decimal = matches!(info.logical_type_ref(), Some(LogicalType::Decimal { .. }))
        || (info.logical_type_ref().is_none() && info.converted_type() == ConvertedType::DECIMAL);
    let width = type_length(column);
    let table_type = file_schema.field_with_name(info.name()).ok()?.data_type();
    (decimal && (1..=16).contains(&width) && matches!(table_type, DataType::Decimal128(..)))
        .then_some(width)
}

fn type_length(column: &Type) -> i32 {
    match column {
        Type::PrimitiveType { type_length, .. } => *type_length,
        Type::GroupType { .. } => -1,
    }
}

fn is_plain_fixed(column: &TypePtr) -> bool {
    column.is_primitive()
        && column.get_physical_type() == PhysicalType::FIXED_LEN_BYTE_ARRAY
        && column.get_basic_info().logical_type_ref().is_none()
        && column.get_basic_info().converted_type() == ConvertedType::NONE
}

/// `batch` as `schema` has it: each `FixedSizeBinary` column that `schema` types as
/// `Decimal128` converted.
pub fn restore(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(
            |(column, field)| match (column.data_type(), field.data_type()) {
                (DataType::FixedSizeBinary(_), &DataType::Decimal128(precision, scale)) => {
                    let decimals = decimals(column.as_fixed_size_binary(), precision, scale)?;
                    Ok(Arc::new(decimals) as ArrayRef)
                }
                _ => Ok(Arc::clone(column)),
            },
        )
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Big-endian two's complement values of 1 to 16 bytes as `Decimal128`.
fn decimals(array: &FixedSizeBinaryArray, precision: u8, scale: i8) -> Result<Decimal128Array> {
    let width = array.value_length() as usize;
    let bytes = &array.value_data()[..array.len() * width];
    let values = match width {
        1 => narrow::<1>(bytes),
        2 => narrow::<2>(bytes),
        3 => narrow::<3>(bytes),
        4 => narrow::<4>(bytes),
        5 => narrow::<5>(bytes),
        6 => narrow::<6>(bytes),
        7 => narrow::<7>(bytes),
        8 => narrow::<8>(bytes),
        9 => wide::<9>(bytes),
        10 => wide::<10>(bytes),
        11 => wide::<11>(bytes),
        12 => wide::<12>(bytes),
        13 => wide::<13>(bytes),
        14 => wide::<14>(bytes),
        15 => wide::<15>(bytes),
        16 => wide::<16>(bytes),
        _ => {
            return Err(DataFusionError::Internal(format!(
                "a decimal of {width} bytes reached the decimal conversion"
            )))
        }
    };
    Ok(
        Decimal128Array::try_new(ScalarBuffer::from(values), array.nulls().cloned())?
            .with_precision_and_scale(precision, scale)?,
    )
}

/// Up to 8 bytes: placed at the top of an `i64`, then shifted down, which sign-extends.
fn narrow<const W: usize>(bytes: &[u8]) -> Vec<i128> {
    bytes
        .chunks_exact(W)
        .map(|value| {
            let mut word = [0u8; 8];
            word[..W].copy_from_slice(value);
            (i64::from_be_bytes(word) >> (64 - 8 * W)) as i128
        })
        .collect()
}

/// 9 to 16 bytes, the same in an `i128`.
fn wide<const W: usize>(bytes: &[u8]) -> Vec<i128> {
    bytes
        .chunks_exact(W)
        .map(|value| {
            let mut word = [0u8; 16];
            word[..W].copy_from_slice(value);
            i128::from_be_bytes(word) >> (128 - 8 * W)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use datafusion::arrow::datatypes::Field;
    use parquet::arrow::arrow_reader::{
        ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    };
    use parquet::data_type::{FixedLenByteArray, FixedLenByteArrayType, Int64Type};
    use parquet::file::reader::FileReader;
    use parquet::file::serialized_reader::SerializedFileReader;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    const ROWS: usize = 9;

    /// The most digits `width` bytes hold.
    fn precision(width: usize) -> usize {
        (((8 * width - 1) as f64) * 2f64.log10()).floor().min(38.0) as usize
    }

    /// A file with an integer column and one fixed-length decimal column of each width
    /// from 1 to 16 bytes, nullable, holding each width's extremes, zero and ±1.
    fn decimal_file() -> Bytes {
        let columns: String = (1..=16)
            .map(|w| {
                let p = precision(w);
                format!(
                    "optional fixed_len_byte_array({w}) d{w} (DECIMAL({p},{}));",
                    p / 2
                )
            })
            .collect();
        let schema = Arc::new(
            parse_message_type(&format!("message m {{ required int64 id; {columns} }}")).unwrap(),
        );
        let mut bytes = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut bytes, schema, Default::default()).unwrap();
        let mut row_group = writer.next_row_group().unwrap();
        let mut ids = row_group.next_column().unwrap().unwrap();
        let id_values: Vec<i64> = (0..ROWS as i64).collect();
        ids.typed::<Int64Type>()
            .write_batch(&id_values, None, None)
            .unwrap();
        ids.close().unwrap();
        for width in 1..=16 {
            let largest = 10i128.pow(precision(width) as u32) - 1;
            let values = [largest, -largest, 0, -1, 1, largest / 3, -largest / 7, 42];
            let encoded: Vec<FixedLenByteArray> = values
                .iter()
                .map(|v| FixedLenByteArray::from(v.to_be_bytes()[16 - width..].to_vec()))
                .collect();
            let levels = [1, 1, 1, 1, 0, 1, 1, 1, 1]; // the fifth row is null
            let mut column = row_group.next_column().unwrap().unwrap();
            column
                .typed::<FixedLenByteArrayType>()
                .write_batch(&encoded, Some(&levels), None)
                .unwrap();
            column.close().unwrap();
        }
        row_group.close().unwrap();
        writer.close().unwrap();
        Bytes::from(bytes)
    }

    fn footer(bytes: &Bytes) -> ParquetMetaData {
        SerializedFileReader::new(bytes.clone())
            .unwrap()
            .metadata()
            .clone()
    }

    /// The file read by arrow-rs as it is, and through `decoding_footer` and `restore`.
    fn both_ways(bytes: Bytes) -> (RecordBatch, RecordBatch) {
        let reference = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let decoding = decoding_footer(&footer(&bytes), &reference.schema()).unwrap();
        let options = ArrowReaderOptions::new().with_schema(Arc::clone(&decoding.file_schema));
        let metadata = ArrowReaderMetadata::try_new(decoding.metadata, options).unwrap();
        let read = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, metadata)
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        (reference, read)
    }

    #[test]
    fn every_width_reads_as_arrow_reads_it() {
        let (reference, read) = both_ways(decimal_file());
        assert_eq!(reference.num_rows(), ROWS);
        assert_eq!(
            reference.column(16).data_type(),
            &DataType::Decimal128(38, 19)
        );
        assert!(reference.column(1).is_null(4));
        for width in 1..=16 {
            let expected = DataType::FixedSizeBinary(width);
            assert_eq!(read.column(width as usize).data_type(), &expected);
        }
        assert_eq!(restore(read, &reference.schema()).unwrap(), reference);
    }

    #[test]
    fn a_sliced_batch_converts_its_own_rows() {
        let (reference, read) = both_ways(decimal_file());
        let restored = restore(read.slice(3, 4), &reference.schema()).unwrap();
        assert_eq!(restored, reference.slice(3, 4));
    }

    #[test]
    fn only_columns_the_table_reads_as_decimal128_are_converted() {
        let bytes = decimal_file();
        let metadata = footer(&bytes);
        let table = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .schema()
            .clone();
        let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields[7] = fields[7]
            .clone()
            .with_data_type(DataType::Decimal256(16, 8));
        let decoding = decoding_footer(&metadata, &Schema::new(fields)).unwrap();
        assert_eq!(
            decoding.file_schema.field(7).data_type(),
            &DataType::Decimal256(16, 8)
        );
        assert_eq!(
            decoding.file_schema.field(8).data_type(),
            &DataType::FixedSizeBinary(8)
        );
        let descr = decoding.metadata.file_metadata().schema_descr_ptr();
        assert!(
            descr.column(7).logical_type_ref().is_some(),
            "d7 keeps its annotation"
        );
        assert!(descr.column(8).logical_type_ref().is_none());

        let integers = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        assert!(decoding_footer(&metadata, &integers).is_none());
    }
}
