//! A filter's conjuncts (and disjuncts) evaluated one after another, each on the rows still
//! undecided by the ones before.
//!
//! DataFusion evaluates `a AND b AND c` as nested ANDs: where `a` kept a fifth of the rows
//! or fewer, it copies every column of the batch at those rows, evaluates `b` on the copy
//! and scatters `b`'s answers back row by row (`pre_selection_scatter`, which slices an
//! array for each run of kept rows); an OR does the same on the rows still false. TPC-H Q6
//! over tpchgen-cli's files spent 18% of its time in that scatter, more than in its five
//! comparisons. Here the rows still undecided are one bitmap: a part runs on every row while
//! more than a fifth are undecided (a comparison runs faster over a whole column than
//! copying it would be), on a copy of only the columns it reads otherwise, and its answers
//! land in the bitmap by its set bits. ANDs and ORs nest (`(a AND b) OR c`): each nested
//! part runs on the rows its parent has yet to decide.
//!
//! Only a filter's predicate is evaluated so, where null and false both drop the row: the
//! answer is the filter's, true where the predicate is true, never null. That holds through
//! AND and OR (a null part is as false as a false one), not through NOT, which stays a part.

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
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::utils::{collect_columns, split_disjunction};
use datafusion::physical_expr::{split_conjunction, PhysicalExpr};

/// Above this share of the rows undecided, the next part runs on every row (DataFusion's
/// own pre-selection threshold, a fifth).
const PRE_SELECTED_AT_MOST: usize = 5;

/// Whether every part must hold or one is enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Joined {
    All,
    Any,
}

/// True where every part (`All`) or some part (`Any`) is true (see the module), the parts
/// evaluated in their order.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct InTurn {
    joined: Joined,
    parts: Vec<Arc<dyn PhysicalExpr>>,
    /// Each part's input columns, in order, and the part over only those.
    narrowed: Vec<(Vec<usize>, Arc<dyn PhysicalExpr>)>,
}

impl InTurn {
    /// `parts` joined, to be evaluated in this order.
    pub fn new(joined: Joined, parts: Vec<Arc<dyn PhysicalExpr>>) -> Result<Self> {
        let narrowed = parts.iter().map(narrowed).collect::<Result<_>>()?;
        Ok(InTurn {
            joined,
            parts,
            narrowed,
        })
    }

    /// Whether every part must hold or one.
    pub fn joined(&self) -> Joined {
        self.joined
    }

