//! Hive partition folders (`key=value/`), both ways: COPY writes them and listings read
//! them back, so a value goes through the same escaping in each direction. NULL is Hive's
//! default partition; `/`, `=`, `%` and other characters a path cannot hold are
//! percent-escaped, as Hive, Spark and DuckDB do.

use std::collections::BTreeMap;

/// The folder value that stands for NULL.
pub const DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// A value as a folder name.
pub fn encode(value: Option<&str>) -> String {
    let Some(value) = value else {
        return DEFAULT_PARTITION.into();
    };
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_control() || "\"#%'*/:=?\\{}[]^".contains(c) {
            for byte in c.to_string().bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A folder name as the value it encodes; `None` for the default partition. A `%` not
/// followed by two hex digits, or escapes that are not UTF-8, stay as written.
pub fn decode(text: &str) -> Option<String> {
    if text == DEFAULT_PARTITION {
        return None;
    }
    if !text.contains('%') {
        return Some(text.to_string());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    Some(String::from_utf8(out).unwrap_or_else(|_| text.to_string()))
}

/// The `key=value` folders of a path, outermost first, values decoded; a key repeated
/// deeper down counts once.
pub fn segments(path: &str) -> Vec<(String, Option<String>)> {
    let mut folders: Vec<&str> = path.split('/').collect();
    folders.pop(); // the file name
    let mut seen = BTreeMap::new();
    folders
        .into_iter()
        .filter_map(|s| s.split_once('='))
        .filter(|(k, _)| !k.is_empty() && seen.insert(k.to_string(), ()).is_none())
        .map(|(k, v)| (k.to_string(), decode(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_escape_what_paths_cannot_hold() {
        assert_eq!(encode(Some("a/b=c")), "a%2Fb%3Dc");
        assert_eq!(encode(Some("1995-03-15")), "1995-03-15");
        assert_eq!(encode(None), DEFAULT_PARTITION);
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_value() {
        for value in [
            Some("a/b=c"),
            Some("100%"),
            Some("é:ü?"),
            Some("plain"),
            None,
        ] {
            assert_eq!(decode(&encode(value)).as_deref(), value);
        }
        assert_eq!(decode("50%"), Some("50%".into()));
        assert_eq!(decode("%zz"), Some("%zz".into()));
    }

    #[test]
    fn segments_come_from_folders_only() {
        assert_eq!(
            segments("d/year=2024/city=a%2Fb/part=x.parquet"),
            vec![
                ("year".into(), Some("2024".into())),
                ("city".into(), Some("a/b".into()))
            ]
        );
        assert_eq!(
            segments("d/k=__HIVE_DEFAULT_PARTITION__/f.parquet"),
            vec![("k".into(), None)]
        );
    }
}
