//! Glob patterns over object paths: `*` and `?` within one path segment, `**` across
//! segments, `{a,b}` alternatives and `{1..9}` numeric ranges. A pattern knows its longest
//! literal prefix, which is where listing starts (a directory locally, a key prefix in S3).

use globset::{GlobBuilder, GlobMatcher};

use crate::error::{QuiverError, Result};

const META: &[char] = &['*', '?', '[', '{'];

/// 10,000: a `{1..N}` range wider than this is surely a typo, and would build a huge regex.
const MAX_RANGE_ITEMS: i64 = 10_000;

#[derive(Debug, Clone)]
pub struct GlobPattern {
    pattern: String,
    matcher: Option<GlobMatcher>,
}

impl GlobPattern {
    pub fn new(pattern: &str) -> Result<Self> {
        if !pattern.contains(META) {
            return Ok(Self {
                pattern: pattern.to_string(),
                matcher: None,
            });
        }
        let expanded = expand_ranges(pattern)?;
        let glob = GlobBuilder::new(&expanded)
            .literal_separator(true)
            .build()
            .map_err(|e| QuiverError::invalid(format!("bad glob '{pattern}': {e}")))?;
        Ok(Self {
            pattern: pattern.to_string(),
            matcher: Some(glob.compile_matcher()),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// A pattern without wildcards names one object (or a directory).
    pub fn is_literal(&self) -> bool {
        self.matcher.is_none()
    }

    /// Everything before the first segment holding a wildcard, ending in `/` (or empty).
    pub fn prefix(&self) -> &str {
        match self.pattern.find(META) {
            None => &self.pattern,
            Some(first) => match self.pattern[..first].rfind('/') {
                Some(slash) => &self.pattern[..=slash],
                None => "",
            },
        }
    }

    pub fn matches(&self, path: &str) -> bool {
        match &self.matcher {
            None => path == self.pattern,
            Some(matcher) => matcher.is_match(path),
        }
    }
}

/// Rewrites every `{a..b}` (integers) into `{a,a+1,…,b}`, which globset understands.
fn expand_ranges(pattern: &str) -> Result<String> {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return Ok(out);
        };
        let body = &after[..close];
        match parse_range(body) {
            Some((from, to)) => {
                let (low, high) = (from.min(to), from.max(to));
                if high.abs_diff(low) >= MAX_RANGE_ITEMS as u64 {
                    return Err(QuiverError::invalid(format!(
                        "glob range {{{body}}} in '{pattern}' is too wide (at most {MAX_RANGE_ITEMS} values)"
                    )));
                }
                let items: Vec<String> = (low..=high).map(|n| n.to_string()).collect();
                out.push('{');
                out.push_str(&items.join(","));
                out.push('}');
            }
            None => {
                out.push('{');
                out.push_str(body);
                out.push('}');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_range(body: &str) -> Option<(i64, i64)> {
    let (from, to) = body.split_once("..")?;
    Some((from.trim().parse().ok()?, to.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_stops_before_the_first_wildcard_segment() {
        assert_eq!(
            GlobPattern::new("data/x/*.parquet").unwrap().prefix(),
            "data/x/"
        );
        assert_eq!(
            GlobPattern::new("data/**/a.parquet").unwrap().prefix(),
            "data/"
        );
        assert_eq!(GlobPattern::new("*.parquet").unwrap().prefix(), "");
        assert_eq!(
            GlobPattern::new("s3://b/k/p{1,2}/f").unwrap().prefix(),
            "s3://b/k/"
        );
        assert!(GlobPattern::new("data/a.parquet").unwrap().is_literal());
    }

    #[test]
    fn wildcards_match_like_a_shell() {
        let star = GlobPattern::new("d/*.parquet").unwrap();
        assert!(star.matches("d/a.parquet"));
        assert!(
            !star.matches("d/sub/a.parquet"),
            "* stays inside one segment"
        );
        let deep = GlobPattern::new("d/**/*.parquet").unwrap();
        assert!(deep.matches("d/sub/x/a.parquet"));
        assert!(deep.matches("d/a.parquet"));
        let one = GlobPattern::new("d/part-?.parquet").unwrap();
        assert!(one.matches("d/part-1.parquet") && !one.matches("d/part-10.parquet"));
        let alt = GlobPattern::new("d/{a,b}.parquet").unwrap();
        assert!(alt.matches("d/b.parquet") && !alt.matches("d/c.parquet"));
    }

    #[test]
    fn numeric_ranges_expand() {
        let range = GlobPattern::new("d/part-{1..3}.parquet").unwrap();
        assert!(range.matches("d/part-2.parquet"));
        assert!(!range.matches("d/part-4.parquet"));
        assert_eq!(expand_ranges("a{3..1}b").unwrap(), "a{1,2,3}b");
        assert!(GlobPattern::new("d/{1..99999999}").is_err());
        // the width once overflowed i64 (seen while writing the hostile-input tests)
        let widest = format!("d/{{{}..{}}}", i64::MIN, i64::MAX);
        assert!(GlobPattern::new(&widest).is_err());
    }
}
