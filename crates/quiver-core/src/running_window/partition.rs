//! The loop over one partition of the plan: running values carried from row to row and
//! from batch to batch. Under a RANGE frame a row's value is its last peer's (the rows
//! with its partition and order keys), so the last peer group of a batch waits for the
//! next batch, which may hold more of it.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Decimal128Array, Int16Array, Int32Array, Int64Array,
    Int8Array, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Decimal128Type, Int16Type, Int32Type, Int64Type,
    Int8Type, SchemaRef,
};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;

use super::{Kind, Running};

/// What one partition of the plan carries from batch to batch.
pub(super) struct PartitionState {
    partition_by: Keys,
    /// The partition and order keys, where some aggregate takes peers (a RANGE frame).
    peers_by: Option<Keys>,
    running: Vec<Running>,
    /// Each aggregate's value so far in the current partition (`None` before a value).
    values: Vec<Option<i128>>,
    counts: Vec<i64>,
    /// The partition key of the last row given out.
    last_key: Option<OwnedRow>,
    /// The last peer group seen, not given out yet.
    held: Option<RecordBatch>,
    schema: SchemaRef,
}

/// Key expressions and their row encoding, whose equal rows are equal keys.
struct Keys {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    rows: RowConverter,
}

impl Keys {
    fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, input: &SchemaRef) -> Result<Keys> {
        let fields = (exprs.iter())
            .map(|key| Ok(SortField::new(key.data_type(input)?)))
            .collect::<Result<Vec<_>>>()?;
        let rows = RowConverter::new(fields)?;
        Ok(Keys { exprs, rows })
    }

    /// `batch`'s keys, one encoded row per row.
    fn of(&self, batch: &RecordBatch) -> Result<datafusion::arrow::row::Rows> {
        let keys = (self.exprs.iter())
            .map(|key| key.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.rows.convert_columns(&keys)?)
    }

    /// For each row of `batch`, whether its key differs from the row's before it (the
    /// first row's from `before`'s, or it is the first of all); and the last row's key.
    fn starts(
        &self,
        batch: &RecordBatch,
        before: Option<&OwnedRow>,
    ) -> Result<(Vec<bool>, Option<OwnedRow>)> {
        let rows = self.of(batch)?;
        let starts = (0..rows.num_rows())
            .map(|row| match row {
                0 => before.is_none_or(|last| last.row() != rows.row(0)),
                _ => rows.row(row) != rows.row(row - 1),
            })
            .collect();
        let last = rows
            .num_rows()
            .checked_sub(1)
            .map(|row| rows.row(row).owned());
        Ok((starts, last))
    }
}

impl PartitionState {
    /// A state for `running`, partitioned by `partition_by` and, where some aggregate takes
    /// peers, ordered by `order_by`.
    pub fn new(
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<Arc<dyn PhysicalExpr>>,
        running: Vec<Running>,
        input: &SchemaRef,
        schema: SchemaRef,
    ) -> Result<PartitionState> {
        let peers_by = match running.iter().any(|r| r.peers) {
            true => Some(Keys::new([partition_by.clone(), order_by].concat(), input)?),
            false => None,
        };
        Ok(PartitionState {
            partition_by: Keys::new(partition_by, input)?,
            peers_by,
            values: vec![None; running.len()],
            counts: vec![0; running.len()],
            running,
            last_key: None,
            held: None,
            schema,
        })
    }

    /// The rows of `batch` (with those held before it) whose values are known now.
    pub fn take(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let Some(peers_by) = &self.peers_by else {
            return self.extended(&batch, None).map(Some);
        };
        let batch = match self.held.take() {
            Some(held) => concat_batches(&batch.schema(), [&held, &batch])?,
            None => batch,
        };
        let (peers, _) = peers_by.starts(&batch, None)?;
        let last_group = peers.iter().rposition(|&start| start).unwrap_or(0);
        self.held = Some(batch.slice(last_group, batch.num_rows() - last_group));
        if last_group == 0 {
            return Ok(None);
        }
        let out = batch.slice(0, last_group);
        self.extended(&out, Some(&peers[..last_group])).map(Some)
    }

    /// The rows still held, once the input has ended.
    pub fn finish(&mut self) -> Result<Option<RecordBatch>> {
        let Some(held) = self.held.take() else {
            return Ok(None);
        };
        // `take` holds one peer group, a batch's last: no need to encode its keys again.
        let mut peers = vec![false; held.num_rows()];
        if let Some(first) = peers.first_mut() {
            *first = true;
        }
        self.extended(&held, Some(&peers)).map(Some)
    }

