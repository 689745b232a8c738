//! DuckDB's small functions that DataFusion lacks, one row at a time: each is a plain Rust
//! function of its arguments' values (`text`, `bytes`, `lists`), made a DataFusion function
//! here, once. They are not where queries spend their time (distances between two strings,
//! encodings, paths), and a vectorised kernel each would be much code for no speed.

use std::ops::RangeInclusive;
use std::sync::Arc;

use datafusion::arrow::array::new_empty_array;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::prelude::SessionContext;

/// One function: its names (DuckDB's first), how many arguments it takes, its result's type
/// from its arguments' types and constant values, and its value of one row's arguments.
#[derive(Debug)]
pub struct RowFunction {
    pub names: &'static [&'static str],
    pub arity: RangeInclusive<usize>,
    pub returns: fn(&[DataType], &[Option<&ScalarValue>]) -> Result<DataType>,
    pub eval: fn(&[ScalarValue]) -> Result<ScalarValue>,
    /// A NULL argument gives NULL without `eval` (most functions); else `eval` sees it.
    pub strict: bool,
}

/// A function of fixed result type.
macro_rules! returns {
    ($t:expr) => {
        |_, _| Ok($t)
    };
}
pub(crate) use returns;

/// Makes `functions` known to `context` (and so to plans decoded in it).
pub fn register(context: &SessionContext, functions: &'static [RowFunction]) {
    for function in functions {
        context.register_udf(ScalarUDF::from(RowUdf {
            aliases: function.names[1..].iter().map(|n| n.to_string()).collect(),
            signature: Signature::variadic_any(Volatility::Immutable),
            function,
        }));
    }
}

#[derive(Debug)]
struct RowUdf {
    aliases: Vec<String>,
    signature: Signature,
    function: &'static RowFunction,
}

/// A function is known by its name (DuckDB's, unique among them).
impl PartialEq for RowUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for RowUdf {}

impl std::hash::Hash for RowUdf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl ScalarUDFImpl for RowUdf {
    fn name(&self) -> &str {
        self.function.names[0]
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.checked(arg_types.len())?;
        (self.function.returns)(arg_types, &vec![None; arg_types.len()])
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.checked(args.arg_fields.len())?;
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let returns = (self.function.returns)(&types, args.scalar_arguments)?;
        Ok(Arc::new(Field::new(self.name(), returns, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let returns = args.return_field.data_type().clone();
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let values = (arrays.iter())
                .map(|array| ScalarValue::try_from_array(array, row))
                .collect::<Result<Vec<_>>>()?;
            let value = if self.function.strict && values.iter().any(ScalarValue::is_null) {
                ScalarValue::try_from(&returns)?
            } else {
                (self.function.eval)(&values)?
            };
            // A value of a close type (Utf8 for Utf8View, say) is made the declared one.
            out.push(if value.data_type() == returns {
                value
            } else {
                value.cast_to(&returns)?
            });
        }
        if out.is_empty() {
            return Ok(ColumnarValue::Array(new_empty_array(&returns)));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

impl RowUdf {
    fn checked(&self, arguments: usize) -> Result<()> {
        let arity = &self.function.arity;
        if arity.contains(&arguments) {
            return Ok(());
        }
        let wanted = if arity.start() == arity.end() {
            arity.start().to_string()
        } else {
            format!("{} to {}", arity.start(), arity.end())
        };
        plan_err!("{} takes {wanted} arguments, not {arguments}", self.name())
    }
}

/// The text of a string value (any of Arrow's string types).
pub fn text(value: &ScalarValue) -> Result<&str> {
    match value.try_as_str() {
        Some(Some(text)) => Ok(text),
        _ => exec_err!("expected text, got {}", value.data_type()),
    }
}

/// An integer value as i64 (any integer type, or a number that casts).
pub fn int(value: &ScalarValue) -> Result<i64> {
    match value.cast_to(&DataType::Int64)? {
        ScalarValue::Int64(Some(n)) => Ok(n),
        other => exec_err!("expected an integer, got {other}"),
    }
}

/// A number as f64.
pub fn float(value: &ScalarValue) -> Result<f64> {
    match value.cast_to(&DataType::Float64)? {
        ScalarValue::Float64(Some(n)) => Ok(n),
        other => exec_err!("expected a number, got {other}"),
    }
}

/// The bytes of a BLOB or the UTF-8 of a string.
pub fn bytes(value: &ScalarValue) -> Result<&[u8]> {
    match value {
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => Ok(b),
        other => Ok(text(other)?.as_bytes()),
    }
}

/// A list of `element`s, as DataFusion types lists.
pub fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// A value as text, as a cast to VARCHAR writes it.
pub fn value_text(value: &ScalarValue) -> String {
    match value.try_as_str() {
        Some(Some(text)) => text.to_string(),
        _ => value.to_string(),
    }
}

pub fn utf8(text: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(text.into()))
}
