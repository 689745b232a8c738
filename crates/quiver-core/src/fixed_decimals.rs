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

/// A footer with its fixed-length decimal columns unannotated, and those columns: built
/// once per file and kept beside its footer (a copy per bucket held 80 MB more while
/// exporting SF 10 lineitem, whose footer has 600 row groups).
#[derive(Debug)]
pub struct PlainDecimals {
    pub metadata: Arc<ParquetMetaData>,
    /// Each such column's name, width in bytes, and type as arrow-rs reads it.
    columns: Vec<(String, i32, DataType)>,
}

/// `metadata` with its top-level fixed-length decimal columns of up to 16 bytes (arrow-rs
/// reads them as `Decimal128`) unannotated; `None` when the file has none.
pub fn plain_decimals(metadata: &ParquetMetaData) -> Option<PlainDecimals> {
    let file = metadata.file_metadata();
    let root = file.schema_descr().root_schema();
    let mut columns = Vec::new();
    let fields: Vec<TypePtr> = root
        .get_fields()
        .iter()
        .map(|column| {
            let Some((width, decimal)) = fixed_decimal(column) else {
                return Arc::clone(column);
            };
            let info = column.get_basic_info();
            let plain =
                Type::primitive_type_builder(info.name(), PhysicalType::FIXED_LEN_BYTE_ARRAY)
                    .with_repetition(info.repetition())
                    .with_length(width)
                    .with_id(info.has_id().then(|| info.id()))
                    .build();
            match plain {
                Ok(plain) => {
                    columns.push((info.name().to_string(), width, decimal));
                    Arc::new(plain)
                }
                Err(_) => Arc::clone(column),
            }
        })
        .collect();
    if columns.is_empty() {
        return None;
    }
    let root = Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .ok()?;
    let footer = FileMetaData::new(
        file.version(),
        file.num_rows(),
        file.created_by().map(str::to_string),
        file.key_value_metadata().cloned(),
        Arc::new(SchemaDescriptor::new(Arc::new(root))),
        file.column_orders().cloned(),
    );
    Some(PlainDecimals {
        metadata: Arc::new(ParquetMetaData::new(footer, metadata.row_groups().to_vec())),
        columns,
    })
}

impl PlainDecimals {
    /// The schema the decoder is given for the table's file columns: these columns as
    /// `FixedSizeBinary`. `None` when the table reads one of them as another type than
    /// the file's (it is then cast from what arrow-rs decodes, not converted here).
    pub fn file_schema(&self, table: &Schema) -> Option<SchemaRef> {
        let mut fields = table.fields().to_vec();
        for (name, width, decimal) in &self.columns {
            let Some((index, field)) = table.column_with_name(name) else {
                continue; // not a column of the table: never decoded
            };
            if field.data_type() != decimal {
                return None;
            }
            let binary = field
                .clone()
                .with_data_type(DataType::FixedSizeBinary(*width));
            fields[index] = Arc::new(binary);
        }
        Some(Arc::new(Schema::new_with_metadata(
            fields,
            table.metadata().clone(),
        )))
    }
}

/// The width and arrow type of a top-level fixed-length decimal column of 1 to 16 bytes.
fn fixed_decimal(column: &TypePtr) -> Option<(i32, DataType)> {
    let Type::PrimitiveType {
        basic_info,
        physical_type: PhysicalType::FIXED_LEN_BYTE_ARRAY,
        type_length,
        scale,
        precision,
    } = column.as_ref()
    else {
        return None;
    };
    let (precision, scale) = match (basic_info.logical_type_ref(), basic_info.converted_type()) {
        (Some(LogicalType::Decimal(decimal)), _) => (decimal.precision, decimal.scale),
        (None, ConvertedType::DECIMAL) => (*precision, *scale),
        _ => return None,
    };
    let decimal = DataType::Decimal128(u8::try_from(precision).ok()?, i8::try_from(scale).ok()?);
    (1..=16)
        .contains(type_length)
        .then_some((*type_length, decimal))
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
        let plain = plain_decimals(&footer(&bytes)).unwrap();
        let file_schema = plain.file_schema(&reference.schema()).unwrap();
        let options = ArrowReaderOptions::new().with_schema(file_schema);
        let metadata = ArrowReaderMetadata::try_new(plain.metadata, options).unwrap();
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
    fn a_table_that_reads_a_decimal_as_another_type_decodes_the_file_as_it_is() {
        let bytes = decimal_file();
        let metadata = footer(&bytes);
        let plain = plain_decimals(&metadata).unwrap();
        let descr = plain.metadata.file_metadata().schema_descr_ptr();
        assert!((1..=16).all(|c| descr.column(c).logical_type_ref().is_none()));

        let table = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .schema()
            .clone();
        let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
        // A wider scale (another file of the table has it): raw values would be wrong.
        fields[7] = fields[7]
            .clone()
            .with_data_type(DataType::Decimal128(20, 5));
        assert!(plain.file_schema(&Schema::new(fields)).is_none());
        // A table without some of the columns is fine.
        let some = Schema::new(vec![table.field(0).clone(), table.field(3).clone()]);
        let schema = plain.file_schema(&some).unwrap();
        assert_eq!(schema.field(1).data_type(), &DataType::FixedSizeBinary(3));

        let integers = parse_message_type("message m { required int64 id; }").unwrap();
        let mut bytes = Vec::new();
        SerializedFileWriter::new(&mut bytes, Arc::new(integers), Default::default())
            .unwrap()
            .close()
            .unwrap();
        assert!(plain_decimals(&footer(&Bytes::from(bytes))).is_none());
    }
}
