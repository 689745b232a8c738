//! DuckDB's text functions that DataFusion lacks: distances between strings, graphemes (what a
//! reader sees as one character: an emoji with its skin tone is one), URL escapes, regular
//! expression escapes and every match of one, file paths, and printf and fmt formatting.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use unicode_segmentation::UnicodeSegmentation;

use super::row_functions::{float, int, list_of, returns, text, utf8, value_text, RowFunction};

const STRING: DataType = DataType::Utf8;

pub const TEXT: &[RowFunction] = &[
    RowFunction {
        names: &["damerau_levenshtein"],
        arity: 2..=2,
        returns: returns!(DataType::Int64),
        eval: |a| {
            let distance = strsim::damerau_levenshtein(text(&a[0])?, text(&a[1])?);
            Ok(ScalarValue::Int64(Some(distance as i64)))
        },
        strict: true,
    },
    RowFunction {
        names: &["hamming", "mismatches"],
        arity: 2..=2,
        returns: returns!(DataType::Int64),
        eval: |a| match strsim::hamming(text(&a[0])?, text(&a[1])?) {
            Ok(distance) => Ok(ScalarValue::Int64(Some(distance as i64))),
            Err(_) => exec_err!("hamming: the strings must be of equal length"),
        },
        strict: true,
    },
    RowFunction {
        names: &["jaccard"],
        arity: 2..=2,
        returns: returns!(DataType::Float64),
        eval: |a| {
            Ok(ScalarValue::Float64(Some(jaccard(
                text(&a[0])?,
                text(&a[1])?,
            ))))
        },
        strict: true,
    },
    RowFunction {
        names: &["jaro_similarity"],
        arity: 2..=3,
        returns: returns!(DataType::Float64),
        eval: |a| similarity(a, strsim::jaro),
        strict: true,
    },
    RowFunction {
        names: &["jaro_winkler_similarity"],
        arity: 2..=3,
        returns: returns!(DataType::Float64),
        eval: |a| similarity(a, strsim::jaro_winkler),
        strict: true,
    },
    RowFunction {
        names: &["length_grapheme"],
        arity: 1..=1,
        returns: returns!(DataType::Int64),
        eval: |a| Ok(ScalarValue::Int64(Some(graphemes(&a[0])?.len() as i64))),
        strict: true,
    },
    RowFunction {
        names: &["left_grapheme"],
        arity: 2..=2,
        returns: returns!(STRING),
        eval: |a| {
            let (all, n) = (graphemes(&a[0])?, int(&a[1])?);
            let count = if n >= 0 { n } else { all.len() as i64 + n };
            Ok(utf8(all[..clamp(count, all.len())].concat()))
        },
        strict: true,
    },
    RowFunction {
        names: &["right_grapheme"],
        arity: 2..=2,
        returns: returns!(STRING),
        eval: |a| {
            let (all, n) = (graphemes(&a[0])?, int(&a[1])?);
            let count = if n >= 0 { n } else { all.len() as i64 + n };
            Ok(utf8(all[all.len() - clamp(count, all.len())..].concat()))
        },
        strict: true,
    },
    RowFunction {
        names: &["substring_grapheme"],
        arity: 2..=3,
        returns: returns!(STRING),
        eval: |a| {
            let all = graphemes(&a[0])?;
            let length = a.get(2).map(int).transpose()?;
            let (from, to) = substring_bounds(all.len(), int(&a[1])?, length);
            Ok(utf8(all[from..to].concat()))
        },
        strict: true,
    },
    RowFunction {
        names: &["url_encode"],
        arity: 1..=1,
        returns: returns!(STRING),
        eval: |a| {
            Ok(utf8(
                utf8_percent_encode(text(&a[0])?, URL_RESERVED).to_string(),
            ))
        },
        strict: true,
    },
    RowFunction {
        names: &["url_decode"],
        arity: 1..=1,
        returns: returns!(STRING),
        eval: |a| match percent_decode_str(text(&a[0])?).decode_utf8() {
            Ok(decoded) => Ok(utf8(decoded)),
            Err(_) => exec_err!("url_decode: the escapes do not decode to UTF-8"),
        },
        strict: true,
    },
    RowFunction {
        names: &["regexp_escape"],
        arity: 1..=1,
        returns: returns!(STRING),
        eval: |a| Ok(utf8(quote_meta(text(&a[0])?))),
        strict: true,
    },
    RowFunction {
        names: &["regexp_extract_all"],
        arity: 2..=3,
        returns: returns!(list_of(STRING)),
        eval: |a| {
            let (subject, group) = (text(&a[0])?, a.get(2).map(int).transpose()?.unwrap_or(0));
            let Ok(pattern) = regex::Regex::new(text(&a[1])?) else {
                return exec_err!("regexp_extract_all: not a regular expression");
            };
            let found: Vec<ScalarValue> = (pattern.captures_iter(subject))
                .map(|c| utf8(c.get(group as usize).map_or("", |m| m.as_str())))
                .collect();
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &found, &STRING,
            )))
        },
        strict: true,
    },
    RowFunction {
        names: &["parse_dirname"],
        arity: 1..=2,
        returns: returns!(STRING),
        eval: |a| {
            let (path, separators) = (text(&a[0])?, separators(a.get(1))?);
            Ok(utf8(match path.find(separators) {
                Some(0) => &path[..1],
                Some(end) => &path[..end],
                None => "",
            }))
        },
        strict: true,
    },
    RowFunction {
        names: &["parse_dirpath"],
        arity: 1..=2,
        returns: returns!(STRING),
        eval: |a| {
            let (path, separators) = (text(&a[0])?, separators(a.get(1))?);
            Ok(utf8(match path.rfind(separators) {
                Some(0) => &path[..1],
                Some(end) => &path[..end],
                None => "",
            }))
        },
        strict: true,
    },
    RowFunction {
        names: &["parse_filename"],
        arity: 1..=3,
        returns: returns!(STRING),
        eval: parse_filename,
        strict: true,
    },
    RowFunction {
        names: &["parse_path"],
        arity: 1..=2,
        returns: returns!(list_of(STRING)),
        eval: |a| {
            let (path, separators) = (text(&a[0])?, separators(a.get(1))?);
            let root = path.starts_with(separators).then_some("/");
            let parts = path.split(separators).filter(|p| !p.is_empty());
            let parts: Vec<ScalarValue> = root.into_iter().chain(parts).map(utf8).collect();
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &parts, &STRING,
            )))
        },
        strict: true,
    },
    RowFunction {
        names: &["path_join"],
        arity: 1..=usize::MAX,
        returns: returns!(STRING),
        eval: |a| {
            let parts = a.iter().map(text).collect::<Result<Vec<_>>>()?;
            Ok(utf8(parts.join("/")))
        },
        strict: true,
    },
    RowFunction {
        names: &["printf"],
        arity: 1..=usize::MAX,
        returns: returns!(STRING),
        eval: |a| printf(text(&a[0])?, &a[1..]).map(utf8),
        strict: true,
    },
    RowFunction {
        names: &["format"],
        arity: 1..=usize::MAX,
        returns: returns!(STRING),
        eval: |a| format(text(&a[0])?, &a[1..]).map(utf8),
        strict: true,
    },
];

