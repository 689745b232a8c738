//! Footer values as text, as DuckDB shows them: statistics in the column's logical type
//! (dates as dates, decimals with their scale), blobs escaped, logical types as Parquet's
//! Thrift definition prints them, codecs without their level.

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::Result;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::{LogicalType, TimeUnit};
use parquet::file::statistics::Statistics;

use crate::runtime::ParquetFile;

/// `ZSTD(ZstdLevel(1))` is `ZSTD`: the level is the writer's, not the file's.
pub(super) fn codec_name(debug: &str) -> String {
    debug.split('(').next().unwrap_or(debug).to_string()
}

/// Row-group min and max of every leaf column of one file, as text in the column's logical
/// type (dates as dates, decimals with their scale), as DuckDB shows them.
pub(super) struct StatisticsText {
    /// Per leaf column, per row group: (min, max).
    values: Vec<Vec<(Option<String>, Option<String>)>>,
}

impl StatisticsText {
    pub fn of(footer: &ParquetFile) -> Result<Self> {
        let metadata = footer.metadata();
        let descriptor = metadata.file_metadata().schema_descr();
        let schema = footer.arrow_schema()?;
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

    pub fn get(&self, leaf: usize, row_group: usize) -> (Option<String>, Option<String>) {
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

/// A logical type as the Parquet Thrift definition prints it (DuckDB shows this form).
pub(super) fn logical_type_text(logical: &LogicalType) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{BinaryArray, Date32Array, TimestampMicrosecondArray};
    use parquet::basic::{DecimalType, IntType, TimestampType};
    use std::sync::Arc;

    #[test]
    fn values_read_as_duckdb_writes_them() {
        assert_eq!(codec_name("ZSTD(ZstdLevel(1))"), "ZSTD");
        assert_eq!(codec_name("SNAPPY"), "SNAPPY");
        assert_eq!(blob_text(b"ab\\\x00\xff"), "ab\\x5C\\x00\\xFF");
        let dates: ArrayRef = Arc::new(Date32Array::from(vec![Some(19_723), None]));
        assert_eq!(texts(&dates), [Some("2024-01-01".to_string()), None]);
        let times: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_500_000]));
        assert_eq!(texts(&times), [Some("1970-01-01 00:00:01.500".to_string())]);
        let blobs: ArrayRef = Arc::new(BinaryArray::from_vec(vec![b"\x01z"]));
        assert_eq!(texts(&blobs), [Some("\\x01z".to_string())]);
    }

    #[test]
    fn logical_types_read_as_parquet_s_thrift_prints_them() {
        let decimal = LogicalType::Decimal(DecimalType {
            scale: 2,
            precision: 10,
        });
        assert_eq!(
            logical_type_text(&decimal),
            "DecimalType(scale=2, precision=10)"
        );
        let int = LogicalType::Integer(IntType {
            bit_width: 8,
            is_signed: false,
        });
        assert_eq!(logical_type_text(&int), "IntType(bitWidth=8, isSigned=0)");
        let timestamp = LogicalType::Timestamp(TimestampType {
            is_adjusted_to_u_t_c: true,
            unit: TimeUnit::MICROS,
        });
        assert_eq!(
            logical_type_text(&timestamp),
            "TimestampType(isAdjustedToUTC=1, unit=TimeUnit(MILLIS=<null>, MICROS=MicroSeconds(), NANOS=<null>))"
        );
    }
}
