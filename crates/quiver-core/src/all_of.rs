//! A filter's conjuncts evaluated one after another, each on the rows the ones before kept.
//!
//! DataFusion evaluates `a AND b AND c` as nested ANDs: where `a` kept a fifth of the rows
//! or fewer, it copies every column of the batch at those rows, evaluates `b` on the copy
//! and scatters `b`'s answers back row by row (`pre_selection_scatter`, which slices an
//! array for each run of kept rows). TPC-H Q6 over tpchgen-cli's files spent 18% of its
//! time in that scatter, more than in its five comparisons. Here the rows kept so far are
//! one bitmap: a conjunct runs on every row while more than a fifth are kept (a comparison
//! runs faster over a whole column than copying it would be), on a copy of only the columns
//! it reads otherwise, and its answers land in the bitmap by its set bits.
//!
//! Only a filter's predicate is evaluated so, where null and false both drop the row: the
//! answer is the filter's, true where every conjunct is true, never null.

use std::fmt::{self, Display, Formatter};
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::{BooleanBuffer, MutableBuffer};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::util::bit_util;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{internal_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{conjunction, PhysicalExpr};

/// Above this share of the rows kept, the next conjunct runs on every row (DataFusion's
/// own pre-selection threshold, a fifth).
const PRE_SELECTED_AT_MOST: usize = 5;

/// True where every conjunct is true (see the module), evaluated in their order.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AllOf {
    conjuncts: Vec<Arc<dyn PhysicalExpr>>,
    /// Each conjunct's input columns, in order, and the conjunct over only those.
    narrowed: Vec<(Vec<usize>, Arc<dyn PhysicalExpr>)>,
}

impl AllOf {
    /// The conjuncts of a filter's predicate, to be evaluated in this order.
    pub fn new(conjuncts: Vec<Arc<dyn PhysicalExpr>>) -> Result<Self> {
        let narrowed = conjuncts.iter().map(narrowed).collect::<Result<_>>()?;
        Ok(AllOf {
            conjuncts,
            narrowed,
        })
    }

    /// The same conjunction as DataFusion's nested ANDs (for display).
    fn nested(&self) -> Arc<dyn PhysicalExpr> {
        conjunction(self.conjuncts.iter().map(Arc::clone))
    }
}

/// `conjunct`'s input columns in order, and `conjunct` over a batch of only those.
fn narrowed(conjunct: &Arc<dyn PhysicalExpr>) -> Result<(Vec<usize>, Arc<dyn PhysicalExpr>)> {
    let mut columns: Vec<usize> = collect_columns(conjunct)
        .iter()
        .map(Column::index)
        .collect();
    columns.sort_unstable();
    columns.dedup();
    let over_own = Arc::clone(conjunct)
        .transform(|node| {
            let Some(column) = node.downcast_ref::<Column>() else {
                return Ok(Transformed::no(node));
            };
            let at = columns.binary_search(&column.index()).unwrap_or_default();
            Ok(Transformed::yes(
                Arc::new(Column::new(column.name(), at)) as Arc<dyn PhysicalExpr>
            ))
        })?
        .data;
    Ok((columns, over_own))
}

impl PhysicalExpr for AllOf {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let rows = batch.num_rows();
        // None: every row kept so far.
        let mut kept: Option<BooleanBuffer> = None;
        for (conjunct, (columns, over_own)) in self.conjuncts.iter().zip(&self.narrowed) {
            let count = kept.as_ref().map_or(rows, BooleanBuffer::count_set_bits);
            if count == 0 {
                break;
            }
            kept = Some(match kept {
                Some(kept) if count * PRE_SELECTED_AT_MOST <= rows => {
                    let own = batch.project(columns)?;
                    let selected =
                        filter_record_batch(&own, &BooleanArray::new(kept.clone(), None))?;
                    let truth = truth(over_own.evaluate(&selected)?, count)?;
                    scattered(&kept, &truth)
                }
                Some(kept) => &kept & &truth(conjunct.evaluate(batch)?, rows)?,
                None => truth(conjunct.evaluate(batch)?, rows)?,
            });
        }
        let kept = kept.unwrap_or_else(|| BooleanBuffer::new_set(rows));
        Ok(ColumnarValue::Array(Arc::new(BooleanArray::new(
            kept, None,
        ))))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.conjuncts.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(AllOf::new(children)?))
    }

    fn fmt_sql(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.nested().fmt_sql(f)
    }
}

impl Display for AllOf {
    /// As DataFusion shows the nested ANDs: EXPLAIN reads the same.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.nested().fmt(f)
    }
}

