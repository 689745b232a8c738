//! `avg` of a DECIMAL as DuckDB computes it: the exact sum of the unscaled values and their
//! count, divided once at the end as a DOUBLE. Casting every value to DOUBLE and averaging
//! those (what DataFusion's own `avg` offers for a DOUBLE answer) rounds every value and
//! pays a software 128-bit-to-double conversion per row: a tenth of TPC-H q01.
//!
//! The analyzer rule in `typed` puts it in place of `avg` where the argument fits; it is
//! registered under its own name so that plans sent to workers find it, and shows itself
//! as `avg(...)` so that column names stay the user's.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float64Array, UInt64Array,
};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, FieldRef, UInt64Type, DECIMAL128_MAX_PRECISION,
};
use datafusion::common::{internal_err, plan_err, Result, ScalarValue};
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::logical_expr::expr::{AggregateFunctionParams, WindowFunctionParams};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF,
    Signature, Volatility,
};

/// The name plans carry; users write `avg`.
pub const NAME: &str = "quiver_decimal_avg";

/// Whether `avg` over `data_type` can be this one: a DECIMAL whose sum of 10^13 values
/// still fits 128 bits (the headroom DataFusion's own `avg` keeps).
pub fn averages(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Decimal128(precision, _) if *precision <= 25)
}

pub fn udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(DecimalAverage {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DecimalAverage {
    signature: Signature,
}

/// The scale of the argument, whose unscaled sum is divided by 10^scale at the end.
fn scale_of(data_type: &DataType) -> Result<i8> {
    match data_type {
        DataType::Decimal128(_, scale) => Ok(*scale),
        other => internal_err!("{NAME} averages DECIMALs, not {other}"),
    }
}

impl AggregateUDFImpl for DecimalAverage {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    // Called by name, it takes only what `avg` would give it: a plan error, not an internal
    // one at run time, and no sum that could overflow.
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t] if averages(t) => Ok(DataType::Float64),
            _ => plan_err!("{NAME} averages DECIMALs of at most 25 digits; write avg(...)"),
        }
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        avg_udaf().schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        avg_udaf().display_name(params)
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> Result<String> {
        avg_udaf().human_display(params)
    }

    fn window_function_schema_name(&self, params: &WindowFunctionParams) -> Result<String> {
        avg_udaf().window_function_schema_name(params)
    }

    fn window_function_display_name(&self, params: &WindowFunctionParams) -> Result<String> {
        avg_udaf().window_function_display_name(params)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let scale = scale_of(args.input_fields[0].data_type())?;
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "count"),
                DataType::UInt64,
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "sum"),
                DataType::Decimal128(DECIMAL128_MAX_PRECISION, scale),
                true,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return internal_err!("{NAME} is not for DISTINCT");
        }
        let scale = scale_of(args.expr_fields[0].data_type())?;
        Ok(Box::new(Mean {
            scale,
            sum: 0,
            count: 0,
        }))
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !args.is_distinct
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let scale = scale_of(args.expr_fields[0].data_type())?;
        Ok(Box::new(Means::new(scale)))
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// `sum / 10^scale / count` as DuckDB divides it; NULL over no values.
fn average(sum: i128, count: u64, scale: i8) -> Option<f64> {
    (count > 0).then(|| sum as f64 / (count as f64 * 10f64.powi(scale.into())))
}

/// The running sum and count of one average (no GROUP BY, or a window's frame).
#[derive(Debug)]
struct Mean {
    scale: i8,
    sum: i128,
    count: u64,
}

impl Accumulator for Mean {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for value in values[0].as_primitive::<Decimal128Type>().iter().flatten() {
            self.sum = self.sum.wrapping_add(value);
            self.count += 1;
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for value in values[0].as_primitive::<Decimal128Type>().iter().flatten() {
            self.sum = self.sum.wrapping_sub(value);
            self.count -= 1;
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let counts = states[0].as_primitive::<UInt64Type>();
        let sums = states[1].as_primitive::<Decimal128Type>();
        for (count, sum) in counts.iter().zip(sums.iter()) {
            self.count += count.unwrap_or(0);
            self.sum = self.sum.wrapping_add(sum.unwrap_or(0));
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.count)),
            ScalarValue::Decimal128(Some(self.sum), DECIMAL128_MAX_PRECISION, self.scale),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(average(
            self.sum, self.count, self.scale,
        )))
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }
}

/// The sums and counts of every group; a group that saw no value averages to NULL.
#[derive(Debug)]
struct Means {
    scale: i8,
    sums: Vec<i128>,
    counts: Vec<u64>,
}

impl Means {
    fn new(scale: i8) -> Self {
        Means {
            scale,
            sums: vec![],
            counts: vec![],
        }
    }

    fn grow(&mut self, total_groups: usize) {
        self.sums.resize(total_groups, 0);
        self.counts.resize(total_groups, 0);
    }

    fn add(&mut self, group: usize, sum: i128, count: u64) {
        self.sums[group] = self.sums[group].wrapping_add(sum);
        self.counts[group] += count;
    }
}

/// Whether `row` passes an aggregate's FILTER (a NULL does not).
fn kept(filter: Option<&BooleanArray>, row: usize) -> bool {
    filter.is_none_or(|f| f.is_valid(row) && f.value(row))
}

