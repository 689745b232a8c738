//! DuckDB's functions between bytes and text that DataFusion lacks or writes otherwise: hex
//! (upper case, of integers, strings and BLOBs alike), binary digits, base64 with its padding,
//! and their inverses, which give BLOBs. (A BLOB literal, `'\xAA'::BLOB`, is read in
//! `literals`.)

use base64::Engine;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};

use super::row_functions::{bytes, int, returns, text, utf8, RowFunction};

pub const BYTES: &[RowFunction] = &[
    RowFunction {
        names: &["hex", "to_hex"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| {
            Ok(utf8(match integer(&a[0]) {
                Some(n) => format!("{n:X}"),
                None => bytes(&a[0])?.iter().map(|b| format!("{b:02X}")).collect(),
            }))
        },
        strict: true,
    },
    RowFunction {
        names: &["bin", "to_binary"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| {
            Ok(utf8(match integer(&a[0]) {
                Some(n) => format!("{n:b}"),
                None => bytes(&a[0])?.iter().map(|b| format!("{b:08b}")).collect(),
            }))
        },
        strict: true,
    },
    RowFunction {
        names: &["unhex", "from_hex"],
        arity: 1..=1,
        returns: returns!(DataType::Binary),
        eval: |a| digits_to_bytes(text(&a[0])?, 4).map(blob),
        strict: true,
    },
    RowFunction {
        names: &["unbin", "from_binary"],
        arity: 1..=1,
        returns: returns!(DataType::Binary),
        eval: |a| digits_to_bytes(text(&a[0])?, 1).map(blob),
        strict: true,
    },
    RowFunction {
        names: &["to_base64", "base64"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| {
            Ok(utf8(
                base64::engine::general_purpose::STANDARD.encode(bytes(&a[0])?),
            ))
        },
        strict: true,
    },
    RowFunction {
        names: &["from_base64"],
        arity: 1..=1,
        returns: returns!(DataType::Binary),
        eval: |a| match base64::engine::general_purpose::STANDARD.decode(text(&a[0])?) {
            Ok(decoded) => Ok(blob(decoded)),
            Err(e) => exec_err!("from_base64: not base64 ({e})"),
        },
        strict: true,
    },
];

/// An integer argument as the unsigned bits of its own width (a negative INTEGER is 8 hex
/// digits, a BIGINT 16), or `None` for strings and BLOBs.
fn integer(value: &ScalarValue) -> Option<u64> {
    Some(match value {
        ScalarValue::Int8(Some(n)) => *n as u8 as u64,
        ScalarValue::Int16(Some(n)) => *n as u16 as u64,
        ScalarValue::Int32(Some(n)) => *n as u32 as u64,
        ScalarValue::Int64(Some(n)) => *n as u64,
        ScalarValue::UInt8(Some(n)) => *n as u64,
        ScalarValue::UInt16(Some(n)) => *n as u64,
        ScalarValue::UInt32(Some(n)) => *n as u64,
        ScalarValue::UInt64(Some(n)) => *n,
        ScalarValue::Decimal128(Some(_), _, 0) => int(value).ok()? as u64,
        _ => return None,
    })
}

fn blob(bytes: Vec<u8>) -> ScalarValue {
    ScalarValue::Binary(Some(bytes))
}

/// Hex (`bits` 4) or binary (`bits` 1) digits as bytes, the first byte padded with zeros
/// in front where the digits do not fill it.
fn digits_to_bytes(digits: &str, bits: u32) -> Result<Vec<u8>> {
    let radix = 1 << bits;
    let per_byte = (8 / bits) as usize;
    let values = digits
        .chars()
        .map(|c| c.to_digit(radix).map(|d| d as u8))
        .collect::<Option<Vec<u8>>>();
    let Some(values) = values else {
        return exec_err!("'{digits}' is not a string of base-{radix} digits");
    };
    let padding = (per_byte - values.len() % per_byte) % per_byte;
    let padded: Vec<u8> = std::iter::repeat_n(0, padding).chain(values).collect();
    Ok(padded
        .chunks(per_byte)
        .map(|chunk| chunk.iter().fold(0u8, |byte, d| (byte << bits) | d))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_pad_the_first_byte() {
        assert_eq!(digits_to_bytes("2A", 4).unwrap(), b"*");
        assert_eq!(digits_to_bytes("A", 4).unwrap(), [0x0a]);
        assert_eq!(digits_to_bytes("0110", 1).unwrap(), [6]);
        assert_eq!(digits_to_bytes("100000001", 1).unwrap(), [1, 1]);
        assert!(digits_to_bytes("12", 1).is_err());
    }
}