/// What `url_encode` escapes: all but letters, digits and `-_.~` (RFC 3986's unreserved).
const URL_RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn jaccard(a: &str, b: &str) -> f64 {
    use std::collections::BTreeSet;
    let (a, b): (BTreeSet<char>, BTreeSet<char>) = (a.chars().collect(), b.chars().collect());
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// A similarity, 0 under the optional cutoff (the third argument), as DuckDB's.
fn similarity(a: &[ScalarValue], measure: fn(&str, &str) -> f64) -> Result<ScalarValue> {
    let score = measure(text(&a[0])?, text(&a[1])?);
    let cutoff = a.get(2).map(float).transpose()?.unwrap_or(0.0);
    Ok(ScalarValue::Float64(Some(if score >= cutoff {
        score
    } else {
        0.0
    })))
}

fn graphemes(value: &ScalarValue) -> Result<Vec<&str>> {
    Ok(text(value)?.graphemes(true).collect())
}

fn clamp(count: i64, length: usize) -> usize {
    count.clamp(0, length as i64) as usize
}

/// The part `substring(…, start, length)` takes of `length` items: 1-based, a negative start
/// counts from the end, no length means to the end.
fn substring_bounds(items: usize, start: i64, length: Option<i64>) -> (usize, usize) {
    let items = items as i64;
    let from = match start {
        s if s > 0 => s - 1,
        s if s < 0 => items + s,
        _ => 0,
    };
    let to = match length {
        Some(length) => from + length - i64::from(start == 0),
        None => items,
    };
    let (from, to) = (from.clamp(0, items), to.clamp(0, items));
    (from as usize, to.max(from) as usize)
}

/// RE2's QuoteMeta, as DuckDB escapes: every ASCII character but letters, digits and `_`.
fn quote_meta(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if c == '\0' {
            out.push_str("\\x00");
            continue;
        }
        if c.is_ascii() && !c.is_ascii_alphanumeric() && c != '_' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The separators a path function's argument names: 'system' and 'forward_slash' are `/`,
/// 'backslash' `\`, 'both_slash' (the default) either.
fn separators(value: Option<&ScalarValue>) -> Result<&'static [char]> {
    let name = value.map(text).transpose()?.unwrap_or("both_slash");
    Ok(match name.to_ascii_lowercase().as_str() {
        "system" | "forward_slash" => &['/'],
        "backslash" => &['\\'],
        "both_slash" => &['/', '\\'],
        other => {
            return exec_err!(
                "unknown separator '{other}': system, both_slash, forward_slash or backslash"
            )
        }
    })
}

/// `parse_filename(path [, trim_extension] [, separator])`: the last part of a path.
fn parse_filename(a: &[ScalarValue]) -> Result<ScalarValue> {
    let path = text(&a[0])?;
    let (mut trim, mut separator) = (false, None);
    for value in &a[1..] {
        match value {
            ScalarValue::Boolean(Some(flag)) => trim = *flag,
            other => separator = Some(other),
        }
    }
    let separators = separators(separator)?;
    let name = path.rsplit(separators).next().unwrap_or(path);
    let name = match name.rfind('.') {
        Some(dot) if trim => &name[..dot],
        _ => name,
    };
    Ok(utf8(name))
}

/// C's printf, as DuckDB's: `%s`, `%d`/`%i`, `%f`, `%e`, `%g`, `%x`/`%X`, `%c` and `%%`, with
/// `-` and `0` flags, a width and a precision.
fn printf(pattern: &str, arguments: &[ScalarValue]) -> Result<String> {
    let mut out = String::new();
    let mut arguments = arguments.iter();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&next) = chars.peek() {
            chars.next();
            if next.is_ascii_alphabetic() || next == '%' {
                spec.push(next);
                break;
            }
            spec.push(next);
        }
        let Some(kind) = spec.pop() else {
            return exec_err!("printf: the pattern ends inside a %");
        };
        if kind == '%' {
            out.push('%');
            continue;
        }
        let Some(value) = arguments.next() else {
            return exec_err!("printf: more % in the pattern than arguments");
        };
        let left = spec.starts_with('-');
        let zero = spec.trim_start_matches('-').starts_with('0');
        let spec = spec.trim_start_matches(['-', '0']);
        let (width, precision) = match spec.split_once('.') {
            Some((w, p)) => (w, Some(p.parse::<usize>().unwrap_or(0))),
            None => (spec, None),
        };
        let width = width.parse::<usize>().unwrap_or(0);
        let body = match kind {
            's' => {
                let text = value_text(value);
                match precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                }
            }
            'd' | 'i' => int(value)?.to_string(),
            'f' | 'F' => format!("{:.*}", precision.unwrap_or(6), float(value)?),
            'e' => format!("{:.*e}", precision.unwrap_or(6), float(value)?),
            'g' => float(value)?.to_string(),
            'x' => format!("{:x}", int(value)?),
            'X' => format!("{:X}", int(value)?),
            'c' => char::from_u32(int(value)? as u32)
                .map(String::from)
                .unwrap_or_default(),
            other => return exec_err!("printf: unknown conversion %{other}"),
        };
        let pad = width.saturating_sub(body.chars().count());
        if left {
            out.push_str(&body);
            out.extend(std::iter::repeat_n(' ', pad));
        } else if zero && kind != 's' {
            let (sign, digits) = body.split_at(usize::from(body.starts_with('-')));
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', pad));
            out.push_str(digits);
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&body);
        }
    }
    Ok(out)
}