impl GroupsAccumulator for Means {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        groups: &[usize],
        filter: Option<&BooleanArray>,
        total_groups: usize,
    ) -> Result<()> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let unscaled = values.values();
        self.grow(total_groups);
        // Without a FILTER, only the rows that hold a value are visited, by their bits.
        match (values.nulls(), filter) {
            (None, None) => {
                for (&group, &value) in groups.iter().zip(unscaled.iter()) {
                    self.add(group, value, 1);
                }
            }
            (Some(nulls), None) => {
                for row in nulls.valid_indices() {
                    self.add(groups[row], unscaled[row], 1);
                }
            }
            (_, Some(filter)) => {
                for (row, &group) in groups.iter().enumerate() {
                    if values.is_valid(row) && kept(Some(filter), row) {
                        self.add(group, unscaled[row], 1);
                    }
                }
            }
        }
        Ok(())
    }

    fn merge_batch(
        &mut self,
        states: &[ArrayRef],
        groups: &[usize],
        total_groups: usize,
    ) -> Result<()> {
        let counts = states[0].as_primitive::<UInt64Type>();
        let sums = states[1].as_primitive::<Decimal128Type>();
        self.grow(total_groups);
        for (row, &group) in groups.iter().enumerate() {
            if counts.is_valid(row) && sums.is_valid(row) {
                self.add(group, sums.value(row), counts.value(row));
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let averages: Float64Array = (sums.into_iter().zip(counts))
            .map(|(sum, count)| average(sum, count, self.scale))
            .collect();
        Ok(Arc::new(averages))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        Ok(vec![
            Arc::new(UInt64Array::from(counts)),
            Arc::new(sum_array(sums, self.scale)?),
        ])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let counted = |row: usize| values.is_valid(row) && kept(filter, row);
        let counts: UInt64Array = (0..values.len())
            .map(|row| Some(counted(row) as u64))
            .collect();
        let sums = (0..values.len()).map(|row| if counted(row) { values.value(row) } else { 0 });
        Ok(vec![
            Arc::new(counts),
            Arc::new(sum_array(sums.collect(), self.scale)?),
        ])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i128>() + self.counts.capacity() * size_of::<u64>()
    }
}

/// Unscaled sums as the state's DECIMAL column.
fn sum_array(sums: Vec<i128>, scale: i8) -> Result<Decimal128Array> {
    Ok(Decimal128Array::from(sums).with_precision_and_scale(DECIMAL128_MAX_PRECISION, scale)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimals(values: &[Option<i128>], scale: i8) -> ArrayRef {
        let array = Decimal128Array::from(values.to_vec());
        Arc::new(array.with_precision_and_scale(15, scale).unwrap())
    }

    fn floats(array: &ArrayRef) -> Vec<Option<f64>> {
        array
            .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
            .iter()
            .collect()
    }

    #[test]
    fn groups_average_the_exact_sum_and_skip_nulls_and_filtered_rows() {
        let mut means = Means::new(2);
        // 1.50, 2.00, 3.50 in group 0; NULL and a filtered-out 9.99 in group 1.
        let values = decimals(&[Some(150), Some(200), None, Some(350), Some(999)], 2);
        let filter = BooleanArray::from(vec![true, true, true, true, false]);
        means
            .update_batch(&[values], &[0, 0, 1, 0, 1], Some(&filter), 3)
            .unwrap();
        // No filter, a NULL: group 2 gets 1.00 only.
        let values = decimals(&[None, Some(100), None], 2);
        means.update_batch(&[values], &[1, 2, 2], None, 3).unwrap();
        let averages = means.evaluate(EmitTo::All).unwrap();
        assert_eq!(floats(&averages), vec![Some(7.0 / 3.0), None, Some(1.0)]);
    }

    #[test]
    fn partial_states_merge_to_the_same_average() {
        let values = decimals(&[Some(1), Some(2), Some(4), None], 1);
        let mut left = Means::new(1);
        left.update_batch(std::slice::from_ref(&values), &[0, 1, 0, 1], None, 2)
            .unwrap();
        // The same rows as states one by one, as a skipped partial aggregation sends them.
        let right = Means::new(1);
        let states = right.convert_to_state(&[values], None).unwrap();
        let mut merged = Means::new(1);
        merged
            .merge_batch(&left.state(EmitTo::All).unwrap(), &[0, 1], 2)
            .unwrap();
        merged.merge_batch(&states, &[0, 1, 0, 1], 2).unwrap();
        let averages = merged.evaluate(EmitTo::All).unwrap();
        assert_eq!(floats(&averages), vec![Some(0.25), Some(0.2)]);
    }

    #[test]
    fn a_sliding_frame_retracts_what_leaves_it() {
        let mut mean = Mean {
            scale: 0,
            sum: 0,
            count: 0,
        };
        mean.update_batch(&[decimals(&[Some(1), Some(2), Some(6)], 0)])
            .unwrap();
        mean.retract_batch(&[decimals(&[Some(1), None], 0)])
            .unwrap();
        assert_eq!(mean.evaluate().unwrap(), ScalarValue::Float64(Some(4.0)));
        mean.retract_batch(&[decimals(&[Some(2), Some(6)], 0)])
            .unwrap();
        assert_eq!(mean.evaluate().unwrap(), ScalarValue::Float64(None));
    }

    #[test]
    fn only_decimals_with_room_for_the_sum() {
        assert!(averages(&DataType::Decimal128(15, 2)));
        assert!(!averages(&DataType::Decimal128(38, 10)));
        assert!(!averages(&DataType::Float64));
        // Called by name over anything else: a plan error that says what to write.
        let wide = udaf().return_type(&[DataType::Decimal128(38, 10)]);
        assert!(wide.unwrap_err().to_string().contains("write avg"));
        assert!(udaf().return_type(&[DataType::Utf8]).is_err());
    }
}
