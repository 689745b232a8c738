//! Manifests pruned by their partitions' summaries, before any manifest is read: each data
//! manifest is a container of DataFusion's pruning statistics, whose bounds on a source
//! column come from the summary of a partition field over it. Identity fields give the
//! column's own bounds; year, month, day and hour fields give the span of time their
//! values cover. Other transforms (bucket, truncate) say nothing, and keep the manifest.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_optimizer::pruning::PruningPredicate;

use super::bounds::bound;
use super::manifests::ManifestFile;
use super::spec::TableMetadata;
use crate::scan::field_id;

/// Which of `manifests` may hold rows that pass `predicate` (delete manifests are kept).
pub fn manifests_to_read(
    predicate: &PruningPredicate,
    metadata: &TableMetadata,
    manifests: &[ManifestFile],
    schema: &SchemaRef,
) -> Vec<bool> {
    let statistics = ManifestStatistics {
        metadata,
        manifests,
        schema,
    };
    let keep = predicate
        .prune(&statistics)
        .unwrap_or_else(|_| vec![true; manifests.len()]);
    keep.into_iter()
        .zip(manifests)
        .map(|(keep, manifest)| keep || manifest.content != 0)
        .collect()
}

struct ManifestStatistics<'a> {
    metadata: &'a TableMetadata,
    manifests: &'a [ManifestFile],
    /// The table's columns (with their field ids), as the predicate types them.
    schema: &'a SchemaRef,
}

impl ManifestStatistics<'_> {
    /// Per manifest, the bound (`upper`: the high one) of `column` its partitions give.
    fn bounds(&self, column: &Column, upper: bool) -> Option<ArrayRef> {
        let field = self.schema.field_with_name(&column.name).ok()?;
        let id = field_id(field)?;
        let iceberg_type = unviewed(field.data_type());
        let values = self.manifests.iter().map(|manifest| {
            self.bound(manifest, id, &iceberg_type, upper)
                .unwrap_or_else(|| {
                    ScalarValue::try_from(&iceberg_type).unwrap_or(ScalarValue::Null)
                })
        });
        let array = ScalarValue::iter_to_array(values).ok()?;
        cast(&array, field.data_type()).ok()
    }

    fn bound(
        &self,
        manifest: &ManifestFile,
        id: i32,
        data_type: &DataType,
        upper: bool,
    ) -> Option<ScalarValue> {
        let spec = self.metadata.spec(manifest.spec_id)?;
        spec.fields.iter().enumerate().find_map(|(i, field)| {
            if field.source_id != id {
                return None;
            }
            let summary = manifest.partitions.get(i)?;
            let bytes = if upper {
                &summary.upper
            } else {
                &summary.lower
            };
            let bytes = bytes.as_deref()?;
            match field.transform.as_str() {
                "identity" => bound(bytes, data_type),
                unit @ ("year" | "month" | "day" | "hour") => {
                    let value = i32::from_le_bytes(bytes.try_into().ok()?) as i64;
                    let (start, end) = span(unit, value)?;
                    in_type(if upper { end - 1 } else { start }, data_type)
                }
                _ => None,
            }
        })
    }
}

/// Strings and binaries as Iceberg's bounds decode to (the table may view them).
fn unviewed(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// The microseconds since the epoch that a time transform's `value` covers, `[start, end)`.
fn span(unit: &str, value: i64) -> Option<(i64, i64)> {
    const HOUR: i64 = 3_600_000_000;
    const DAY: i64 = 24 * HOUR;
    let month_start = |months: i64| {
        days_from_civil(1970 + months.div_euclid(12), months.rem_euclid(12) + 1) * DAY
    };
    Some(match unit {
        "hour" => (value * HOUR, (value + 1) * HOUR),
        "day" => (value * DAY, (value + 1) * DAY),
        "month" => (month_start(value), month_start(value + 1)),
        "year" => (month_start(value * 12), month_start((value + 1) * 12)),
        _ => return None,
    })
}

/// Microseconds since the epoch as a value of a time column's type.
fn in_type(micros: i64, data_type: &DataType) -> Option<ScalarValue> {
    Some(match data_type {
        DataType::Date32 => ScalarValue::Date32(Some(micros.div_euclid(86_400_000_000) as i32)),
        DataType::Timestamp(TimeUnit::Microsecond, zone) => {
            ScalarValue::TimestampMicrosecond(Some(micros), zone.clone())
        }
        DataType::Timestamp(TimeUnit::Nanosecond, zone) => {
            ScalarValue::TimestampNanosecond(Some(micros.checked_mul(1000)?), zone.clone())
        }
        _ => return None,
    })
}

/// Days since 1970-01-01 of the first day of `month` in `year` (the proleptic Gregorian
/// calendar, by Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

impl PruningStatistics for ManifestStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }

    fn num_containers(&self) -> usize {
        self.manifests.len()
    }

    /// None where a partition field over the column holds no NULL (every transform keeps a
    /// NULL a NULL); unknown elsewhere.
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let field = self.schema.field_with_name(&column.name).ok()?;
        let id = field_id(field)?;
        let counts = self.manifests.iter().map(|manifest| {
            let spec = self.metadata.spec(manifest.spec_id)?;
            let i = spec.fields.iter().position(|f| f.source_id == id)?;
            (!manifest.partitions.get(i)?.contains_null).then_some(0)
        });
        Some(Arc::new(UInt64Array::from_iter(counts)))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        None
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_transforms_cover_their_spans() {
        const DAY: i64 = 86_400_000_000;
        assert_eq!(days_from_civil(1970, 1), 0);
        assert_eq!(days_from_civil(2024, 3), 19_783);
        assert_eq!(days_from_civil(1969, 12), -31);
        // 2024-01-05 is day 19727; month 648 is 2024-01; year 54 is 2024.
        assert_eq!(span("day", 19_727), Some((19_727 * DAY, 19_728 * DAY)));
        assert_eq!(span("month", 648), Some((19_723 * DAY, 19_754 * DAY)));
        assert_eq!(span("year", 54), Some((19_723 * DAY, 20_089 * DAY)));
        assert_eq!(span("hour", -1), Some((-3_600_000_000, 0)));
        assert_eq!(
            in_type(19_754 * DAY - 1, &DataType::Date32),
            Some(ScalarValue::Date32(Some(19_753))),
            "the last day of January"
        );
        assert_eq!(span("bucket", 1), None);
    }
}
