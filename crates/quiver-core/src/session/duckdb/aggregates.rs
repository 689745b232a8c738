//! DuckDB's aggregates that DataFusion lacks and no expression of its own aggregates can
//! write exactly: `product` (a DOUBLE, as DuckDB's; `exp(sum(ln(x)))` would be off in the
//! last digits). Registered in the session, so they travel to workers in plans as
//! DataFusion's own do.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{create_udaf, Accumulator, Volatility};
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
}
