//! `date_part` (and `extract`, which DataFusion plans as it) of the hour, minute or second of
//! a timestamp without a time zone, by integer division. DataFusion's own makes a calendar
//! date of every value first (chrono's `from_num_days_from_ce_opt`), to read a clock that
//! does not depend on the date: 5% of ClickBench's q18 (`extract(minute FROM EventTime)` over
//! ten million rows). Every other part, a time zone, a constant, and the function's types,
//! names and rewrites stay DataFusion's own.

use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, PrimitiveArray};
use datafusion::arrow::compute::kernels::cast_utils::IntervalUnit;
use datafusion::arrow::datatypes::{
    ArrowTimestampType, DataType, FieldRef, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions::datetime::date_part::DatePartFunc;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult};
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;

/// This `date_part`, one for every session.
static DATE_PART: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::from(DatePart::default())));

/// Makes `date_part` this one in `context` (under DataFusion's names for it).
pub fn register(context: &SessionContext) {
    context.register_udf(ScalarUDF::clone(&DATE_PART));
}

/// `extract(part FROM t)` as this `date_part`: DataFusion's planner of `extract` names its
/// own function, not the session's.
#[derive(Debug)]
pub struct Extract;

impl ExprPlanner for Extract {
    fn plan_extract(&self, args: Vec<Expr>) -> Result<PlannerResult<Vec<Expr>>> {
        let call = ScalarFunction::new_udf(Arc::clone(&DATE_PART), args);
        Ok(PlannerResult::Planned(Expr::ScalarFunction(call)))
    }
}

/// DataFusion's `date_part`, with the clock's parts of a zone-less timestamp array computed
/// here.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
struct DatePart(DatePartFunc);

impl ScalarUDFImpl for DatePart {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn aliases(&self) -> &[String] {
        self.0.aliases()
    }

    fn signature(&self) -> &Signature {
        self.0.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.0.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.0.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let [ColumnarValue::Scalar(part), ColumnarValue::Array(array)] = args.args.as_slice() {
            if let Some(values) = clock_part(part, array) {
                return Ok(ColumnarValue::Array(values));
            }
        }
        self.0.invoke_with_args(args)
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.0.schema_name(args)
    }

    fn is_strict(&self) -> bool {
        self.0.is_strict()
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.0.simplify(args, info)
    }

    fn preimage(
        &self,
        args: &[Expr],
        literal: &Expr,
        info: &SimplifyContext,
    ) -> Result<PreimageResult> {
        self.0.preimage(args, literal, info)
    }

    fn short_circuits(&self) -> bool {
        self.0.short_circuits()
    }

    fn evaluate_bounds(&self, inputs: &[&Interval]) -> Result<Interval> {
        self.0.evaluate_bounds(inputs)
    }

    fn propagate_constraints(
        &self,
        interval: &Interval,
        inputs: &[&Interval],
    ) -> Result<Option<Vec<Interval>>> {
        self.0.propagate_constraints(interval, inputs)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.0.output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.0.preserves_lex_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.0.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.0.documentation()
    }

    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.0.placement(args)
    }
}

/// The hour, minute or second of each timestamp of `array` when it has no time zone and
/// every value is a date chrono can hold (DataFusion's answer, NULL, otherwise); None for
/// anything else, left to DataFusion.
fn clock_part(part: &ScalarValue, array: &ArrayRef) -> Option<ArrayRef> {
    let part = part.try_as_str().flatten()?;
    // As DataFusion reads the part: quotes dropped, then plurals and synonyms by Arrow.
    let unquoted = (part.strip_prefix(['\'', '"']))
        .and_then(|p| p.strip_suffix(['\'', '"']))
        .unwrap_or(part);
    let part = match IntervalUnit::from_str(unquoted).ok()? {
        IntervalUnit::Hour => ClockPart::Hour,
        IntervalUnit::Minute => ClockPart::Minute,
        IntervalUnit::Second => ClockPart::Second,
        _ => return None,
    };
    let values: Int32Array = match array.data_type() {
        DataType::Timestamp(unit, None) => match unit {
            TimeUnit::Second => part_in::<TimestampSecondType, 1>(array, part),
            TimeUnit::Millisecond => part_in::<TimestampMillisecondType, 1_000>(array, part),
            TimeUnit::Microsecond => part_in::<TimestampMicrosecondType, 1_000_000>(array, part),
            TimeUnit::Nanosecond => part_in::<TimestampNanosecondType, 1_000_000_000>(array, part),
        }?,
        _ => return None,
    };
    Some(Arc::new(values))
}

