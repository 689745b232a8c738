//! DuckDB's `hash(value, …)`: the same UBIGINT DuckDB gives, so that a bucketing or sampling
//! query written against DuckDB (`hash(user_id) % 10 = 0`) keeps the same rows here. Its
//! scheme, checked against DuckDB 2.0 value by value in the tests: a number is mixed by
//! MurmurHash3's 64-bit finaliser, an integer of 32 bits or fewer first widened to 32 bits
//! (so -1 of every narrow type hashes alike), a DOUBLE or FLOAT by its bits (both zeros as
//! 0), a 128-bit DECIMAL by its two halves; text and BLOBs eight bytes at a time from a seed
//! of their length; NULL to a constant; several arguments fold, each hash so far mixed
//! before the next is XORed in.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};

use super::row_functions::{bytes, returns, RowFunction};

pub const HASHES: &[RowFunction] = &[RowFunction {
    names: &["hash"],
    arity: 1..=64,
    returns: returns!(DataType::UInt64),
    eval: |values| {
        let mut hashes = values.iter().map(hash);
        let first = hashes.next().expect("one argument at least")?;
        let folded = hashes.try_fold(first, |all, next| next.map(|next| mixed(all) ^ next))?;
        Ok(ScalarValue::UInt64(Some(folded)))
    },
    strict: false,
}];

/// MurmurHash3's 64-bit multiplier, as DuckDB mixes with it.
const MULTIPLIER: u64 = 0xd6e8_feb8_6659_fd93;

/// What DuckDB's hash of NULL is.
const NULL_HASH: u64 = 13_787_848_793_156_543_929;

fn hash(value: &ScalarValue) -> Result<u64> {
    use ScalarValue::*;
    if value.is_null() {
        return Ok(NULL_HASH);
    }
    let narrow = |n: i64| murmur(n as i32 as u32 as u64);
    Ok(match value {
        Boolean(Some(b)) => murmur(*b as u64),
        Int8(Some(n)) => narrow(*n as i64),
        Int16(Some(n)) => narrow(*n as i64),
        Int32(Some(n)) | Date32(Some(n)) => narrow(*n as i64),
        UInt8(Some(n)) => murmur(*n as u64),
        UInt16(Some(n)) => murmur(*n as u64),
        UInt32(Some(n)) => murmur(*n as u64),
        UInt64(Some(n)) => murmur(*n),
        Int64(Some(n))
        | Date64(Some(n))
        | TimestampSecond(Some(n), _)
        | TimestampMillisecond(Some(n), _)
        | TimestampMicrosecond(Some(n), _)
        | TimestampNanosecond(Some(n), _)
        | Time64Microsecond(Some(n))
        | Time64Nanosecond(Some(n)) => murmur(*n as u64),
        Float32(Some(x)) => murmur(if *x == 0.0 { 0 } else { x.to_bits() as u64 }),
        Float64(Some(x)) => murmur(if *x == 0.0 { 0 } else { x.to_bits() }),
        // DuckDB keeps a DECIMAL in 16, 32, 64 or 128 bits by its precision.
        Decimal128(Some(n), precision, _) if *precision <= 9 => narrow(*n as i64),
        Decimal128(Some(n), precision, _) if *precision <= 18 => murmur(*n as i64 as u64),
        Decimal128(Some(n), ..) => murmur(*n as u64) ^ murmur((*n >> 64) as u64),
        Utf8(_) | LargeUtf8(_) | Utf8View(_) | Binary(_) | LargeBinary(_) | BinaryView(_) => {
            of_bytes(bytes(value)?)
        }
        other => return exec_err!("hash of a {} is not supported", other.data_type()),
    })
}

/// MurmurHash3's 64-bit finaliser.
fn murmur(mut x: u64) -> u64 {
    x ^= x >> 32;
    x = x.wrapping_mul(MULTIPLIER);
    x ^= x >> 32;
    x = x.wrapping_mul(MULTIPLIER);
    x ^ (x >> 32)
}

/// How DuckDB mixes the hash so far before the next argument's is XORed in.
fn mixed(hash: u64) -> u64 {
    (hash ^ (hash >> 32)).wrapping_mul(MULTIPLIER)
}

/// Text and BLOBs: from a seed of their length, eight little-endian bytes at a time.
fn of_bytes(data: &[u8]) -> u64 {
    let mut hash = 0xe17a_1465_u64 ^ (data.len() as u64).wrapping_mul(0xc6a4_a793_5bd1_e995);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        hash ^= u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        hash = hash.wrapping_mul(MULTIPLIER);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        hash ^= u64::from_le_bytes(last);
        hash = hash.wrapping_mul(MULTIPLIER);
    }
    murmur(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[ScalarValue]) -> u64 {
        match (HASHES[0].eval)(values).unwrap() {
            ScalarValue::UInt64(Some(h)) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn values_hash_as_duckdb_hashes_them() {
        // Each value DuckDB 2.0.1 gives for the same SQL value.
        let text = |s: &str| ScalarValue::Utf8(Some(s.into()));
        assert_eq!(of(&[text("🦆")]), 4_164_431_626_903_154_684);
        assert_eq!(of(&[text("hello world!!")]), 11_070_444_456_169_785_602);
        assert_eq!(of(&[text("")]), 5_104_928_228_550_385_088);
        assert_eq!(
            of(&[ScalarValue::Int64(Some(42))]),
            7_199_933_130_570_745_587
        );
        assert_eq!(
            of(&[ScalarValue::Int64(Some(-1))]),
            4_939_931_809_569_846_361
        );
        assert_eq!(
            of(&[ScalarValue::Int32(Some(-1))]),
            4_739_667_815_145_166_545
        );
        assert_eq!(
            of(&[ScalarValue::Int8(Some(-1))]),
            4_739_667_815_145_166_545
        );
        assert_eq!(
            of(&[ScalarValue::Float64(Some(1.5))]),
            1_706_605_666_616_485_939
        );
        assert_eq!(of(&[ScalarValue::Float64(Some(-0.0))]), 0);
        assert_eq!(
            of(&[ScalarValue::Float32(Some(1.5))]),
            877_323_241_837_685_928
        );
        assert_eq!(
            of(&[ScalarValue::Date32(Some(18262))]),
            3_044_828_828_311_488_314
        );
        assert_eq!(
            of(&[ScalarValue::Boolean(Some(true))]),
            4_717_996_019_076_358_352
        );
        assert_eq!(
            of(&[ScalarValue::Decimal128(Some(15), 2, 1)]),
            920_453_014_978_087_379
        );
        assert_eq!(
            of(&[ScalarValue::Decimal128(Some(12_345_678_901_234), 18, 2)]),
            18_162_560_320_397_688_022
        );
        assert_eq!(
            of(&[ScalarValue::Decimal128(Some(-15), 38, 0)]),
            7_698_537_659_110_493_881
        );
        assert_eq!(of(&[ScalarValue::Null]), NULL_HASH);
        assert_eq!(
            of(&[ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(2))]),
            6_530_802_887_144_669_425
        );
        assert_eq!(of(&[text("a"), text("b")]), 9_526_344_952_663_840_354);
    }
}
