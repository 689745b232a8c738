//! A row equal to the row before it is dropped before a grouping that reads its input as a
//! set.
//!
//! An aggregate with no aggregate functions (`SELECT DISTINCT`, the inner grouping of a
//! COUNT(DISTINCT), INTERSECT and EXCEPT) counts a row once however often it comes, so a
//! row that repeats the one before it on every column the grouping reads adds nothing.
//! Sorted tables hold such runs: ClickBench's hits are sorted by counter, date and user,
//! so a user's hits of a day follow each other (a row group of 435 thousand rows holds 138
//! thousand runs of UserID and 105 thousand of SearchPhrase, whose empty phrase is most
//! rows). Comparing a row with the one before costs a nanosecond or two a column, against
//! a hash, a lookup and a copy to the other partitions for every row the grouping takes.
//!
//! It pays only where runs are, and costs a comparison and a copy per row where they are
//! not: each partition stops once the rows it has read show too few repeats
//! (`JUDGEMENTS`), and passes rows on untouched from then. It runs in a partition's own
//! order, so it is right under any partitioning.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, BooleanBufferBuilder, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::compute::kernels::boolean::or;
use datafusion::arrow::compute::kernels::cmp::distinct;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};

use crate::distinct_probes::columns_read_as_a_set;
use crate::options::QuiverOptions;
use crate::row_sieve::{still_pays, Sieve, SieveExec, SieveKind};

/// When a partition judges whether dropping repeats pays: once it has read so many rows,
/// the share of them it may have kept and go on. A kept row costs a comparison per column
/// and a copy; a dropped one saves the grouping's hash and lookup, several times that, so
/// a fifth of the rows dropped still pays.
const JUDGEMENTS: [(usize, f64); 2] = [(4_096, 0.9), (32_768, 0.8)];

/// The rule: an aggregate that reads its input as a set gets a `DropAdjacentRepeatsExec`
/// over the columns it reads, as its input.
#[derive(Debug)]
pub struct AdjacentRepeats;

impl PhysicalOptimizerRule for AdjacentRepeats {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !QuiverOptions::of(config).adjacent_repeats {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let input = aggregate.input();
            // Once: a plan optimised again keeps its node.
            let placed = input.name() == RowBefore::NAME;
            let keys = match columns_read_as_a_set(aggregate) {
                Some(read) if !placed && comparable(input, &read) => read,
                _ => return Ok(Transformed::no(node)),
            };
            let dropping = Arc::new(DropAdjacentRepeatsExec::new(
                Arc::new(RowBefore),
                Arc::clone(input),
                keys.into_iter().collect(),
            ));
            Ok(Transformed::yes(replace_children_if_necessary(
                node,
                vec![dropping],
            )?))
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "adjacent_repeats"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `keys` of `input` can be compared row with row by Arrow's `distinct`: scalars,
/// not nested values. Two rows it calls not distinct are one group (it reads floats by
/// their bits: `-0.0` and `0.0` are kept both, which is only a row more). An input without
/// keys (`SELECT DISTINCT 1`) is left alone.
fn comparable(input: &Arc<dyn ExecutionPlan>, keys: &BTreeSet<usize>) -> bool {
    use DataType::*;
    let schema = input.schema();
    !keys.is_empty()
        && keys.iter().all(|&key| {
            let data_type = schema.field(key).data_type();
            data_type.is_primitive()
                || matches!(
                    data_type,
                    Boolean
                        | Utf8
                        | LargeUtf8
                        | Utf8View
                        | Binary
                        | LargeBinary
                        | BinaryView
                        | FixedSizeBinary(_)
                )
        })
}

/// Drops each row that equals the row before it in its partition on every key column,
/// while that pays (see the module's header).
pub(crate) type DropAdjacentRepeatsExec = SieveExec<RowBefore>;

/// `DropAdjacentRepeatsExec`'s kind of sieve.
#[derive(Debug)]
pub(crate) struct RowBefore;

impl SieveKind for RowBefore {
    const NAME: &'static str = "DropAdjacentRepeatsExec";