/// Seconds from 1970 within which every value is a date chrono can hold (its years run
/// from -262143 to 262142): some 253,000 years either way.
const CALENDAR_SECONDS: i64 = 8_000_000_000_000;

#[derive(Clone, Copy)]
enum ClockPart {
    Hour,
    Minute,
    Second,
}

/// `part` of each value of an array counted in `1 / PER_SECOND` of a second.
fn part_in<T: ArrowTimestampType, const PER_SECOND: i64>(
    array: &ArrayRef,
    part: ClockPart,
) -> Option<Int32Array> {
    match part {
        ClockPart::Hour => clock::<T, PER_SECOND, 3600, 24>(array),
        ClockPart::Minute => clock::<T, PER_SECOND, 60, 60>(array),
        ClockPart::Second => clock::<T, PER_SECOND, 1, 60>(array),
    }
}

/// `(value / length) mod MODULUS` of each value, with `length` a part's `SECONDS` in the
/// array's units; floored, as a calendar reads a time before 1970. The divisors are
/// constants, so the compiler multiplies where a division by a variable would take tens of
/// cycles a value (3.5% of ClickBench q18's samples; 0.3% with constants).
fn clock<T: ArrowTimestampType, const PER_SECOND: i64, const SECONDS: i64, const MODULUS: i64>(
    array: &ArrayRef,
) -> Option<Int32Array> {
    let array: &PrimitiveArray<T> = array.as_primitive();
    let limit = CALENDAR_SECONDS.saturating_mul(PER_SECOND).unsigned_abs();
    // Every slot, NULLs' too: one pass the compiler vectorises, and a stray value only sends
    // the batch to DataFusion's kernel.
    if array.values().iter().any(|v| v.unsigned_abs() > limit) {
        return None;
    }
    let length = SECONDS * PER_SECOND;
    Some(array.unary(|v| (v.div_euclid(length).rem_euclid(MODULUS)) as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::arrow::array::{
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
        TimestampSecondArray,
    };
    use datafusion::arrow::datatypes::Field;
    use datafusion::common::config::ConfigOptions;

    /// `date_part(part, array)` by the function `udf`.
    fn run(udf: &dyn ScalarUDFImpl, part: &str, array: ArrayRef) -> ArrayRef {
        let part = ScalarValue::Utf8(Some(part.to_string()));
        let fields = [
            Arc::new(Field::new("part", DataType::Utf8, false)),
            Arc::new(Field::new("t", array.data_type().clone(), true)),
        ];
        let scalars = [Some(&part), None];
        let return_field = udf
            .return_field_from_args(ReturnFieldArgs {
                arg_fields: &fields,
                scalar_arguments: &scalars,
            })
            .unwrap();
        let args = ScalarFunctionArgs {
            number_rows: array.len(),
            args: vec![ColumnarValue::Scalar(part), ColumnarValue::Array(array)],
            arg_fields: fields.to_vec(),
            return_field,
            config_options: Arc::new(ConfigOptions::default()),
        };
        match udf.invoke_with_args(args).unwrap() {
            ColumnarValue::Array(values) => values,
            ColumnarValue::Scalar(_) => panic!("a scalar for an array"),
        }
    }

    /// Around 1970, far before and after it, and NULLs, in seconds.
    fn seconds() -> Vec<Option<i64>> {
        let mut values = vec![None, Some(0), Some(-1), Some(59), Some(-3601), Some(86_399)];
        values.extend((0..200).map(|i| Some(i * 7_919 - 500_000)));
        values.extend([
            Some(1_373_000_000),
            Some(-62_135_596_800),
            Some(253_402_300_799),
        ]);
        values
    }

    fn arrays() -> Vec<ArrayRef> {
        let at =
            |f: &dyn Fn(i64) -> i64| seconds().into_iter().map(|s| s.map(f)).collect::<Vec<_>>();
        vec![
            Arc::new(TimestampSecondArray::from(at(&|s| s))),
            Arc::new(TimestampMillisecondArray::from(at(&|s| s * 1_000 + 999))),
            Arc::new(TimestampMicrosecondArray::from(at(&|s| s * 1_000_000 - 1))),
            // Nanoseconds reach 292 years either way.
            Arc::new(TimestampNanosecondArray::from(at(&|s| {
                (s % 9_000_000_000) * 1_000_000_000 + 5
            }))),
        ]
    }

    #[test]
    fn the_clock_is_datafusions_in_every_unit_before_and_after_1970() {
        let (ours, theirs) = (DatePart::default(), DatePartFunc::new());
        for array in arrays() {
            for part in [
                "hour",
                "minute",
                "second",
                "'minutes'",
                "HOURS",
                "day",
                "epoch",
            ] {
                let expected = run(&theirs, part, Arc::clone(&array));
                assert_eq!(
                    &run(&ours, part, Arc::clone(&array)),
                    &expected,
                    "{part} of {:?}",
                    array.data_type()
                );
            }
            assert!(clock_part(&ScalarValue::from("minute"), &array).is_some());
        }
    }

    #[test]
    fn values_beyond_the_calendar_are_left_to_datafusion() {
        // i64::MAX milliseconds is 292 million years: no date, so NULL.
        let array: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![
            Some(i64::MAX),
            Some(61_000),
        ]));
        assert!(clock_part(&ScalarValue::from("minute"), &array).is_none());
        let minutes = run(&DatePart::default(), "minute", array);
        assert_eq!(
            minutes.as_primitive(),
            &Int32Array::from(vec![None, Some(1)])
        );
    }

    #[test]
    fn a_time_zone_is_left_to_datafusion() {
        let array: ArrayRef =
            Arc::new(TimestampSecondArray::from(vec![Some(0)]).with_timezone("+05:30"));
        assert!(clock_part(&ScalarValue::from("minute"), &array).is_none());
        let minutes = run(&DatePart::default(), "minute", array);
        assert_eq!(minutes.as_primitive(), &Int32Array::from(vec![Some(30)]));
    }

    #[tokio::test]
    async fn extract_and_date_part_are_this_one_in_a_session() {
        use crate::exec::ExecutorKind;
        use crate::session::{QuiverSession, SessionOptions};
        use datafusion::logical_expr::LogicalPlan;

        let session = QuiverSession::new(SessionOptions {
            threads: 1,
            executor: ExecutorKind::DataFusion,
        })
        .unwrap();
        let from = "FROM (VALUES (TIMESTAMP '1969-12-31 23:58:00')) AS v(t)";
        for call in ["extract(minute FROM t)", "date_part('minute', t)"] {
            let sql = format!("SELECT {call} AS m {from}");
            let frame = session.context().sql(&sql).await.unwrap();
            let LogicalPlan::Projection(projection) = frame.logical_plan() else {
                panic!("{sql}: not a projection");
            };
            let Expr::ScalarFunction(function) = projection.expr[0].clone().unalias() else {
                panic!("{sql}: not a function call");
            };
            assert!(
                function.func.inner().is::<DatePart>(),
                "{sql}: DataFusion's own"
            );
            let minute = session.run(&sql).await.unwrap().batches[0]
                .column(0)
                .clone();
            assert_eq!(minute.as_primitive(), &Int32Array::from(vec![58]), "{sql}");
        }
    }
}
