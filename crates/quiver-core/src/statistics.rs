//! What the planner learns from the footers a scan already holds: row counts, sizes, and
//! per-column min/max and null counts of the row groups the scan keeps. With them
//! DataFusion picks join sides and join modes (a small build side collected once instead of
//! both sides hash-partitioned) as it does for its own Parquet scan, and answers `count(*)`
//! over a whole table from the footers.

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Statistics};
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataBuilder};

/// Statistics of `columns` over the row groups of one file that `keep` marks. They are
/// exact: the scan returns every row of a kept row group (filters apply above it). A column
/// this file stores with another type than the table's (`stored` is the file's Arrow schema)
/// gets none: its values are cast when read, its statistics would not be.
pub fn kept_row_groups(
    metadata: &ParquetMetaData,
    stored: &Schema,
    columns: &SchemaRef,
    keep: &[bool],
) -> Statistics {
    if columns.fields().is_empty() {
        // What DataFusion's summary gives for no column (a `count(*)`), without mapping the
        // footer's Arrow schema once more, as it does every time.
        let rows = metadata.row_groups().iter().zip(keep).filter(|(_, &k)| k);
        return Statistics {
            num_rows: Precision::Exact(rows.map(|(rg, _)| rg.num_rows() as usize).sum()),
            ..Statistics::default()
        };
    }
    let kept = keep.iter().filter(|&&k| k).count();
    let statistics = if kept == metadata.num_row_groups() {
        DFParquetMetadata::statistics_from_parquet_metadata(metadata, columns)
    } else {
        let row_groups = metadata
            .row_groups()
            .iter()
            .zip(keep)
            .filter(|(_, &k)| k)
            .map(|(rg, _)| rg.clone())
            .collect();
        // From the file's own part alone: cloning the whole footer first copied every row
        // group's chunks (ClickBench's 23 × 105) to keep one or two of them.
        let subset = ParquetMetaDataBuilder::new(metadata.file_metadata().clone())
            .set_row_groups(row_groups)
            .build();
        DFParquetMetadata::statistics_from_parquet_metadata(&subset, columns)
    };
    let mut statistics = statistics.unwrap_or_else(|_| Statistics::new_unknown(columns));
    for (column, field) in statistics
        .column_statistics
        .iter_mut()
        .zip(columns.fields())
    {
        let same_type = stored
            .field_with_name(field.name())
            .map_or(true, |s| same_values(s.data_type(), field.data_type()));
        if !same_type {
            *column = ColumnStatistics::new_unknown();
        }
    }
    statistics
}

/// Whether a stored type reads as the table's type without changing values: the same type,
/// or strings and binaries as DataFusion's reader views them.
fn same_values(stored: &DataType, table: &DataType) -> bool {
    use DataType::*;
    let bytes = |t: &DataType| {
        matches!(
            t,
            Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView
        )
    };
    stored == table || (bytes(stored) && bytes(table))
}