    /// `batch` with each aggregate's running value as a column; under a RANGE frame each
    /// row gets its last peer's (`peers`: where each peer group of `batch` starts, every
    /// group whole).
    fn extended(&mut self, batch: &RecordBatch, peers: Option<&[bool]>) -> Result<RecordBatch> {
        let starts = self.partition_starts(batch)?;
        let mut columns = batch.columns().to_vec();
        for (i, running) in self.running.iter().enumerate() {
            let arg = running.arg.evaluate(batch)?.into_array(batch.num_rows())?;
            let peers = peers.filter(|_| running.peers);
            let column = match running.kind {
                Kind::Count => {
                    let count = &mut self.counts[i];
                    let mut counted: Vec<i64> = (0..arg.len())
                        .map(|row| {
                            *count = if starts[row] { 0 } else { *count };
                            *count += i64::from(arg.is_valid(row));
                            *count
                        })
                        .collect();
                    last_peers(&mut counted, peers);
                    Arc::new(Int64Array::from(counted)) as ArrayRef
                }
                kind => {
                    let value = &mut self.values[i];
                    let values = wide_values(&arg);
                    let mut so_far: Vec<Option<i128>> = (values.into_iter().zip(&starts))
                        .map(|(next, &start)| {
                            if start {
                                *value = None;
                            }
                            *value = match (*value, next) {
                                (None, next) => next,
                                (Some(so_far), None) => Some(so_far),
                                (Some(so_far), Some(next)) => Some(combined(kind, so_far, next)),
                            };
                            *value
                        })
                        .collect();
                    last_peers(&mut so_far, peers);
                    narrowed(so_far, &running.output)?
                }
            };
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    /// For each row of `batch`, whether a new partition starts there.
    fn partition_starts(&mut self, batch: &RecordBatch) -> Result<Vec<bool>> {
        // One partition: the running values start empty.
        if self.partition_by.exprs.is_empty() {
            return Ok(vec![false; batch.num_rows()]);
        }
        let (starts, last) = self.partition_by.starts(batch, self.last_key.as_ref())?;
        if last.is_some() {
            self.last_key = last;
        }
        Ok(starts)
    }
}

/// Each value replaced by its peer group's last (`peers`: where each group starts).
fn last_peers<T: Copy>(values: &mut [T], peers: Option<&[bool]>) {
    let Some(peers) = peers else {
        return;
    };
    for row in (0..values.len().saturating_sub(1)).rev() {
        if !peers[row + 1] {
            values[row] = values[row + 1];
        }
    }
}

/// `so_far` and `next` combined by `kind` (sums wrap, as DataFusion's do).
fn combined(kind: Kind, so_far: i128, next: i128) -> i128 {
    match kind {
        Kind::Sum => so_far.wrapping_add(next),
        Kind::Min => so_far.min(next),
        Kind::Max => so_far.max(next),
        Kind::Count => unreachable!("counts are counted apart"),
    }
}

/// The values of `array` (one of `whole`'s types) as `i128`.
fn wide_values(array: &ArrayRef) -> Vec<Option<i128>> {
    fn wide<T: ArrowPrimitiveType>(array: &ArrayRef) -> Vec<Option<i128>>
    where
        T::Native: Into<i128>,
    {
        (array.as_primitive::<T>().iter())
            .map(|v| v.map(Into::into))
            .collect()
    }
    match array.data_type() {
        DataType::Int8 => wide::<Int8Type>(array),
        DataType::Int16 => wide::<Int16Type>(array),
        DataType::Int32 => wide::<Int32Type>(array),
        DataType::Int64 => wide::<Int64Type>(array),
        DataType::Date32 => wide::<Date32Type>(array),
        DataType::Decimal128(_, _) => wide::<Decimal128Type>(array),
        other => unreachable!("Running::of takes no {other}"),
    }
}

/// `values` as an array of `data_type` (one of `whole`'s types; a running min or max
/// stays within its argument's values, a sum wraps as DataFusion's does).
fn narrowed(values: Vec<Option<i128>>, data_type: &DataType) -> Result<ArrayRef> {
    let values = values.into_iter();
    Ok(match data_type {
        DataType::Int8 => Arc::new(values.map(|v| v.map(|v| v as i8)).collect::<Int8Array>()),
        DataType::Int16 => Arc::new(values.map(|v| v.map(|v| v as i16)).collect::<Int16Array>()),
        DataType::Int32 => Arc::new(values.map(|v| v.map(|v| v as i32)).collect::<Int32Array>()),
        DataType::Int64 => Arc::new(values.map(|v| v.map(|v| v as i64)).collect::<Int64Array>()),
        DataType::Date32 => Arc::new(values.map(|v| v.map(|v| v as i32)).collect::<Date32Array>()),
        DataType::Decimal128(precision, scale) => Arc::new(
            values
                .collect::<Decimal128Array>()
                .with_precision_and_scale(*precision, *scale)?,
        ),
        other => unreachable!("Running::of takes no {other}"),
    })
}
