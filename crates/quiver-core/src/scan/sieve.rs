//! The dynamic filters applied to decoded rows, for as long as they drop enough of them.
//! A join's filter that looks up its build side's hash table is not given to the decoder
//! (it scatters the rows it keeps: `pushdown`), but where it drops most rows it is worth
//! applying at once, before the rows travel through repartitions and joins: TPC-DS q72's
//! catalog_sales is the build side of a join that multiplies its rows by ~40, and its
//! other joins' filters (dates, households, demographics) keep one row in ~30 of it. Each
//! partition measures: once `SAMPLE_ROWS` rows have passed a filter that is known, it stays
//! only if it kept at most `KEEP_AT_MOST` of them. The operators above apply every filter
//! again, so a filter stopped early costs nothing but the rows it would have dropped.
//!
//! A lookup costs a hash per row, so it runs only on the rows the scan's cheap static
//! conjuncts keep (a date range beside it: TPC-H Q20's lineitem keeps 15% by its dates
//! and 0.3% of those by the join's keys); a scan whose rows a join probes straight away
//! has no sieve at all (`joins_above`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::common::cast::as_boolean_array;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::snapshot_generation;
use datafusion::physical_plan::metrics::Count;

use crate::pushdown::snapshot;

/// Rows a filter is judged on: 8 batches of DataFusion's 8,192.
const SAMPLE_ROWS: u64 = 65_536;

/// A filter that keeps more than this share of the sample is stopped: dropping some rows
/// does not pay for a hash lookup per row that the join does again (TPC-DS q47's filters
/// keep 27% of store_sales, and sifting made it 0.69 → 0.77 s; TPC-H Q3, Q5 and Q9's keep
/// most rows). DataFusion's own `FilterExec` pre-selects below the same share.
const KEEP_AT_MOST: f64 = 0.2;

/// One partition's sieve over the filters pushed into its scan.
#[derive(Debug)]
pub(super) struct Sieve {
    filter: Arc<dyn PhysicalExpr>,
    /// The cheap conjuncts of the static predicate above the scan, evaluated first so that
    /// the filter looks up only the rows they keep.
    first: Option<Arc<dyn PhysicalExpr>>,
    /// The filters as they stood at a generation: snapshotting them rebuilds their whole
    /// tree (a join's IN list of 365 dates cloned per batch was a fifth of TPC-DS q65).
    current: Mutex<Option<(u64, Arc<dyn PhysicalExpr>)>>,
    rows_in: AtomicU64,
    rows_out: AtomicU64,
    stopped: AtomicBool,
    /// EXPLAIN ANALYZE's count of the rows it dropped.
    dropped: Count,
}

impl Sieve {
    pub fn new(
        filter: Arc<dyn PhysicalExpr>,
        first: Option<Arc<dyn PhysicalExpr>>,
        dropped: Count,
    ) -> Self {
        Self {
            filter,
            first,
            current: Mutex::new(None),
            rows_in: AtomicU64::new(0),
            rows_out: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            dropped,
        }
    }

    /// `batch` without the rows the filters, as they stand, rule out; `batch` itself while
    /// they are not known yet, or once they were judged not to pay.
    pub fn sift(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.stopped.load(Relaxed) || batch.num_rows() == 0 {
            return Ok(batch);
        }
        let now = self.current()?;
        if now
            .downcast_ref::<Literal>()
            .is_some_and(|l| l.value().is_null() || l.value() == &true.into())
        {
            return Ok(batch); // not known yet
        }
        let all = batch.num_rows();
        let batch = match &self.first {
            Some(first) => kept_by(first, batch)?.0,
            None => batch,
        };
        let (sifted, kept) = kept_by(&now, batch)?;
        let rows = kept.0 as u64;
        let kept = kept.1 as u64;
        self.dropped.add(all - kept as usize);
        // The filter is judged on the rows it saw: what the static conjuncts keep is the
        // operators' above work either way.
        let rows_in = self.rows_in.fetch_add(rows, Relaxed) + rows;
        let rows_out = self.rows_out.fetch_add(kept, Relaxed) + kept;
        if rows_in >= SAMPLE_ROWS && rows_out as f64 > KEEP_AT_MOST * rows_in as f64 {
            self.stopped.store(true, Relaxed);
        }
        Ok(sifted)
    }

