//! Column bounds as manifests keep them: Iceberg's single-value binary form, typed by the
//! column's Arrow type. A bound of a column promoted since the file was written (int to
//! long, float to double) has the narrower width, and reads as the wider type.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;

/// The bound `bytes` as a value of `data_type`; `None` when it cannot be read as one
/// (an unknown bound prunes nothing).
pub fn bound(bytes: &[u8], data_type: &DataType) -> Option<ScalarValue> {
    let long = || -> Option<i64> {
        match bytes.len() {
            4 => Some(i32::from_le_bytes(bytes.try_into().ok()?) as i64),
            8 => Some(i64::from_le_bytes(bytes.try_into().ok()?)),
            _ => None,
        }
    };
    Some(match data_type {
        DataType::Boolean => ScalarValue::Boolean(Some(*bytes.first()? != 0)),
        DataType::Int32 => ScalarValue::Int32(Some(i32::from_le_bytes(bytes.try_into().ok()?))),
        DataType::Int64 => ScalarValue::Int64(Some(long()?)),
        DataType::Date32 => ScalarValue::Date32(Some(i32::from_le_bytes(bytes.try_into().ok()?))),
        DataType::Float32 => ScalarValue::Float32(Some(f32::from_le_bytes(bytes.try_into().ok()?))),
        DataType::Float64 => match bytes.len() {
            4 => ScalarValue::Float64(Some(f32::from_le_bytes(bytes.try_into().ok()?) as f64)),
            _ => ScalarValue::Float64(Some(f64::from_le_bytes(bytes.try_into().ok()?))),
        },
        DataType::Time64(TimeUnit::Microsecond) => ScalarValue::Time64Microsecond(Some(long()?)),
        DataType::Timestamp(TimeUnit::Microsecond, zone) => {
            ScalarValue::TimestampMicrosecond(Some(long()?), zone.clone())
        }
        DataType::Timestamp(TimeUnit::Nanosecond, zone) => {
            ScalarValue::TimestampNanosecond(Some(long()?), zone.clone())
        }
        DataType::Utf8 => ScalarValue::Utf8(Some(String::from_utf8(bytes.to_vec()).ok()?)),
        DataType::Utf8View => ScalarValue::Utf8View(Some(String::from_utf8(bytes.to_vec()).ok()?)),
        DataType::Binary => ScalarValue::Binary(Some(bytes.to_vec())),
        DataType::BinaryView => ScalarValue::BinaryView(Some(bytes.to_vec())),
        DataType::Decimal128(precision, scale) => {
            ScalarValue::Decimal128(Some(big_endian(bytes)?), *precision, *scale)
        }
        _ => return None,
    })
}

/// A big-endian two's-complement integer of up to 16 bytes (a decimal's unscaled value).
fn big_endian(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut wide = [fill; 16];
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(wide))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_read_as_the_spec_writes_them() {
        assert_eq!(
            bound(&42i64.to_le_bytes(), &DataType::Int64),
            Some(ScalarValue::Int64(Some(42)))
        );
        // An int column since promoted to long.
        assert_eq!(
            bound(&(-7i32).to_le_bytes(), &DataType::Int64),
            Some(ScalarValue::Int64(Some(-7)))
        );
        assert_eq!(
            bound(&19000i32.to_le_bytes(), &DataType::Date32),
            Some(ScalarValue::Date32(Some(19000)))
        );
        assert_eq!(
            bound(b"abc", &DataType::Utf8View),
            Some(ScalarValue::Utf8View(Some("abc".into())))
        );
        // -1.25 at scale 2 is -125: 0xff83.
        assert_eq!(
            bound(&[0xff, 0x83], &DataType::Decimal128(9, 2)),
            Some(ScalarValue::Decimal128(Some(-125), 9, 2))
        );
        assert_eq!(bound(&[1, 2, 3], &DataType::Int64), None);
        assert_eq!(bound(&[0xff, 0xfe], &DataType::Utf8), None);
    }
}
