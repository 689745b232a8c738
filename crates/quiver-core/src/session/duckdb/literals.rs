//! DuckDB's timestamp literals, where DataFusion reads them otherwise: `TIMESTAMP '2006-01-01
//! 12:00'` (no seconds) is a timestamp, not an error, and a UTC offset on a TIMESTAMP without
//! time zone is dropped, the wall clock kept (`TIMESTAMP '1992-04-20 15:26:00-07'` is 15:26,
//! which DataFusion converts to 22:26 UTC). Written literals only (`TIMESTAMP '…'`,
//! `CAST('…' AS TIMESTAMP)`); strings of a column cast at run time are left to DataFusion.
//! And BLOBs: `'\xAA\xBB'::BLOB` is the two bytes its escapes write (DataFusion has no BLOB;
//! its BYTEA would take the eight characters), and a cast to BLOB is one to BYTEA.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    DataType, Expr, TimezoneInfo, TypedString, Value, ValueWithSpan, VisitMut, VisitorMut,
};

/// Rewrites every timestamp literal of `statement` as DuckDB reads it (see the module's
/// comment).
pub fn duckdb_timestamp_literals<V: VisitMut>(statement: &mut V) {
    struct Literals;
    impl VisitorMut for Literals {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Some(text) = written_literal(expr, without_zone) {
                *text = wall_clock(text);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Literals);
}

/// Rewrites every BLOB of `statement` as DuckDB reads it (see the module's comment): a
/// literal becomes a hex literal of its bytes, any other cast to BLOB one to BYTEA. A
/// literal that is not a BLOB's text (a character outside ASCII) is left to fail as before.
pub fn duckdb_blob_literals<V: VisitMut>(statement: &mut V) {
    struct Blobs;
    impl VisitorMut for Blobs {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let is_blob = |t: &DataType| matches!(t, DataType::Blob(_));
            match written_literal(expr, is_blob).map(|text| blob_bytes(text)) {
                Some(Some(bytes)) => {
                    let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
                    *expr = Expr::value(Value::HexStringLiteral(hex));
                }
                Some(None) => {}
                None => {
                    if let Expr::Cast { data_type, .. } = expr {
                        if is_blob(data_type) {
                            *data_type = DataType::Bytea;
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Blobs);
}

/// The text of a literal written as `TYPE '…'` or `CAST('…' AS TYPE)`, for a type `of_type`
/// takes.
fn written_literal(expr: &mut Expr, of_type: impl Fn(&DataType) -> bool) -> Option<&mut String> {
    match expr {
        Expr::TypedString(TypedString {
            data_type,
            value:
                ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                },
            ..
        }) if of_type(data_type) => Some(text),
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } if of_type(data_type) => match inner.as_mut() {
            Expr::Value(ValueWithSpan {
                value: Value::SingleQuotedString(text),
                ..
            }) => Some(text),
            _ => None,
        },
        _ => None,
    }
}

/// The bytes a BLOB literal writes: ASCII as itself, `\xHH` as the byte HH.
fn blob_bytes(text: &str) -> Option<Vec<u8>> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if !first.is_ascii() {
            return None;
        }
        if first == b'\\' && tail.len() >= 3 && tail[0] == b'x' {
            let hex = std::str::from_utf8(&tail[1..3]).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[3..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    Some(bytes)
}

fn without_zone(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone)
    )
}

/// `text` without a UTC offset after its time, and with `:00` seconds where it has only
/// hours and minutes; anything that is not a date and a time stays as written.
fn wall_clock(text: &str) -> String {
    let trimmed = text.trim();
    let Some(split) = trimmed.find([' ', 'T']).filter(|&i| i >= 8) else {
        return text.to_string();
    };
    let (date, time) = (&trimmed[..split], &trimmed[split + 1..]);
    // The offset starts at the first sign or Z after the time's digits.
    let end = time
        .find(['+', '-', 'Z', 'z'])
        .filter(|&i| i >= 4)
        .unwrap_or(time.len());
    let offset = &time[end..];
    let offset_ok = offset
        .trim_start_matches(['+', '-', 'Z', 'z'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == ':');
    if !offset_ok {
        return text.to_string();
    }
    let clock = time[..end].trim_end();
    let seconds = if clock.matches(':').count() == 1 {
        ":00"
    } else {
        ""
    };
    format!("{date}{}{clock}{seconds}", &trimmed[split..split + 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn offsets_are_dropped_and_seconds_added() {
        for (written, read) in [
            ("1992-04-20 15:26:00-07", "1992-04-20 15:26:00"),
            ("1992-04-20 15:26:00.5+05:30", "1992-04-20 15:26:00.5"),
            ("1992-04-20T15:26:00Z", "1992-04-20T15:26:00"),
            ("2006-01-01 12:00", "2006-01-01 12:00:00"),
            ("2006-01-01", "2006-01-01"),
            ("2006-01-01 12:00:00", "2006-01-01 12:00:00"),
            (
                "2006-01-01 12:00:00 America/New_York",
                "2006-01-01 12:00:00 America/New_York",
            ),
        ] {
            assert_eq!(wall_clock(written), read, "{written}");
        }
    }

    #[test]
    fn blob_literals_are_their_bytes() {
        assert_eq!(blob_bytes(r"\xAA\xbbA").unwrap(), [0xaa, 0xbb, b'A']);
        assert_eq!(blob_bytes("ü"), None);
        for (sql, expected) in [
            (r"SELECT '\xAA\xBB'::BLOB", "SELECT X'AABB'"),
            ("SELECT BLOB 'A'", "SELECT X'41'"),
            ("SELECT CAST(c AS BLOB)", "SELECT CAST(c AS BYTEA)"),
        ] {
            let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            duckdb_blob_literals(&mut statement);
            assert_eq!(statement.to_string(), expected);
        }
    }

    #[test]
    fn only_timestamps_without_zone_are_rewritten() {
        for (sql, expected) in [
            (
                "SELECT TIMESTAMP '2006-01-01 12:00-07'",
                "SELECT TIMESTAMP '2006-01-01 12:00:00'",
            ),
            (
                "SELECT CAST('2006-01-01 12:00-07' AS TIMESTAMP)",
                "SELECT CAST('2006-01-01 12:00:00' AS TIMESTAMP)",
            ),
            (
                "SELECT TIMESTAMPTZ '2006-01-01 12:00:00-07'",
                "SELECT TIMESTAMPTZ '2006-01-01 12:00:00-07'",
            ),
            (
                "SELECT '2006-01-01 12:00-07'",
                "SELECT '2006-01-01 12:00-07'",
            ),
        ] {
            let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            duckdb_timestamp_literals(&mut statement);
            assert_eq!(statement.to_string(), expected);
        }
    }
}