/// The scan's statistics in its output order: the files' statistics merged for the file
/// columns (`file_columns`, which `files` describe), nothing known of the others.
/// `output` names, for each output column, its position among `file_columns` if it is one.
pub fn scan_statistics(
    files: &[Statistics],
    file_columns: &Schema,
    output: &[Option<usize>],
    output_schema: &Schema,
) -> Statistics {
    let merged = Statistics::try_merge_iter(files, file_columns)
        .unwrap_or_else(|_| Statistics::new_unknown(file_columns));
    let num_rows = if files.is_empty() {
        Precision::Exact(0)
    } else {
        merged.num_rows
    };
    let mut statistics = Statistics {
        num_rows,
        total_byte_size: merged.total_byte_size,
        column_statistics: output
            .iter()
            .map(|column| match column {
                Some(i) => merged
                    .column_statistics
                    .get(*i)
                    .cloned()
                    .unwrap_or_else(ColumnStatistics::new_unknown),
                None => ColumnStatistics::new_unknown(),
            })
            .collect(),
    };
    // As DataFusion's own scan: rows times row width when every column has a fixed width.
    statistics.calculate_total_byte_size(output_schema);
    statistics
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

    /// Three row groups of ids 0-9, 10-19, 20-29 and a name column.
    fn metadata() -> Arc<ParquetMetaData> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let mut bytes = Vec::new();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, Arc::clone(&schema), Some(properties)).unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..30)),
                Arc::new(StringArray::from_iter(
                    (0..30).map(|i| (i % 3 != 0).then(|| format!("n{i:02}"))),
                )),
            ],
        )
        .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
        Arc::new(reader.metadata().clone())
    }

    fn stored() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ])
    }

    fn id_only() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]))
    }

    #[test]
    fn whole_file_is_exact() {
        let metadata = metadata();
        assert_eq!(metadata.num_row_groups(), 3);
        let stats = kept_row_groups(&metadata, &stored(), &id_only(), &[true, true, true]);
        assert_eq!(stats.num_rows, Precision::Exact(30));
        let id = &stats.column_statistics[0];
        assert_eq!(id.min_value, Precision::Exact(ScalarValue::Int64(Some(0))));
        assert_eq!(id.max_value, Precision::Exact(ScalarValue::Int64(Some(29))));
        assert_eq!(id.null_count, Precision::Exact(0));
    }

    #[test]
    fn no_column_counts_the_kept_rows_as_datafusion_does() {
        let metadata = metadata();
        let none = Arc::new(Schema::empty());
        for keep in [
            [true, true, true],
            [false, true, true],
            [false, false, false],
        ] {
            let ours = kept_row_groups(&metadata, &stored(), &none, &keep);
            let rows = 10 * keep.iter().filter(|&&k| k).count();
            assert_eq!(ours.num_rows, Precision::Exact(rows), "{keep:?}");
            if keep.iter().all(|&k| k) {
                let theirs =
                    DFParquetMetadata::statistics_from_parquet_metadata(&metadata, &none).unwrap();
                assert_eq!(ours, theirs);
            }
        }
    }

    #[test]
    fn pruned_row_groups_leave_the_counts() {
        let stats = kept_row_groups(&metadata(), &stored(), &id_only(), &[false, true, false]);
        assert_eq!(stats.num_rows, Precision::Exact(10));
        let id = &stats.column_statistics[0];
        assert_eq!(id.min_value, Precision::Exact(ScalarValue::Int64(Some(10))));
        assert_eq!(id.max_value, Precision::Exact(ScalarValue::Int64(Some(19))));
    }

    #[test]
    fn files_merge_and_listing_columns_are_unknown() {
        let metadata = metadata();
        let columns = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]);
        let columns = Arc::new(columns);
        let a = kept_row_groups(&metadata, &stored(), &columns, &[true, false, false]);
        let b = kept_row_groups(&metadata, &stored(), &columns, &[false, false, true]);
        // Output: name, _file (a listing column), id.
        let output = Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("_file", DataType::Utf8, false),
            Field::new("id", DataType::Int64, false),
        ]);
        let stats = scan_statistics(&[a, b], &columns, &[Some(1), None, Some(0)], &output);
        assert_eq!(stats.num_rows, Precision::Exact(20));
        assert_eq!(stats.column_statistics.len(), 3);
        // Rows 0, 3, 6, 9 and 21, 24, 27 have no name.
        assert_eq!(stats.column_statistics[0].null_count, Precision::Exact(7));
        assert_eq!(stats.column_statistics[1], ColumnStatistics::new_unknown());
        let id = &stats.column_statistics[2];
        assert_eq!(id.min_value, Precision::Exact(ScalarValue::Int64(Some(0))));
        assert_eq!(id.max_value, Precision::Exact(ScalarValue::Int64(Some(29))));
    }

    #[test]
    fn a_column_stored_with_another_type_says_nothing() {
        // The table reads `id` as Int32 (a schema that differs from this file's).
        let table = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        let stats = kept_row_groups(&metadata(), &stored(), &table, &[true, true, true]);
        assert_eq!(stats.num_rows, Precision::Exact(30));
        assert_eq!(stats.column_statistics[0], ColumnStatistics::new_unknown());
        // Strings read as views keep theirs.
        let views = Arc::new(Schema::new(vec![Field::new(
            "name",
            DataType::Utf8View,
            true,
        )]));
        let stats = kept_row_groups(&metadata(), &stored(), &views, &[true, true, true]);
        assert_eq!(stats.column_statistics[0].null_count, Precision::Exact(10));
    }

    #[test]
    fn no_files_no_rows() {
        let stats = scan_statistics(&[], &id_only(), &[Some(0)], &id_only());
        assert_eq!(stats.num_rows, Precision::Exact(0));
    }
}