    fn sieve(
        &self,
        keys: &[usize],
        _: usize,
        _: &TaskContext,
        _: &Arc<dyn ExecutionPlan>,
    ) -> Result<Box<dyn Sieve>> {
        Ok(Box::new(Runs {
            keys: keys.to_vec(),
            last: None,
            dropping: true,
            read: 0,
            kept: 0,
        }))
    }
}

/// One partition's last row so far, until dropping repeats stops paying.
struct Runs {
    keys: Vec<usize>,
    /// The key columns of the last row read, one row each.
    last: Option<Vec<ArrayRef>>,
    dropping: bool,
    read: usize,
    kept: usize,
}

impl Sieve for Runs {
    fn sift(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        if !self.dropping || rows == 0 {
            return Ok(batch);
        }
        let columns: Vec<&ArrayRef> = self.keys.iter().map(|&key| batch.column(key)).collect();
        // Row 0 against the previous batch's last row (the first row of all is kept), row
        // i against row i - 1.
        let first_differs = match &self.last {
            None => true,
            Some(last) => {
                (columns.iter().zip(last)).try_fold(false, |differs, (column, last)| {
                    Ok::<_, DataFusionError>(
                        differs || distinct(&column.slice(0, 1), last)?.value(0),
                    )
                })?
            }
        };
        let mut differs: Option<BooleanArray> = None;
        for column in &columns {
            let key_differs = distinct(&column.slice(1, rows - 1), &column.slice(0, rows - 1))?;
            differs = Some(match differs {
                Some(differs) => or(&differs, &key_differs)?,
                None => key_differs,
            });
        }
        let mut keep = BooleanBufferBuilder::new(rows);
        keep.append(first_differs);
        if let Some(differs) = differs {
            keep.append_buffer(differs.values());
        }
        let keep = BooleanArray::new(keep.finish(), None);
        self.last = Some(
            columns
                .iter()
                .map(|column| column.slice(rows - 1, 1))
                .collect(),
        );
        let kept = keep.true_count();
        self.read += rows;
        self.kept += kept;
        self.dropping = still_pays(&JUDGEMENTS, self.read, self.kept);
        if kept == rows {
            return Ok(batch);
        }
        filter_record_batch(&batch, &keep).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, Int64Array, StringViewArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_plan::{collect, displayable};

    use super::*;
    use crate::QuiverSession;

    #[tokio::test]
    async fn distinct_rows_of_sorted_and_unsorted_input_answer_as_datafusion_does() {
        let session = QuiverSession::local_two_threads();
        session
            .run("SET datafusion.execution.batch_size = 100")
            .await
            .unwrap();
        // Hits sorted by user, a user's rows in runs; phrases mostly empty, some null.
        session
            .run(
                "CREATE TABLE hits AS SELECT value AS id, value / 7 AS user, \
                 CASE WHEN value % 11 = 0 THEN NULL WHEN value / 7 % 3 = 0 \
                 THEN 'a phrase longer than twelve bytes ' || CAST(value / 21 AS VARCHAR) \
                 ELSE '' END AS phrase, (value / 7) % 13 AS region, \
                 value % 5 AS quantity FROM range(5000)",
            )
            .await
            .unwrap();
        // (a query, whether repeats are dropped)
        let cases = [
            ("SELECT count(DISTINCT user) FROM hits", true),
            ("SELECT count(DISTINCT phrase) FROM hits", true),
            (
                "SELECT region, count(DISTINCT user) FROM hits GROUP BY region ORDER BY 1",
                true,
            ),
            (
                "SELECT DISTINCT phrase, region FROM hits WHERE phrase <> '' ORDER BY 1, 2",
                true,
            ),
            (
                "SELECT user % 50 AS u FROM hits INTERSECT SELECT quantity * 10 FROM hits \
                 ORDER BY 1",
                true,
            ),
            // A count counts every row.
            (
                "SELECT phrase, count(*) FROM hits GROUP BY phrase ORDER BY 1",
                false,
            ),
        ];
        for (sql, drops) in cases {
            let mut answers = Vec::new();
            for on in [true, false] {
                session
                    .run(&format!("SET quiver.adjacent_repeats = {on}"))
                    .await
                    .unwrap();
                let plan = session.physical_plan(sql).await.unwrap();
                // Optimised again, the plan keeps its one node per grouping.
                let config = session.context().state().config_options().clone();
                let again = AdjacentRepeats
                    .optimize(Arc::clone(&plan), &config)
                    .unwrap();
                let shown = displayable(plan.as_ref()).indent(true).to_string();
                let shown_again = displayable(again.as_ref()).indent(true).to_string();
                assert_eq!(shown, shown_again, "{sql}");
                assert_eq!(
                    shown.contains("DropAdjacentRepeatsExec"),
                    on && drops,
                    "{sql}\n{shown}"
                );
                let output = session.run(sql).await.unwrap();
                answers.push(pretty_format_batches(&output.batches).unwrap().to_string());
            }
            assert_eq!(answers[0], answers[1], "{sql}");
            assert!(answers[0].lines().count() > 4, "{sql}\n{}", answers[0]);
        }
    }

    /// The rows `DropAdjacentRepeatsExec` keeps of `batches` (an integer and a string
    /// column, both keys; one partition), as (integer, string) pairs.
    async fn kept(batches: Vec<Vec<(Option<i64>, &str)>>) -> Vec<(Option<i64>, String)> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8View, false),
        ]));
        let batches = (batches.into_iter())
            .map(|rows| {
                let numbers = Int64Array::from_iter(rows.iter().map(|row| row.0));
                let strings = StringViewArray::from_iter_values(rows.iter().map(|row| row.1));
                let columns: Vec<ArrayRef> = vec![Arc::new(numbers), Arc::new(strings)];
                RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
            })
            .collect::<Vec<_>>();
        let source = MemorySourceConfig::try_new_exec(&[batches], schema, None).unwrap();
        let dropping = Arc::new(DropAdjacentRepeatsExec::new(
            Arc::new(RowBefore),
            source,
            vec![0, 1],
        ));
        let output = collect(dropping, Arc::new(TaskContext::default()))
            .await
            .unwrap();
        let mut rows = Vec::new();
        for batch in output {
            let numbers = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let strings = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringViewArray>()
                .unwrap();
            for row in 0..batch.num_rows() {
                let number = numbers.is_valid(row).then(|| numbers.value(row));
                rows.push((number, strings.value(row).to_string()));
            }
        }
        rows
    }

    #[tokio::test]
    async fn a_row_equal_to_the_one_before_is_dropped_across_batches() {
        let long = "a string longer than twelve bytes";
        let batches = vec![
            vec![
                (Some(1), "a"),
                (Some(1), "a"),
                (Some(1), "b"),
                (None, "b"),
                (None, "b"),
            ],
            // The first row repeats the last of the batch before.
            vec![
                (None, "b"),
                (Some(2), long),
                (Some(2), long),
                (Some(1), "b"),
            ],
            vec![(Some(1), "b")],
        ];
        let expected = [
            (Some(1), "a"),
            (Some(1), "b"),
            (None, "b"),
            (Some(2), long),
            (Some(1), "b"),
        ];
        let expected: Vec<_> = (expected.iter())
            .map(|(n, s)| (*n, s.to_string()))
            .collect();
        assert_eq!(kept(batches).await, expected);
    }

    #[tokio::test]
    async fn dropping_stops_where_rows_seldom_repeat() {
        // Past 4 Ki rows nine in ten kept: every row after passes, repeats too.
        let rows = |from: i64| {
            (from..from + 4096)
                .map(|n| (Some(n), ""))
                .collect::<Vec<_>>()
        };
        let mut repeats = rows(0);
        repeats
            .iter_mut()
            .take(300)
            .for_each(|row| row.0 = Some(-1));
        let batches = vec![repeats, vec![(Some(7), ""); 100]];
        assert_eq!(kept(batches).await.len(), 4096 - 299 + 100);
        // Runs of two: half is dropped throughout.
        let pairs = |from: i64| (from..from + 4096).map(|n| (Some(n / 2), "x")).collect();
        let batches = (0..10).map(|i| pairs(i * 4096)).collect();
        assert_eq!(kept(batches).await.len(), 10 * 2048);
    }
}
