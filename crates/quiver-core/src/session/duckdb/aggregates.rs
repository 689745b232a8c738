//! DuckDB's aggregates that DataFusion lacks and no expression of its own aggregates can
//! write exactly: `product` (a DOUBLE, as DuckDB's; `exp(sum(ln(x)))` would be off in the
//! last digits), `histogram` (a MAP of each value to its count, keys in order) and `mad`
//! (the median absolute deviation). Registered in the session, so they travel to workers
//! in plans as DataFusion's own do.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, MapArray, StructArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Float64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    create_udaf, Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

/// Makes the aggregates known to `context`.
pub fn register(context: &SessionContext) {
    context.register_udaf(create_udaf(
        "product",
        vec![DataType::Float64],
        Arc::new(DataType::Float64),
        Volatility::Immutable,
        Arc::new(|_| Ok(Box::new(Product::default()))),
        Arc::new(vec![DataType::Float64]),
    ));
    context.register_udaf(AggregateUDF::new_from_impl(Histogram::default()));
    context.register_udaf(super::decimal_avg::udaf());
    let values = DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)));
    context.register_udaf(create_udaf(
        "mad",
        vec![DataType::Float64],
        Arc::new(DataType::Float64),
        Volatility::Immutable,
        Arc::new(|_| Ok(Box::new(MedianDeviation::default()))),
        Arc::new(vec![values]),
    ));
}

/// The product of the non-NULL values so far; NULL while there is none.
#[derive(Debug, Default)]
struct Product {
    value: Option<f64>,
}

impl Product {
    fn times(&mut self, values: &ArrayRef) {
        for x in values.as_primitive::<Float64Type>().iter().flatten() {
            self.value = Some(self.value.unwrap_or(1.0) * x);
        }
    }
}

impl Accumulator for Product {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.times(&values[0]);
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.times(&states[0]);
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Float64(self.value)])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.value))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// DuckDB's `histogram(x)`: a MAP from each distinct non-NULL value of `x` to how many rows
/// hold it, keys in ascending order; NULL over no value.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Histogram {
    signature: Signature,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// A MAP of `key` to UBIGINT counts, laid out as DataFusion's `map` function lays one out.
fn counts_of(key: &DataType) -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", key.clone(), false),
        Field::new("value", DataType::UInt64, true),
    ]);
    DataType::Map(
        Arc::new(Field::new("entries", DataType::Struct(entries), false)),
        false,
    )
}

impl AggregateUDFImpl for Histogram {
    fn name(&self) -> &str {
        "histogram"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(counts_of(&arg_types[0]))
    }

    // The partial state is a histogram itself, merged by adding counts.
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let name = format_state_name(args.name, "histogram");
        Ok(vec![Arc::new(Field::new(
            name,
            args.return_type().clone(),
            true,
        ))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Counts {
            map: args.return_type().clone(),
            counts: HashMap::new(),
        }))
    }
}

/// How many times each value was seen, and the MAP type they are given back as.
#[derive(Debug)]
struct Counts {
    map: DataType,
    counts: HashMap<ScalarValue, u64>,
}

impl Counts {
    fn add(&mut self, values: &dyn Array, times: impl Fn(usize) -> u64) -> Result<()> {
        for row in (0..values.len()).filter(|&row| values.is_valid(row)) {
            let value = ScalarValue::try_from_array(values, row)?;
            *self.counts.entry(value).or_default() += times(row);
        }
        Ok(())
    }

    fn histogram(&self) -> Result<ScalarValue> {
        let DataType::Map(entries, _) = &self.map else {
            unreachable!("a histogram is a MAP");
        };
        if self.counts.is_empty() {
            return ScalarValue::try_from(&self.map);
        }
        let mut pairs: Vec<_> = self.counts.iter().collect();
        pairs.sort_by(|a, b| a.0.partial_cmp(b.0).unwrap_or(std::cmp::Ordering::Equal));
        let keys = ScalarValue::iter_to_array(pairs.iter().map(|(key, _)| (*key).clone()))?;
        let counts: ArrayRef = Arc::new(UInt64Array::from_iter_values(
            pairs.iter().map(|(_, count)| **count),
        ));
        let DataType::Struct(fields) = entries.data_type() else {
            unreachable!("a MAP's entries are a struct");
        };
        let entries_array = StructArray::try_new(fields.clone(), vec![keys, counts], None)?;
        let offsets = OffsetBuffer::from_lengths([pairs.len()]);
        let map = MapArray::try_new(Arc::clone(entries), offsets, entries_array, None, false)?;
        Ok(ScalarValue::Map(Arc::new(map)))
    }
}

