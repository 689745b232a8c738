//! The table `function_names` expands: DuckDB's functions that DataFusion lacks, each as a
//! DataFusion expression of its arguments. Data only; the expansion lives there.

/// DuckDB's name, its number of arguments (`None`: any), and its expansion, where `$n` is
/// the n-th argument and `$*` all of them.
pub const MACROS: &[(&str, Option<usize>, &str)] = &[
    // Lambdas (DataFusion's array_transform and array_filter take them).
    ("apply", Some(2), "array_transform($1, $2)"),
    ("list_apply", Some(2), "array_transform($1, $2)"),
    ("array_apply", Some(2), "array_transform($1, $2)"),
    ("filter", Some(2), "array_filter($1, $2)"),
    // Strings.
    ("strlen", Some(1), "octet_length($1)"),
    // `length` of a list counts its elements (see `typed`).
    ("len", Some(1), "length($1)"),
    ("lcase", Some(1), "lower($1)"),
    ("split", Some(2), "string_to_array($1, $2)"),
    // Split at each match: the matches become a unit separator (U+001F), which text
    // seldom holds, and the text is split there.
    (
        "string_split_regex",
        Some(2),
        "string_to_array(regexp_replace($1, $2, chr(31), 'g'), chr(31))",
    ),
    (
        "str_split_regex",
        Some(2),
        "string_to_array(regexp_replace($1, $2, chr(31), 'g'), chr(31))",
    ),
    (
        "regexp_split_to_array",
        Some(2),
        "string_to_array(regexp_replace($1, $2, chr(31), 'g'), chr(31))",
    ),
    ("editdist3", Some(2), "levenshtein($1, $2)"),
    ("unicode", Some(1), "CASE WHEN $1 = '' THEN -1 ELSE ascii($1) END"),
    ("ord", Some(1), "CASE WHEN $1 = '' THEN -1 ELSE ascii($1) END"),
    ("uuid_extract_version", Some(1), "CAST(substr(CAST($1 AS VARCHAR), 15, 1) AS INTEGER)"),
    ("constant_or_null", Some(2), "CASE WHEN $2 IS NULL THEN NULL ELSE $1 END"),
    ("ucase", Some(1), "upper($1)"),
    ("prefix", Some(2), "starts_with($1, $2)"),
    ("suffix", Some(2), "ends_with($1, $2)"),
    ("string_split", Some(2), "string_to_array($1, $2)"),
    ("str_split", Some(2), "string_to_array($1, $2)"),
    ("regexp_matches", Some(2), "regexp_like($1, $2)"),
    ("regexp_matches", Some(3), "regexp_like($1, $2, $3)"),
    ("regexp_full_match", Some(2), "regexp_like($1, '^(?:' || $2 || ')$')"),
    // The whole pattern as group 1 (DataFusion's first), so DuckDB's group n is n + 1; no
    // match is '' in DuckDB.
    (
        "regexp_extract",
        Some(2),
        "CASE WHEN $1 IS NOT NULL THEN coalesce(regexp_match($1, '(' || $2 || ')')[1], '') END",
    ),
    (
        "regexp_extract",
        Some(3),
        "CASE WHEN $1 IS NOT NULL THEN coalesce(regexp_match($1, '(' || $2 || ')')[$3 + 1], '') END",
    ),
    // DuckDB's digests are hex text (its hex, upper case, is a function: `bytes`).
    ("sha256", Some(1), "encode(sha256($1), 'hex')"),
    // A string's UTF-8 as a BLOB and back (DataFusion's two-argument encode and decode, to
    // and from hex or base64, stay theirs).
    ("encode", Some(1), "CAST($1 AS BYTEA)"),
    ("decode", Some(1), "CAST($1 AS VARCHAR)"),
    ("sum_no_overflow", Some(1), "sum($1)"),
    ("make_timestamp_ns", Some(1), "to_timestamp_nanos($1)"),
    ("make_timestamp_ms", Some(1), "to_timestamp_millis($1)"),
    // Lists of unequal lengths padded with NULLs (DuckDB's fourth argument, to truncate
    // instead, is refused by arrays_zip).
    ("array_zip", None, "arrays_zip($*)"),
    // Dates and times: DuckDB's parts are BIGINT.
    ("year", Some(1), "CAST(date_part('year', $1) AS BIGINT)"),
    ("quarter", Some(1), "CAST(date_part('quarter', $1) AS BIGINT)"),
    ("month", Some(1), "CAST(date_part('month', $1) AS BIGINT)"),
    ("week", Some(1), "CAST(date_part('week', $1) AS BIGINT)"),
    ("weekofyear", Some(1), "CAST(date_part('week', $1) AS BIGINT)"),
    ("isoyear", Some(1), "CAST(date_part('isoyear', $1) AS BIGINT)"),
    (
        "yearweek",
        Some(1),
        "CAST(date_part('isoyear', $1) * 100 + date_part('week', $1) AS BIGINT)",
    ),
    ("day", Some(1), "CAST(date_part('day', $1) AS BIGINT)"),
    ("dayofmonth", Some(1), "CAST(date_part('day', $1) AS BIGINT)"),
    ("dayofweek", Some(1), "CAST(date_part('dow', $1) AS BIGINT)"),
    ("dayofyear", Some(1), "CAST(date_part('doy', $1) AS BIGINT)"),
    ("hour", Some(1), "CAST(date_part('hour', $1) AS BIGINT)"),
    ("minute", Some(1), "CAST(date_part('minute', $1) AS BIGINT)"),
    ("second", Some(1), "CAST(date_part('second', $1) AS BIGINT)"),
    ("epoch", Some(1), "CAST(date_part('epoch', $1) AS DOUBLE)"),
    ("epoch_ms", Some(1), "CAST(date_part('epoch', $1) * 1000 AS BIGINT)"),
    // Through the timestamp's integer: a DOUBLE of seconds loses the last microseconds.
    (
        "epoch_us",
        Some(1),
        "CAST(arrow_cast($1, 'Timestamp(Microsecond, None)') AS BIGINT)",
    ),
    (
        "epoch_ns",
        Some(1),
        "CAST(arrow_cast($1, 'Timestamp(Nanosecond, None)') AS BIGINT)",
    ),
    // The second's parts, with the seconds: 11:59:44.123456 is 44123 ms.
    ("millisecond", Some(1), "CAST(floor(date_part('millisecond', $1)) AS BIGINT)"),
    ("microsecond", Some(1), "CAST(floor(date_part('microsecond', $1)) AS BIGINT)"),
    ("weekday", Some(1), "CAST(date_part('dow', $1) AS BIGINT)"),
    ("decade", Some(1), "CAST(floor(date_part('year', $1) / 10) AS BIGINT)"),
    ("century", Some(1), "CAST(floor((date_part('year', $1) - 1) / 100) AS BIGINT) + 1"),
    (
        "millennium",
        Some(1),
        "CAST(floor((date_part('year', $1) - 1) / 1000) AS BIGINT) + 1",
    ),
    ("era", Some(1), "CASE WHEN date_part('year', $1) > 0 THEN 1 ELSE 0 END"),
    // The Julian day number, and the day's fraction since midnight.
    ("julian", Some(1), "date_part('epoch', $1) / 86400 + 2440588"),
    ("strftime", Some(2), "to_char($1, $2)"),
    // The text, then its formats (a list of them is spread by `function_names`).
    ("strptime", None, "to_timestamp($*)"),
    // Intervals of n units, through their text (DataFusion multiplies no interval by a number).
    (
        "to_years",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' years' AS INTERVAL)",
    ),
    (
        "to_months",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' months' AS INTERVAL)",
    ),
    (
        "to_weeks",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' weeks' AS INTERVAL)",
    ),
    (
        "to_days",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' days' AS INTERVAL)",
    ),
    (
        "to_hours",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' hours' AS INTERVAL)",
    ),
    (
        "to_minutes",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' minutes' AS INTERVAL)",
    ),
    (
        "to_seconds",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' seconds' AS INTERVAL)",
    ),
    (
        "to_milliseconds",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' milliseconds' AS INTERVAL)",
    ),
    (
        "to_microseconds",
        Some(1),
        "CAST(CAST($1 AS VARCHAR) || ' microseconds' AS INTERVAL)",
    ),
    (
        "to_quarters",
        Some(1),
        "CAST(CAST($1 * 3 AS VARCHAR) || ' months' AS INTERVAL)",
    ),
    (
        "to_decades",
        Some(1),
        "CAST(CAST($1 * 10 AS VARCHAR) || ' years' AS INTERVAL)",
    ),
    (
        "to_centuries",
        Some(1),
        "CAST(CAST($1 * 100 AS VARCHAR) || ' years' AS INTERVAL)",
    ),
    (
        "to_millennia",
        Some(1),
        "CAST(CAST($1 * 1000 AS VARCHAR) || ' years' AS INTERVAL)",
    ),
    ("make_timestamp", Some(1), "to_timestamp_micros($1)"),
    (
        "make_timestamp",
        Some(6),
        "CAST(make_date($1, $2, $3) AS TIMESTAMP) + CAST(CAST($4 AS VARCHAR) || ' hours ' \
         || CAST($5 AS VARCHAR) || ' minutes ' || CAST($6 AS VARCHAR) || ' seconds' AS INTERVAL)",
    ),
    // Buckets from DuckDB's origin, Monday 2000-01-03 (for strides of days or less).
    ("time_bucket", Some(2), "date_bin($1, $2, TIMESTAMP '2000-01-03 00:00:00')"),
    ("time_bucket", Some(3), "date_bin($1, $2, $3)"),
    // Monday 1 to Sunday 7.
    ("isodow", Some(1), "(CAST(date_part('dow', $1) AS BIGINT) + 6) % 7 + 1"),
    ("dayname", Some(1), "to_char($1, '%A')"),
    ("monthname", Some(1), "to_char($1, '%B')"),
    (
        "last_day",
        Some(1),
        "CAST(date_trunc('month', $1) + INTERVAL '1 month' - INTERVAL '1 day' AS DATE)",
    ),
    ("today", Some(0), "current_date()"),
    // Numbers.
    ("ceiling", Some(1), "ceil($1)"),
    // Floored, as DuckDB's: fmod(-10, 3) is 2.
    (
        "fmod",
        Some(2),
        "CAST($1 AS DOUBLE) - CAST($2 AS DOUBLE) * floor(CAST($1 AS DOUBLE) / CAST($2 AS DOUBLE))",
    ),
    ("greatest_common_divisor", Some(2), "gcd($1, $2)"),
    ("sign", Some(1), "CAST(signum($1) AS TINYINT)"),
    // To the next even integer away from zero: even(2.9) is 4.
    (
        "even",
        Some(1),
        "CASE WHEN $1 >= 0 THEN ceil(CAST($1 AS DOUBLE) / 2) * 2 \
         ELSE floor(CAST($1 AS DOUBLE) / 2) * 2 END",
    ),
    ("isinf", Some(1), "abs(CAST($1 AS DOUBLE)) = CAST('inf' AS DOUBLE)"),
    // -0.0 too: its inverse is -inf.
    ("signbit", Some(1), "$1 < 0 OR (CAST($1 AS DOUBLE) = 0 AND 1 / CAST($1 AS DOUBLE) < 0)"),
    (
        "binom",
        Some(2),
        "CAST(factorial($1) / (factorial($2) * factorial($1 - $2)) AS BIGINT)",
    ),
    (
        "isfinite",
        Some(1),
        "NOT isnan(CAST($1 AS DOUBLE)) AND abs(CAST($1 AS DOUBLE)) <> CAST('inf' AS DOUBLE)",
    ),
    ("least_common_multiple", Some(2), "lcm($1, $2)"),
    // Lists.
    ("list_value", None, "make_array($*)"),
    ("array_value", None, "make_array($*)"),
    ("list_pack", None, "make_array($*)"),
    ("list_reverse_sort", Some(1), "array_sort($1, 'DESC', 'NULLS LAST')"),
    ("array_reverse_sort", Some(1), "array_sort($1, 'DESC', 'NULLS LAST')"),
    ("struct_extract", Some(2), "get_field($1, $2)"),
    // `make_date` of one argument takes a struct of a date's parts.
    (
        "make_date",
        Some(1),
        "make_date(CAST(get_field($1, 'year') AS INT), CAST(get_field($1, 'month') AS INT), \
         CAST(get_field($1, 'day') AS INT))",
    ),
    ("map_extract_value", Some(2), "map_extract($1, $2)[1]"),
    ("map_contains", Some(2), "cardinality(map_extract($1, $2)) > 0"),
    // Aggregates.
    ("count_if", Some(1), "count(CASE WHEN $1 THEN 1 END)"),
    ("countif", Some(1), "count(CASE WHEN $1 THEN 1 END)"),
    ("first", Some(1), "first_value($1)"),
    ("arbitrary", Some(1), "first_value($1)"),
    ("approx_count_distinct", Some(1), "approx_distinct($1)"),
    ("approx_quantile", Some(2), "approx_percentile_cont($2) WITHIN GROUP (ORDER BY $1)"),
    ("quantile_cont", Some(2), "percentile_cont($2) WITHIN GROUP (ORDER BY $1)"),
    // The value at position ceil(n * p) (from 1) of the n sorted non-NULL values, as DuckDB's.
    (
        "quantile_disc",
        Some(2),
        "array_element(array_sort(array_agg($1) FILTER (WHERE $1 IS NOT NULL)), \
         greatest(CAST(ceil(count($1) * CAST($2 AS DOUBLE)) AS BIGINT), 1))",
    ),
    (
        "quantile",
        Some(2),
        "array_element(array_sort(array_agg($1) FILTER (WHERE $1 IS NOT NULL)), \
         greatest(CAST(ceil(count($1) * CAST($2 AS DOUBLE)) AS BIGINT), 1))",
    ),
    ("favg", Some(1), "avg(CAST($1 AS DOUBLE))"),
    ("fsum", Some(1), "sum(CAST($1 AS DOUBLE))"),
    ("kahan_sum", Some(1), "sum(CAST($1 AS DOUBLE))"),
    ("sumkahan", Some(1), "sum(CAST($1 AS DOUBLE))"),
    ("listagg", Some(1), "string_agg($1, ',')"),
    ("listagg", Some(2), "string_agg($1, $2)"),
    ("last", Some(1), "last_value($1)"),
    ("list", Some(1), "array_agg($1)"),
    ("group_concat", Some(1), "string_agg($1, ',')"),
    ("group_concat", Some(2), "string_agg($1, $2)"),
    // DuckDB skips rows whose key is NULL, and (but for the `_null` forms) whose value is.
    ("arg_max", Some(2), "first_value($1 ORDER BY $2 DESC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("max_by", Some(2), "first_value($1 ORDER BY $2 DESC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("argmax", Some(2), "first_value($1 ORDER BY $2 DESC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("arg_max_null", Some(2), "first_value($1 ORDER BY $2 DESC) FILTER (WHERE $2 IS NOT NULL)"),
    ("argmin", Some(2), "first_value($1 ORDER BY $2 ASC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("arg_min", Some(2), "first_value($1 ORDER BY $2 ASC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("min_by", Some(2), "first_value($1 ORDER BY $2 ASC) FILTER (WHERE $1 IS NOT NULL AND $2 IS NOT NULL)"),
    ("arg_min_null", Some(2), "first_value($1 ORDER BY $2 ASC) FILTER (WHERE $2 IS NOT NULL)"),
    // Quiver's session is in UTC, so every TIMESTAMPTZ's offset is 0.
    ("timezone", Some(1), "CASE WHEN $1 IS NOT NULL THEN CAST(0 AS BIGINT) END"),
    ("timezone_hour", Some(1), "CASE WHEN $1 IS NOT NULL THEN CAST(0 AS BIGINT) END"),
    ("timezone_minute", Some(1), "CASE WHEN $1 IS NOT NULL THEN CAST(0 AS BIGINT) END"),
];