/// The fmt library's format, as DuckDB's: `{}` takes the next argument, `{n}` the n-th
/// (from 0), `{:.2f}` a precision; `{{` and `}}` are braces.
fn format(pattern: &str, arguments: &[ScalarValue]) -> Result<String> {
    let mut out = String::new();
    let mut next = 0;
    let mut rest = pattern;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let brace = &rest[at..];
        if brace.starts_with("{{") || brace.starts_with("}}") {
            out.push_str(&brace[..1]);
            rest = &brace[2..];
            continue;
        }
        let Some(end) = brace.find('}').filter(|_| brace.starts_with('{')) else {
            return exec_err!("format: an unmatched brace in '{pattern}'");
        };
        let (index, spec) = brace[1..end]
            .split_once(':')
            .unwrap_or((&brace[1..end], ""));
        let position = if index.is_empty() {
            next += 1;
            next - 1
        } else {
            index.parse().unwrap_or(usize::MAX)
        };
        let Some(value) = arguments.get(position) else {
            return exec_err!("format: '{pattern}' names more arguments than it was given");
        };
        let precision = spec
            .strip_prefix('.')
            .map(|p| p.trim_end_matches(char::is_alphabetic));
        out.push_str(&match precision.and_then(|p| p.parse::<usize>().ok()) {
            Some(p) => format!("{:.*}", p, float(value)?),
            None => value_text(value),
        });
        rest = &brace[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substrings_count_from_one_and_from_the_end() {
        assert_eq!(substring_bounds(4, 3, Some(2)), (2, 4));
        assert_eq!(substring_bounds(4, 3, None), (2, 4));
        assert_eq!(substring_bounds(4, -1, None), (3, 4));
        assert_eq!(substring_bounds(4, 0, Some(2)), (0, 1));
        assert_eq!(substring_bounds(4, 9, Some(2)), (4, 4));
    }

    #[test]
    fn printf_and_format_write_as_duckdb() {
        let args = [utf8("CSV"), ScalarValue::Int64(Some(42))];
        assert_eq!(
            printf(
                "%s took %05d s, %-4s|%%",
                &[args[0].clone(), args[1].clone(), utf8("ab")]
            )
            .unwrap(),
            "CSV took 00042 s, ab  |%"
        );
        assert_eq!(format("{} took {} s", &args).unwrap(), "CSV took 42 s");
        assert_eq!(format("{1} {0} {{}}", &args).unwrap(), "42 CSV {}");
        assert_eq!(
            format("{:.2f}", &[ScalarValue::Float64(Some(1.0 / 3.0))]).unwrap(),
            "0.33"
        );
    }

    #[test]
    fn escapes_are_re2s() {
        assert_eq!(quote_meta("https://duckdb.org"), r"https\:\/\/duckdb\.org");
        assert_eq!(quote_meta("a_b1é"), "a_b1é");
    }
}
