//! Whether a join's list of keys pays in the decoder. It does where it keeps few rows:
//! TPC-H Q17's lineitem keeps the rows of 200 parts of 200,000, and the decoder then
//! decodes its other columns for those rows only. Where the list keeps most rows it costs:
//! TPC-DS q43's store_sales keeps the rows of all 12 stores, and decoding the key column
//! first, then the other columns range by range around the rows it drops, made the work
//! below its repartition 140 ms of the two threads' time against DataFusion's 90 over the
//! same 2.9 M rows, the joins and aggregation in it equal.
//!
//! A star schema's integer keys fill their range, so a list keeps about the share of the
//! column's range (its min to max over the bucket's row groups) that its keys inside it
//! cover. A list over another type, or over a column without statistics, is given to the
//! decoder as before.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::{cast, max, min};
use datafusion::arrow::datatypes::{DataType, Int64Type, Schema};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::{Column, InListExpr, Literal};
use datafusion::physical_expr::PhysicalExpr;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;

use super::Probe;

/// A list of keys that keeps more than this share of the rows stays with the join. Below
/// it the rows it drops pay for the decoder's work: TPC-DS q24's store_sales keeps a third
/// of its rows by their stores, and dropping the rest before they were repartitioned and
/// joined took 0.23 s to 0.27 s when the filter was left to the join.
const KEEP_AT_MOST: f64 = 0.5;

/// The same for a scan whose rows a join probes straight away, not repartitioned first
/// (`joins_above`): there the rows a list drops would cost the join one lookup each, no
/// repartition's hashing and copying (TPC-DS q24's store_sales, repartitioned before its
/// join, lost 7% with its list of a third of the stores left to the join), and where its
/// rows lie scattered the decoder still decodes their pages whole and then filters every
/// column. TPC-DS q88's store_sales keeps one store's rows (a tenth of the key's range) and
/// goes straight into a join: a warm statement took 0.32-0.34 s with the list in the
/// decoder and 0.22-0.25 s without it (DataFusion 0.25 s). A month's or a quarter's dates
/// (2-5% of the range) still pay there: at 1/64 instead, q80, q61, q98, q25 and q17 took
/// 1.3-1.9x as long.
const PROBED_KEEP_AT_MOST: f64 = 1.0 / 16.0;

