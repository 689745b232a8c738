//! DuckDB's number and time functions that DataFusion lacks: bits and bases, banker's
//! rounding, the gamma function, the next float, byte counts as people write them, a value's
//! SQL type, the time inside a UUIDv7, a time of day from its parts, and the age between two
//! timestamps in years, months and days.

use std::sync::Arc;

use chrono::{Datelike, Months, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit, TimeUnit};
use datafusion::common::{exec_err, Result, ScalarValue};

use super::row_functions::{float, int, returns, text, utf8, value_text, RowFunction};
use crate::sql_types::sql_type_name;

pub const NUMBERS: &[RowFunction] = &[
    RowFunction {
        names: &["bit_count"],
        arity: 1..=1,
        returns: returns!(DataType::Int8),
        eval: |a| Ok(ScalarValue::Int8(Some(ones(&a[0])? as i8))),
        strict: true,
    },
    RowFunction {
        names: &["to_base"],
        arity: 2..=3,
        returns: returns!(DataType::Utf8),
        eval: |a| {
            let (number, radix) = (int(&a[0])?, int(&a[1])?);
            let width = a.get(2).map(int).transpose()?.unwrap_or(0).max(0) as usize;
            if number < 0 || !(2..=36).contains(&radix) {
                return exec_err!("to_base: a number of at least 0 and a radix from 2 to 36");
            }
            Ok(utf8(format!(
                "{:0>width$}",
                in_base(number as u64, radix as u32)
            )))
        },
        strict: true,
    },
    RowFunction {
        names: &["round_even", "roundbankers"],
        arity: 2..=2,
        returns: returns!(DataType::Float64),
        eval: |a| {
            let scale = 10f64.powi(int(&a[1])? as i32);
            let rounded = (float(&a[0])? * scale).round_ties_even() / scale;
            Ok(ScalarValue::Float64(Some(rounded)))
        },
        strict: true,
    },
    RowFunction {
        names: &["gamma"],
        arity: 1..=1,
        returns: returns!(DataType::Float64),
        eval: |a| Ok(ScalarValue::Float64(Some(libm::tgamma(float(&a[0])?)))),
        strict: true,
    },
    RowFunction {
        names: &["lgamma"],
        arity: 1..=1,
        returns: returns!(DataType::Float64),
        eval: |a| Ok(ScalarValue::Float64(Some(libm::lgamma(float(&a[0])?)))),
        strict: true,
    },
    RowFunction {
        names: &["nextafter"],
        arity: 2..=2,
        // FLOATs step by a FLOAT's unit, anything else by a DOUBLE's.
        returns: |types, _| {
            Ok(if types.iter().all(|t| t == &DataType::Float32) {
                DataType::Float32
            } else {
                DataType::Float64
            })
        },
        eval: |a| match (&a[0], &a[1]) {
            (ScalarValue::Float32(Some(x)), ScalarValue::Float32(Some(y))) => {
                Ok(ScalarValue::Float32(Some(libm::nextafterf(*x, *y))))
            }
            (x, y) => Ok(ScalarValue::Float64(Some(libm::nextafter(
                float(x)?,
                float(y)?,
            )))),
        },
        strict: true,
    },
    RowFunction {
        names: &["parse_formatted_bytes"],
        arity: 1..=1,
        returns: returns!(DataType::UInt64),
        eval: |a| Ok(ScalarValue::UInt64(Some(formatted_bytes(text(&a[0])?)?))),
        strict: true,
    },
    RowFunction {
        names: &["format_bytes", "formatreadablesize"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| Ok(utf8(readable_size(int(&a[0])?, 1024.0, BINARY_UNITS))),
        strict: true,
    },
    RowFunction {
        names: &["formatreadabledecimalsize"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| Ok(utf8(readable_size(int(&a[0])?, 1000.0, DECIMAL_UNITS))),
        strict: true,
    },
    RowFunction {
        names: &["typeof"],
        arity: 1..=1,
        returns: returns!(DataType::Utf8),
        eval: |a| Ok(utf8(sql_type_name(&a[0].data_type()))),
        strict: false,
    },
    RowFunction {
        names: &["uuid_extract_timestamp"],
        arity: 1..=1,
        returns: returns!(DataType::Timestamp(
            TimeUnit::Microsecond,
            Some(Arc::from("UTC"))
        )),
        eval: |a| {
            let uuid = value_text(&a[0]);
            let hex: String = uuid.chars().filter(|c| *c != '-').collect();
            if hex.len() != 32 || hex.as_bytes()[12] != b'7' {
                return exec_err!("uuid_extract_timestamp: {uuid} is not a UUID of version 7");
            }
            let Ok(millis) = i64::from_str_radix(&hex[..12], 16) else {
                return exec_err!("uuid_extract_timestamp: {uuid} is not a UUID");
            };
            let utc = Some(Arc::from("UTC"));
            Ok(ScalarValue::TimestampMicrosecond(Some(millis * 1000), utc))
        },
        strict: true,
    },
    RowFunction {
        names: &["make_time"],
        arity: 3..=3,
        returns: returns!(DataType::Time64(TimeUnit::Microsecond)),
        eval: |a| {
            let (hours, minutes, seconds) = (int(&a[0])?, int(&a[1])?, float(&a[2])?);
            let micros = (hours * 3600 + minutes * 60) * 1_000_000 + (seconds * 1e6).round() as i64;
            if !(0..=86_400_000_000).contains(&micros) {
                return exec_err!("make_time: {hours}:{minutes}:{seconds} is not a time of day");
            }
            Ok(ScalarValue::Time64Microsecond(Some(micros)))
        },
        strict: true,
    },
    RowFunction {
        names: &["age"],
        arity: 1..=2,
        returns: returns!(DataType::Interval(IntervalUnit::MonthDayNano)),
        eval: |a| {
            let later = match a.get(1) {
                Some(_) => moment(&a[0])?,
                // One argument: the age at today's midnight (UTC, the session's zone).
                None => chrono::Utc::now().date_naive().and_time(NaiveTime::MIN),
            };
            let earlier = moment(a.last().expect("one argument at least"))?;
            let (months, days, micros) = age(later, earlier);
            Ok(ScalarValue::IntervalMonthDayNano(Some(
                IntervalMonthDayNano::new(months, days, micros * 1_000),
            )))
        },
        strict: true,
    },
];

/// A DATE or TIMESTAMP as a moment without a zone.
fn moment(value: &ScalarValue) -> Result<NaiveDateTime> {
    let micros = match value.cast_to(&DataType::Timestamp(TimeUnit::Microsecond, None))? {
        ScalarValue::TimestampMicrosecond(Some(micros), _) => micros,
        other => return exec_err!("age: expected a timestamp, got {other}"),
    };
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(moment) => Ok(moment.naive_utc()),
        None => exec_err!("age: {micros} microseconds is out of range"),
    }
}

/// The interval from `earlier` to `later` as DuckDB (and PostgreSQL) counts it: field by
/// field, each field short of zero borrowing from the next larger (a day borrows the length
/// of a month: the later moment's month before it when the result is negative, the earlier
/// moment's else), as (months, days, microseconds).
fn age(later: NaiveDateTime, earlier: NaiveDateTime) -> (i32, i32, i64) {
    let negative = later < earlier;
    let sign = if negative { -1 } else { 1 };
    let field = |l: i64, e: i64| sign * (l - e);
    let mut years = field(later.year() as i64, earlier.year() as i64);
    let mut months = field(later.month() as i64, earlier.month() as i64);
    let mut days = field(later.day() as i64, earlier.day() as i64);
    let time = |t: &NaiveDateTime| {
        (t.num_seconds_from_midnight() as i64) * 1_000_000 + (t.nanosecond() / 1_000) as i64
    };
    let mut micros = field(time(&later), time(&earlier));
    if micros < 0 {
        micros += 86_400_000_000;
        days -= 1;
    }
    let borrowed = if negative { later } else { earlier };
    while days < 0 {
        days += days_in_month(borrowed.year(), borrowed.month());
        months -= 1;
    }
    while months < 0 {
        months += 12;
        years -= 1;
    }
    (
        (sign * (years * 12 + months)) as i32,
        (sign * days) as i32,
        sign * micros,
    )
}

fn days_in_month(year: i32, month: u32) -> i64 {
    let first = NaiveDate::from_ymd_opt(year, month, 1).expect("a month of a real date");
    let next = first
        .checked_add_months(Months::new(1))
        .expect("a month after it");
    (next - first).num_days()
}

/// The bits set in an integer of its own width (a negative INTEGER has 32 bits to count).
fn ones(value: &ScalarValue) -> Result<u32> {
    Ok(match value {
        ScalarValue::Int8(Some(n)) => n.count_ones(),
        ScalarValue::Int16(Some(n)) => n.count_ones(),
        ScalarValue::Int32(Some(n)) => n.count_ones(),
        ScalarValue::UInt8(Some(n)) => n.count_ones(),
        ScalarValue::UInt16(Some(n)) => n.count_ones(),
        ScalarValue::UInt32(Some(n)) => n.count_ones(),
        ScalarValue::UInt64(Some(n)) => n.count_ones(),
        other => int(other)?.count_ones(),
    })
}

const BINARY_UNITS: &[&str] = &["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
const DECIMAL_UNITS: &[&str] = &["kB", "MB", "GB", "TB", "PB", "EB"];

/// A byte count as DuckDB writes it: `1 byte`, `1000 bytes`, `15.6 KiB`, `16.0 kB`.
fn readable_size(bytes: i64, step: f64, units: &[&str]) -> String {
    if (bytes.abs() as f64) < step {
        return format!("{bytes} byte{}", if bytes.abs() == 1 { "" } else { "s" });
    }
    let mut value = bytes as f64 / step;
    let mut unit = 0;
    while value.abs() >= step && unit + 1 < units.len() {
        value /= step;
        unit += 1;
    }
    format!("{value:.1} {}", units[unit])
}

fn in_base(mut number: u64, radix: u32) -> String {
    let mut digits = vec![];
    loop {
        let digit = (number % radix as u64) as u32;
        digits.push(
            char::from_digit(digit, radix)
                .unwrap_or('?')
                .to_ascii_uppercase(),
        );
        number /= radix as u64;
        if number == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}

/// `16 KiB`, `1.5GB`, `300 bytes` as a byte count: decimal units (KB) are powers of 1000,
/// binary ones (KiB) of 1024.
fn formatted_bytes(written: &str) -> Result<u64> {
    let written = written.trim();
    let split = written
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(written.len());
    let (number, unit) = (&written[..split], written[split..].trim());
    let Ok(number) = number.parse::<f64>() else {
        return exec_err!("parse_formatted_bytes: '{written}' does not start with a number");
    };
    let multiple: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" | "byte" | "bytes" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        "pib" => 1024f64.powi(5),
        _ => return exec_err!("parse_formatted_bytes: unknown unit '{unit}' in '{written}'"),
    };
    Ok((number * multiple).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_bases_and_bits() {
        assert_eq!(formatted_bytes("16 KiB").unwrap(), 16384);
        assert_eq!(formatted_bytes("1.5GB").unwrap(), 1_500_000_000);
        assert!(formatted_bytes("16 parsecs").is_err());
        assert_eq!(in_base(42, 16), "2A");
        assert_eq!(readable_size(16000, 1024.0, BINARY_UNITS), "15.6 KiB");
        assert_eq!(readable_size(1, 1000.0, DECIMAL_UNITS), "1 byte");
        assert_eq!(readable_size(1_500_000, 1000.0, DECIMAL_UNITS), "1.5 MB");
        assert_eq!(in_base(0, 2), "0");
        assert_eq!(ones(&ScalarValue::Int32(Some(-1))).unwrap(), 32);
    }
}
