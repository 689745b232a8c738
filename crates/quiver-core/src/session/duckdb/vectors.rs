//! DuckDB's measures between two lists of numbers, which DataFusion lacks: the dot (inner)
//! product and its negative, cosine similarity and cosine distance, under their `list_*` and
//! `array_*` names. A NULL list gives NULL; lists of two lengths are an error, as in DuckDB.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray, PrimitiveBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Float32Type, Float64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Measure {
    Dot,
    NegativeDot,
    CosineSimilarity,
    CosineDistance,
}

/// Each measure by DuckDB's names for it.
const NAMES: [(Measure, &[&str]); 4] = [
    (
        Measure::Dot,
        &[
            "list_dot_product",
            "list_inner_product",
            "array_dot_product",
            "array_inner_product",
        ],
    ),
    (
        Measure::NegativeDot,
        &[
            "list_negative_dot_product",
            "list_negative_inner_product",
            "array_negative_dot_product",
            "array_negative_inner_product",
        ],
    ),
    (
        Measure::CosineSimilarity,
        &["list_cosine_similarity", "array_cosine_similarity"],
    ),
    (
        Measure::CosineDistance,
        &["list_cosine_distance", "array_cosine_distance"],
    ),
];

/// Makes the measures known to `context` (and so to plans decoded in it).
pub fn register(context: &SessionContext) {
    for (measure, names) in NAMES {
        context.register_udf(ScalarUDF::from(VectorMeasure {
            name: names[0],
            aliases: names[1..].iter().map(|n| n.to_string()).collect(),
            measure,
            signature: Signature::any(2, Volatility::Immutable),
        }));
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct VectorMeasure {
    name: &'static str,
    aliases: Vec<String>,
    measure: Measure,
    signature: Signature,
}

impl ScalarUDFImpl for VectorMeasure {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// FLOAT lists give a FLOAT, computed in FLOAT as DuckDB does; any other numbers a DOUBLE.
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(
            if arg_types
                .iter()
                .all(|t| element(t) == Some(&DataType::Float32))
            {
                DataType::Float32
            } else {
                DataType::Float64
            },
        )
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match args.return_field.data_type() {
            DataType::Float32 => Arc::new(self.measure_rows::<Float32Type>(&arrays)?),
            _ => Arc::new(self.measure_rows::<Float64Type>(&arrays)?),
        };
        Ok(ColumnarValue::Array(out))
    }
}

impl VectorMeasure {
    /// The measure of each row's two lists, computed in `T`.
    fn measure_rows<T: ArrowPrimitiveType>(&self, arrays: &[ArrayRef]) -> Result<PrimitiveArray<T>>
    where
        T::Native: Real,
    {
        let lists = DataType::List(Arc::new(Field::new_list_field(T::DATA_TYPE, true)));
        let (left, right) = (cast(&arrays[0], &lists)?, cast(&arrays[1], &lists)?);
        let (left, right) = (left.as_list::<i32>(), right.as_list::<i32>());
        let mut out = PrimitiveBuilder::<T>::with_capacity(left.len());
        for row in 0..left.len() {
            if left.is_null(row) || right.is_null(row) {
                out.append_null();
                continue;
            }
            let (a, b) = (left.value(row), right.value(row));
            let (a, b) = (a.as_primitive::<T>(), b.as_primitive::<T>());
            if a.len() != b.len() {
                return exec_err!(
                    "{}: the lists have {} and {} elements; they must be as long",
                    self.name,
                    a.len(),
                    b.len()
                );
            }
            if a.null_count() > 0 || b.null_count() > 0 {
                out.append_null();
                continue;
            }
            out.append_value(self.measure.of(a.values(), b.values()));
        }
        Ok(out.finish())
    }
}

impl Measure {
    fn of<R: Real>(self, a: &[R], b: &[R]) -> R {
        let dot = a.iter().zip(b).fold(R::ZERO, |sum, (x, y)| sum + *x * *y);
        let squares = |v: &[R]| v.iter().fold(R::ZERO, |sum, x| sum + *x * *x);
        // One root of the product, as DuckDB takes it (in FLOAT, two roots differ in the
        // sixth digit).
        let cosine = || dot / (squares(a) * squares(b)).sqrt();
        match self {
            Measure::Dot => dot,
            Measure::NegativeDot => R::ZERO - dot,
            Measure::CosineSimilarity => cosine(),
            Measure::CosineDistance => R::ONE - cosine(),
        }
    }
}

/// FLOAT and DOUBLE, as the measures compute in them.
trait Real:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// The element type of a list type.
fn element(data_type: &DataType) -> Option<&DataType> {
    match data_type {
        DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
            Some(field.data_type())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Float64Array;

    async fn value(sql: &str) -> Result<Option<f64>> {
        let context = SessionContext::new();
        register(&context);
        let batches = context.sql(sql).await?.collect().await?;
        let column = batches[0].column(0).as_any().downcast_ref::<Float64Array>();
        Ok(column.and_then(|c| (!c.is_null(0)).then(|| c.value(0))))
    }

    #[tokio::test]
    async fn measures_of_two_lists() {
        let dot = value("SELECT list_dot_product([1, 2, 3], [1, 2, 3])").await;
        assert_eq!(dot.unwrap(), Some(14.0));
        let negative = value("SELECT array_negative_inner_product([1, 2], [3, 4])").await;
        assert_eq!(negative.unwrap(), Some(-11.0));
        let similar = value("SELECT list_cosine_similarity([1, 2, 3], [1, 2, 3])").await;
        assert!((similar.unwrap().unwrap() - 1.0).abs() < 1e-12);
        let distance = value("SELECT array_cosine_distance([1.0, 0.0], [0.0, 1.0])").await;
        assert!((distance.unwrap().unwrap() - 1.0).abs() < 1e-12);
        let null = value("SELECT list_dot_product(NULL, [1.0])").await;
        assert_eq!(null.unwrap(), None);
        let uneven = value("SELECT list_dot_product([1, 2], [1])").await;
        assert!(uneven.unwrap_err().to_string().contains("1 elements"));
    }
}