    /// The filters as they stand, snapshotted again only when they changed.
    fn current(&self) -> Result<Arc<dyn PhysicalExpr>> {
        let generation = snapshot_generation(&self.filter);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        match current.as_ref() {
            Some((seen, now)) if *seen == generation => Ok(Arc::clone(now)),
            _ => {
                let now = snapshot(&self.filter)?;
                *current = Some((generation, Arc::clone(&now)));
                Ok(now)
            }
        }
    }
}

/// The rows of `batch` that `filter` keeps, and (rows in, rows kept).
fn kept_by(
    filter: &Arc<dyn PhysicalExpr>,
    batch: RecordBatch,
) -> Result<(RecordBatch, (usize, usize))> {
    let rows = batch.num_rows();
    if rows == 0 {
        return Ok((batch, (0, 0)));
    }
    let mask = filter.evaluate(&batch)?.into_array(rows)?;
    let mask = as_boolean_array(&mask)?;
    let kept = mask.true_count();
    if kept == rows {
        return Ok((batch, (rows, kept)));
    }
    Ok((filter_record_batch(&batch, mask)?, (rows, kept)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit, DynamicFilterPhysicalExpr};
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    fn batch(from: i64, rows: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let values = Int64Array::from_iter_values(from..from + rows);
        RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap()
    }

    #[test]
    fn a_filter_sifts_once_known_and_stops_when_it_keeps_most_rows() {
        let schema = batch(0, 1).schema();
        let k = col("k", &schema).unwrap();
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&k)],
            lit(true),
        ));
        let metrics = ExecutionPlanMetricsSet::new();
        let dropped =
            datafusion::physical_plan::metrics::MetricBuilder::new(&metrics).counter("dropped", 0);
        let sieve = Sieve::new(Arc::clone(&filter) as _, None, dropped.clone());
        // Not known yet: nothing is dropped, nothing counted.
        assert_eq!(sieve.sift(batch(0, 8192)).unwrap().num_rows(), 8192);
        // k < 100 keeps 100 of each batch of 8,192 from 0: sifted on every batch.
        filter
            .update(binary(Arc::clone(&k), Operator::Lt, lit(100i64), &schema).unwrap())
            .unwrap();
        for _ in 0..10 {
            assert_eq!(sieve.sift(batch(0, 8192)).unwrap().num_rows(), 100);
        }
        assert_eq!(dropped.value(), 10 * (8192 - 100));
        // k >= 0 keeps everything: after the sample it is stopped, so even a batch it would
        // have emptied passes whole.
        let fresh = Sieve::new(Arc::clone(&filter) as _, None, dropped.clone());
        filter
            .update(binary(Arc::clone(&k), Operator::GtEq, lit(0i64), &schema).unwrap())
            .unwrap();
        for _ in 0..8 {
            assert_eq!(fresh.sift(batch(0, 8192)).unwrap().num_rows(), 8192);
        }
        filter
            .update(binary(k, Operator::Lt, lit(0i64), &schema).unwrap())
            .unwrap();
        assert_eq!(fresh.sift(batch(0, 8192)).unwrap().num_rows(), 8192);
    }

    #[test]
    fn the_static_conjuncts_go_first_and_the_filter_is_judged_on_what_they_keep() {
        let schema = batch(0, 1).schema();
        let k = col("k", &schema).unwrap();
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&k)],
            binary(Arc::clone(&k), Operator::Lt, lit(300i64), &schema).unwrap(),
        ));
        let first = binary(Arc::clone(&k), Operator::Lt, lit(1000i64), &schema).unwrap();
        let metrics = ExecutionPlanMetricsSet::new();
        let dropped =
            datafusion::physical_plan::metrics::MetricBuilder::new(&metrics).counter("dropped", 0);
        let sieve = Sieve::new(filter as _, Some(first), dropped.clone());
        // k < 1000 keeps 1,000 rows of each batch, and k < 300 300 of those: 30%, more than
        // a fifth, though only 300 of the 8,192 rows the scan decoded (4%).
        for _ in 0..66 {
            assert_eq!(sieve.sift(batch(0, 8192)).unwrap().num_rows(), 300);
        }
        assert_eq!(dropped.value(), 66 * (8192 - 300));
        // 66,000 rows judged: the filter is stopped, and the batch passes whole (the
        // operators above apply both filters).
        assert_eq!(sieve.sift(batch(0, 8192)).unwrap().num_rows(), 8192);
    }
}