/// Whether `filter` (a join's filter as the decoder would evaluate it over `decoding`)
/// keeps few enough of the rows of `row_groups` in `metadata` to pay in the decoder: false
/// only where each of its lists is known to keep more than `KEEP_AT_MOST` (or
/// `PROBED_KEEP_AT_MOST` where a join `probed` the scan's rows straight away).
pub(super) fn keeps_few(
    filter: &Arc<dyn PhysicalExpr>,
    decoding: &Schema,
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    probed: Probe,
) -> bool {
    let at_most = if probed == Probe::Straight {
        PROBED_KEEP_AT_MOST
    } else {
        KEEP_AT_MOST
    };
    let mut shares = Vec::new();
    let walked = filter.apply(|e| {
        if let Some(list) = e.downcast_ref::<InListExpr>() {
            shares.push(share(list, decoding, metadata, row_groups));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    let keeps_many = |s: &Option<f64>| s.is_some_and(|s| s > at_most);
    walked.is_err() || shares.is_empty() || !shares.iter().all(keeps_many)
}

/// The share of the rows that `list` keeps, if its column holds integers whose range the
/// row groups' statistics tell.
fn share(
    list: &InListExpr,
    decoding: &Schema,
    metadata: &ParquetMetaData,
    row_groups: &[usize],
) -> Option<f64> {
    if list.negated() {
        return None;
    }
    let column = list.expr().downcast_ref::<Column>()?;
    let (low, high) = range(column.name(), decoding, metadata, row_groups)?;
    let inside = list
        .list()
        .iter()
        .filter_map(|key| integer(key.as_ref()))
        .filter(|key| (low..=high).contains(key))
        .count();
    Some(inside as f64 / (high - low + 1) as f64)
}

/// The least and greatest values of integer column `name` over `row_groups`, if every one
/// of them has statistics.
fn range(
    name: &str,
    decoding: &Schema,
    metadata: &ParquetMetaData,
    row_groups: &[usize],
) -> Option<(i128, i128)> {
    if !decoding
        .field_with_name(name)
        .ok()?
        .data_type()
        .is_integer()
    {
        return None;
    }
    let parquet = metadata.file_metadata().schema_descr();
    let converter = StatisticsConverter::try_new(name, decoding, parquet).ok()?;
    let groups: Vec<_> = (row_groups.iter())
        .map(|&rg| metadata.row_groups().get(rg))
        .collect::<Option<_>>()?;
    let mins = converter.row_group_mins(groups.iter().copied()).ok()?;
    let maxes = converter.row_group_maxes(groups.iter().copied()).ok()?;
    let (mins, maxes) = (
        cast(&mins, &DataType::Int64).ok()?,
        cast(&maxes, &DataType::Int64).ok()?,
    );
    // A row group without statistics gives a null; `min` of nothing is none.
    if mins.null_count() > 0 || maxes.null_count() > 0 {
        return None;
    }
    let low = min(mins.as_primitive::<Int64Type>())?;
    let high = max(maxes.as_primitive::<Int64Type>())?;
    Some((low as i128, high as i128))
}

/// A literal key as an integer.
fn integer(key: &dyn PhysicalExpr) -> Option<i128> {
    let value = key.downcast_ref::<Literal>()?.value();
    match value.cast_to(&DataType::Int64).ok()? {
        ScalarValue::Int64(Some(v)) => Some(v as i128),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    /// Keys 1 to 1,000 in two row groups of 500 (1-500, 501-1000), beside a text column.
    fn file() -> (Schema, ParquetMetaData) {
        let schema = Schema::new(vec![
            Field::new("key", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]);
        let keys = Int64Array::from_iter_values(1..=1000);
        let names = StringArray::from_iter_values((1..=1000).map(|i| format!("n{i}")));
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![Arc::new(keys), Arc::new(names)],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(500))
            .build();
        let mut bytes = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
        (schema, reader.metadata().clone())
    }

    /// A join's filter as it stands once its build side is in: the keys' bounds and list.
    fn keys_filter(schema: &Schema, keys: impl Iterator<Item = i64>) -> Arc<dyn PhysicalExpr> {
        let key = col("key", schema).unwrap();
        let list: Vec<_> = keys.map(lit).collect();
        let bound = binary(Arc::clone(&key), Operator::GtEq, lit(1i64), schema).unwrap();
        let listed = in_list(key, list, &false, schema).unwrap();
        binary(bound, Operator::And, listed, schema).unwrap()
    }

    #[test]
    fn a_list_of_keys_pays_where_it_keeps_few_of_the_column_s_range() {
        let (schema, metadata) = file();
        let both = [0, 1];
        // 12 keys of 1,000: 1.2%.
        let twelve = keys_filter(&schema, 1..=12);
        assert!(keeps_few(&twelve, &schema, &metadata, &both, Probe::Later));
        // 300 of 1,000 (30%) still pays; 600 (60%) does not, nor 300 of the first row
        // group's 500.
        let third = keys_filter(&schema, (1..=300).map(|k| k * 3));
        assert!(keeps_few(&third, &schema, &metadata, &both, Probe::Later));
        let many = keys_filter(&schema, 1..=600);
        assert!(!keeps_few(&many, &schema, &metadata, &both, Probe::Later));
        assert!(!keeps_few(
            &keys_filter(&schema, 1..=300),
            &schema,
            &metadata,
            &[0],
            Probe::Later
        ));
        // Where a join probes the scan straight away, 1.2% still pays, 30% does not.
        assert!(keeps_few(
            &twelve,
            &schema,
            &metadata,
            &both,
            Probe::Straight
        ));
        assert!(!keeps_few(
            &third,
            &schema,
            &metadata,
            &both,
            Probe::Straight
        ));
        // Keys beyond the row groups' range keep nothing there: 20 of the first 500.
        let beyond = keys_filter(&schema, 481..=980);
        assert!(keeps_few(&beyond, &schema, &metadata, &[0], Probe::Later));
        assert!(!keeps_few(&beyond, &schema, &metadata, &[1], Probe::Later));
    }

    #[test]
    fn a_list_whose_share_cannot_be_told_still_goes_to_the_decoder() {
        let (schema, metadata) = file();
        let names = (1..=900).map(|i| lit(format!("n{i}"))).collect();
        let name = in_list(col("name", &schema).unwrap(), names, &false, &schema).unwrap();
        assert!(
            keeps_few(&name, &schema, &metadata, &[0, 1], Probe::Straight),
            "text keys"
        );
        let all = keys_filter(&schema, 1..=1000);
        assert!(
            keeps_few(&all, &schema, &metadata, &[7], Probe::Later),
            "no such row group"
        );
        let bounds = binary(
            col("key", &schema).unwrap(),
            Operator::GtEq,
            lit(3i64),
            &schema,
        );
        assert!(
            keeps_few(&bounds.unwrap(), &schema, &metadata, &[0], Probe::Straight),
            "no list"
        );
    }
}