impl Accumulator for Counts {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(values[0].as_ref(), |_| 1)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let maps = states[0].as_map();
        for row in (0..maps.len()).filter(|&row| maps.is_valid(row)) {
            let entries = maps.value(row);
            let counts = entries.column(1).as_primitive::<UInt64Type>().clone();
            self.add(entries.column(0).as_ref(), |i| counts.value(i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.histogram()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.histogram()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .counts
                .keys()
                .map(|key| key.size() + std::mem::size_of::<u64>())
                .sum::<usize>()
    }
}

/// DuckDB's `mad(x)`: the median of the distances of the values from their median; NULL over
/// no value. Medians of an even count are the mean of the middle two, as DuckDB's are.
#[derive(Debug, Default)]
struct MedianDeviation {
    values: Vec<f64>,
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(match values.len() % 2 {
        1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    })
}

impl Accumulator for MedianDeviation {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<Float64Type>();
        self.values.extend(values.iter().flatten());
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        for list in lists.iter().flatten() {
            self.update_batch(&[list])?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = datafusion::arrow::array::Float64Array::from(self.values.clone());
        Ok(vec![ScalarValue::List(Arc::new(
            datafusion::arrow::array::ListArray::new(
                Arc::new(Field::new_list_field(DataType::Float64, true)),
                OffsetBuffer::from_lengths([values.len()]),
                Arc::new(values),
                None,
            ),
        ))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let Some(center) = median(&mut self.values) else {
            return Ok(ScalarValue::Float64(None));
        };
        let mut distances: Vec<f64> = self.values.iter().map(|x| (x - center).abs()).collect();
        Ok(ScalarValue::Float64(median(&mut distances)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.capacity() * std::mem::size_of::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Float64Array;

    #[test]
    fn product_skips_nulls_and_is_null_over_none() {
        let mut product = Product::default();
        assert_eq!(product.evaluate().unwrap(), ScalarValue::Float64(None));
        let values: ArrayRef = Arc::new(Float64Array::from(vec![Some(2.0), None, Some(-4.0)]));
        product.update_batch(&[values]).unwrap();
        let more: ArrayRef = Arc::new(Float64Array::from(vec![3.0]));
        product.merge_batch(&[more]).unwrap();
        assert_eq!(
            product.evaluate().unwrap(),
            ScalarValue::Float64(Some(-24.0))
        );
    }

    #[test]
    fn histogram_counts_each_value_in_key_order_and_merges_partial_counts() {
        let mut counts = Counts {
            map: counts_of(&DataType::Int64),
            counts: HashMap::new(),
        };
        assert!(counts.evaluate().unwrap().is_null());
        let values: ArrayRef = Arc::new(datafusion::arrow::array::Int64Array::from(vec![
            Some(5),
            None,
            Some(3),
            Some(5),
        ]));
        counts.update_batch(&[values]).unwrap();
        let partial = counts.state().unwrap()[0].to_array().unwrap();
        counts.merge_batch(&[partial]).unwrap();
        let ScalarValue::Map(map) = counts.evaluate().unwrap() else {
            panic!("a histogram is a MAP");
        };
        let entries = map.value(0);
        let keys = entries
            .column(0)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let counts = entries.column(1).as_primitive::<UInt64Type>();
        assert_eq!(keys.values().to_vec(), vec![3, 5]);
        assert_eq!(counts.values().to_vec(), vec![2, 4]);
    }

    #[test]
    fn mad_is_the_median_distance_from_the_median() {
        let mut mad = MedianDeviation::default();
        assert_eq!(mad.evaluate().unwrap(), ScalarValue::Float64(None));
        let values: ArrayRef = Arc::new(Float64Array::from(vec![1.5, 2.5]));
        mad.update_batch(&[values]).unwrap();
        let mut other = MedianDeviation::default();
        let more: ArrayRef = Arc::new(Float64Array::from(vec![Some(10.0), None, Some(3.0)]));
        other.update_batch(&[more]).unwrap();
        let partial = other.state().unwrap()[0].to_array().unwrap();
        mad.merge_batch(&[partial]).unwrap();
        // Median 2.75; distances 1.25, 0.25, 7.25, 0.25 have median 0.75, as DuckDB's of
        // DOUBLEs (of DECIMALs DuckDB truncates the median to 2.7 first and gives 0.7).
        assert_eq!(mad.evaluate().unwrap(), ScalarValue::Float64(Some(0.75)));
    }
}