    /// A filter's `predicate` with its ANDs and ORs (at any depth, not under a NOT)
    /// evaluated in turn; `None` where it has neither.
    pub fn of(predicate: &Arc<dyn PhysicalExpr>) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        let in_turn = in_turn(predicate)?;
        Ok(in_turn
            .downcast_ref::<InTurn>()
            .is_some()
            .then_some(in_turn))
    }

    /// The rows of `within` (every row where `None`) where this holds.
    fn truth(&self, batch: &RecordBatch, within: Option<&BooleanBuffer>) -> Result<BooleanBuffer> {
        let rows = batch.num_rows();
        match self.joined {
            Joined::All => {
                let mut kept = within.cloned();
                for part in 0..self.parts.len() {
                    kept = Some(self.part_truth(part, batch, kept.as_ref())?);
                }
                Ok(kept.unwrap_or_else(|| BooleanBuffer::new_set(rows)))
            }
            Joined::Any => {
                let mut found = BooleanBuffer::new_unset(rows);
                let mut open = within.cloned();
                for part in 0..self.parts.len() {
                    let holds = self.part_truth(part, batch, open.as_ref())?;
                    open = Some(match open {
                        Some(open) => &open & &!&holds,
                        None => !&holds,
                    });
                    found = &found | &holds;
                }
                Ok(found)
            }
        }
    }

    /// The rows of `within` (every row where `None`) where part `part` holds.
    fn part_truth(
        &self,
        part: usize,
        batch: &RecordBatch,
        within: Option<&BooleanBuffer>,
    ) -> Result<BooleanBuffer> {
        let expr = &self.parts[part];
        if let Some(nested) = expr.downcast_ref::<InTurn>() {
            return nested.truth(batch, within);
        }
        let rows = batch.num_rows();
        let Some(within) = within else {
            return truth(expr.evaluate(batch)?, rows);
        };
        let count = within.count_set_bits();
        if count == 0 {
            return Ok(within.clone());
        }
        if count * PRE_SELECTED_AT_MOST > rows {
            return Ok(within & &truth(expr.evaluate(batch)?, rows)?);
        }
        let (columns, over_own) = &self.narrowed[part];
        let own = batch.project(columns)?;
        let selected = filter_record_batch(&own, &BooleanArray::new(within.clone(), None))?;
        let answers = truth(over_own.evaluate(&selected)?, count)?;
        Ok(scattered(within, &answers))
    }

    /// The same predicate as DataFusion's nested ANDs and ORs (for display).
    fn nested(&self) -> Arc<dyn PhysicalExpr> {
        let op = match self.joined {
            Joined::All => Operator::And,
            Joined::Any => Operator::Or,
        };
        let parts = self
            .parts
            .iter()
            .map(|part| match part.downcast_ref::<InTurn>() {
                Some(nested) => nested.nested(),
                None => Arc::clone(part),
            });
        parts
            .reduce(|left, right| Arc::new(BinaryExpr::new(left, op, right)))
            .expect("parts to join")
    }
}

/// `expr` with its ANDs and ORs as `InTurn`s.
fn in_turn(expr: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
    for (joined, parts) in [
        (Joined::All, split_conjunction(expr)),
        (Joined::Any, split_disjunction(expr)),
    ] {
        if parts.len() > 1 {
            let parts = parts.into_iter().map(in_turn).collect::<Result<_>>()?;
            return Ok(Arc::new(InTurn::new(joined, parts)?));
        }
    }
    Ok(Arc::clone(expr))
}

/// `part`'s input columns in order, and `part` over a batch of only those.
fn narrowed(part: &Arc<dyn PhysicalExpr>) -> Result<(Vec<usize>, Arc<dyn PhysicalExpr>)> {
    let mut columns: Vec<usize> = collect_columns(part).iter().map(Column::index).collect();
    columns.sort_unstable();
    columns.dedup();
    let over_own = Arc::clone(part)
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

impl PhysicalExpr for InTurn {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let kept = self.truth(batch, None)?;
        Ok(ColumnarValue::Array(Arc::new(BooleanArray::new(
            kept, None,
        ))))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.parts.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(InTurn::new(self.joined, children)?))
    }

    fn fmt_sql(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.nested().fmt_sql(f)
    }
}

impl Display for InTurn {
    /// As DataFusion shows the nested ANDs and ORs: EXPLAIN reads the same.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.nested().fmt(f)
    }
}

/// The rows where `answer` (over `rows` rows) is true; null is false.
fn truth(answer: ColumnarValue, rows: usize) -> Result<BooleanBuffer> {
    match answer {
        ColumnarValue::Array(array) => {
            let Some(booleans) = array.as_boolean_opt() else {
                return internal_err!("a filter's part gave {}", array.data_type());
            };
            Ok(match booleans.nulls() {
                Some(nulls) => booleans.values() & nulls.inner(),
                None => booleans.values().clone(),
            })
        }
        ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))) => Ok(BooleanBuffer::new_set(rows)),
        ColumnarValue::Scalar(ScalarValue::Boolean(_)) => Ok(BooleanBuffer::new_unset(rows)),
        ColumnarValue::Scalar(other) => {
            internal_err!("a filter's part gave {}", other.data_type())
        }
    }
}