/// The rows where `answer` (over `rows` rows) is true; null is false.
fn truth(answer: ColumnarValue, rows: usize) -> Result<BooleanBuffer> {
    match answer {
        ColumnarValue::Array(array) => {
            let Some(booleans) = array.as_boolean_opt() else {
                return internal_err!("a filter's conjunct gave {}", array.data_type());
            };
            Ok(match booleans.nulls() {
                Some(nulls) => booleans.values() & nulls.inner(),
                None => booleans.values().clone(),
            })
        }
        ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))) => Ok(BooleanBuffer::new_set(rows)),
        ColumnarValue::Scalar(ScalarValue::Boolean(_)) => Ok(BooleanBuffer::new_unset(rows)),
        ColumnarValue::Scalar(other) => {
            internal_err!("a filter's conjunct gave {}", other.data_type())
        }
    }
}

/// `kept` with each set bit cleared where `truth`, one bit per set bit of `kept` in order,
/// is false.
fn scattered(kept: &BooleanBuffer, truth: &BooleanBuffer) -> BooleanBuffer {
    let mut bits = MutableBuffer::from_len_zeroed(bit_util::ceil(kept.len(), 8));
    let bytes = bits.as_slice_mut();
    for (row, _) in kept.set_indices().zip(truth.iter()).filter(|(_, t)| *t) {
        bit_util::set_bit(bytes, row);
    }
    BooleanBuffer::new(bits.into(), 0, kept.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    /// Rows 0..n of `a` (0..n) and `b` (every third row null, else n - row).
    fn batch(n: i32) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Int32, true),
        ]);
        let a = Int32Array::from_iter_values(0..n);
        let b: Int32Array = (0..n).map(|r| (r % 3 != 0).then_some(n - r)).collect();
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(a), Arc::new(b)]).unwrap()
    }

    /// The rows a filter keeps under `predicate`: true, not null.
    fn kept_by(predicate: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Vec<bool> {
        let answer = predicate.evaluate(batch).unwrap();
        let answer = answer.into_array(batch.num_rows()).unwrap();
        let answer = answer.as_boolean();
        (0..answer.len())
            .map(|r| answer.is_valid(r) && answer.value(r))
            .collect()
    }

    #[test]
    fn keeps_the_rows_nested_ands_keep_whatever_share_each_conjunct_keeps() {
        let batch = batch(1000);
        let schema = batch.schema();
        let cmp =
            |name, op, v: i32| binary(col(name, &schema).unwrap(), op, lit(v), &schema).unwrap();
        // Shares kept: 95%, then a tenth (pre-selected below a fifth), then nulls in b.
        let cases: Vec<Vec<Arc<dyn PhysicalExpr>>> = vec![
            vec![
                cmp("a", Operator::Lt, 950),
                cmp("a", Operator::GtEq, 850),
                cmp("b", Operator::Gt, 100),
            ],
            vec![
                cmp("a", Operator::Lt, 100),
                cmp("b", Operator::Lt, 950),
                cmp("a", Operator::NotEq, 7),
            ],
            vec![
                cmp("b", Operator::Gt, 0),
                cmp("a", Operator::Lt, 0),
                cmp("b", Operator::Lt, 5),
            ],
            vec![lit(true), cmp("a", Operator::Lt, 10)],
            vec![cmp("a", Operator::Lt, 10), lit(ScalarValue::Boolean(None))],
        ];
        for conjuncts in cases {
            let nested = conjunction(conjuncts.iter().map(Arc::clone));
            let all_of: Arc<dyn PhysicalExpr> = Arc::new(AllOf::new(conjuncts).unwrap());
            assert_eq!(
                kept_by(&all_of, &batch),
                kept_by(&nested, &batch),
                "{nested}"
            );
            assert_eq!(all_of.to_string(), nested.to_string());
        }
    }

    #[test]
    fn a_conjunct_on_few_rows_reads_only_its_own_columns() {
        let batch = batch(100);
        let schema = batch.schema();
        // `b` alone, at index 0 of its own batch.
        let over_b = binary(col("b", &schema).unwrap(), Operator::Gt, lit(95), &schema).unwrap();
        let (columns, own) = narrowed(&over_b).unwrap();
        assert_eq!(columns, [1]);
        assert_eq!(own.to_string(), "b@0 > 95");
        let first = binary(col("a", &schema).unwrap(), Operator::Lt, lit(10), &schema).unwrap();
        let all_of: Arc<dyn PhysicalExpr> = Arc::new(AllOf::new(vec![first, over_b]).unwrap());
        let kept: Vec<usize> = (kept_by(&all_of, &batch).iter().enumerate())
            .filter_map(|(r, k)| k.then_some(r))
            .collect();
        assert_eq!(kept, [1, 2, 4]);
    }
}