/// `within` with each set bit cleared where `answers`, one bit per set bit of `within` in
/// order, is false.
fn scattered(within: &BooleanBuffer, answers: &BooleanBuffer) -> BooleanBuffer {
    let mut bits = MutableBuffer::from_len_zeroed(bit_util::ceil(within.len(), 8));
    let bytes = bits.as_slice_mut();
    for (row, _) in within.set_indices().zip(answers.iter()).filter(|(_, t)| *t) {
        bit_util::set_bit(bytes, row);
    }
    BooleanBuffer::new(bits.into(), 0, within.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, lit, not};

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
    fn keeps_the_rows_nested_ands_and_ors_keep_whatever_share_each_part_keeps() {
        let batch = batch(1000);
        let schema = batch.schema();
        let cmp =
            |name, op, v: i32| binary(col(name, &schema).unwrap(), op, lit(v), &schema).unwrap();
        let and = |l, r| binary(l, Operator::And, r, &schema).unwrap();
        let or = |l, r| binary(l, Operator::Or, r, &schema).unwrap();
        let unknown = || lit(ScalarValue::Boolean(None));
        // Shares kept of 95%, then a tenth (pre-selected below a fifth); nulls in b.
        let predicates = [
            and(
                and(cmp("a", Operator::Lt, 950), cmp("a", Operator::GtEq, 850)),
                cmp("b", Operator::Gt, 100),
            ),
            and(
                and(cmp("a", Operator::Lt, 100), cmp("b", Operator::Lt, 950)),
                cmp("a", Operator::NotEq, 7),
            ),
            and(
                and(cmp("b", Operator::Gt, 0), cmp("a", Operator::Lt, 0)),
                cmp("b", Operator::Lt, 5),
            ),
            and(lit(true), cmp("a", Operator::Lt, 10)),
            and(cmp("a", Operator::Lt, 10), unknown()),
            // ORs: the rows still false are few, then most; nested both ways.
            or(
                or(cmp("a", Operator::Gt, 50), cmp("b", Operator::Gt, 990)),
                cmp("a", Operator::Eq, 3),
            ),
            or(
                cmp("a", Operator::Lt, 30),
                and(cmp("b", Operator::Lt, 500), cmp("a", Operator::NotEq, 600)),
            ),
            and(
                or(cmp("a", Operator::Lt, 30), cmp("b", Operator::Lt, 100)),
                or(unknown(), cmp("a", Operator::Gt, 20)),
            ),
            // A NOT stays a part: NOT (b > 500) is null where b is.
            and(
                not(cmp("b", Operator::Gt, 500)).unwrap(),
                cmp("a", Operator::Lt, 900),
            ),
        ];
        for nested in predicates {
            let in_turn = InTurn::of(&nested).unwrap().unwrap();
            assert_eq!(
                kept_by(&in_turn, &batch),
                kept_by(&nested, &batch),
                "{nested}"
            );
            assert_eq!(in_turn.to_string(), nested.to_string());
        }
        // Nothing to take in turn.
        assert!(InTurn::of(&cmp("a", Operator::Lt, 3)).unwrap().is_none());
    }

    #[test]
    fn a_part_on_few_rows_reads_only_its_own_columns() {
        let batch = batch(100);
        let schema = batch.schema();
        // `b` alone, at index 0 of its own batch.
        let over_b = binary(col("b", &schema).unwrap(), Operator::Gt, lit(95), &schema).unwrap();
        let (columns, own) = narrowed(&over_b).unwrap();
        assert_eq!(columns, [1]);
        assert_eq!(own.to_string(), "b@0 > 95");
        let first = binary(col("a", &schema).unwrap(), Operator::Lt, lit(10), &schema).unwrap();
        let in_turn: Arc<dyn PhysicalExpr> =
            Arc::new(InTurn::new(Joined::All, vec![first, over_b]).unwrap());
        let kept: Vec<usize> = (kept_by(&in_turn, &batch).iter().enumerate())
            .filter_map(|(r, k)| k.then_some(r))
            .collect();
        assert_eq!(kept, [1, 2, 4]);
    }
}
