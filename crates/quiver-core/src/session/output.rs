//! What a statement answers: its rows whole (`QueryOutput`) or as they are produced
//! (`QueryStream`), with the statement's metrics; and DESCRIBE's answer.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::error::Result;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{StreamExt, TryStreamExt};
use web_time::Instant;

use crate::metrics::QueryMetrics;
use crate::sql_types::sql_type_name;

/// What a statement returned.
#[derive(Debug)]
pub struct QueryOutput {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub metrics: Arc<QueryMetrics>,
}

/// A statement's answer as it is produced: under DataFusion's executor, rows come while the
/// plan runs, so writing them needs no memory for the whole answer. (The fragments
/// executors merge in memory, so theirs comes whole.)
pub struct QueryStream {
    pub schema: SchemaRef,
    pub batches: SendableRecordBatchStream,
    pub metrics: Arc<QueryMetrics>,
}

impl QueryOutput {
    /// One batch as a whole answer.
    pub(super) fn of(batch: RecordBatch, metrics: Arc<QueryMetrics>) -> Self {
        Self {
            schema: batch.schema(),
            batches: vec![batch],
            metrics,
        }
    }

    pub(super) fn into_stream(self) -> QueryStream {
        QueryStream {
            batches: memory_stream(&self.schema, self.batches),
            schema: self.schema,
            metrics: self.metrics,
        }
    }
}

pub(super) fn memory_stream(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> SendableRecordBatchStream {
    let batches = futures::stream::iter(batches.into_iter().map(Ok));
    Box::pin(RecordBatchStreamAdapter::new(Arc::clone(schema), batches))
}

impl QueryStream {
    /// The whole answer, in memory.
    pub async fn collect(self) -> Result<QueryOutput> {
        Ok(QueryOutput {
            batches: self.batches.try_collect().await?,
            schema: self.schema,
            metrics: self.metrics,
        })
    }

    /// Counts the rows that come out, and the time until the last one, in the metrics;
    /// `after` is told that time.
    pub(super) fn counted(
        self,
        started: Instant,
        after: impl FnOnce(Duration) + Send + 'static,
    ) -> Self {
        let (rows, ended) = (Arc::clone(&self.metrics), Arc::clone(&self.metrics));
        let counted = self.batches.inspect_ok(move |batch| {
            QueryMetrics::add(&rows.rows_out, batch.num_rows() as u64);
        });
        let end = futures::stream::once(async move {
            let elapsed = started.elapsed();
            ended.record_phase("execute", elapsed);
            after(elapsed);
            None
        })
        .filter_map(futures::future::ready);
        Self {
            batches: Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                counted.chain(end),
            )),
            ..self
        }
    }
}

/// DESCRIBE's answer as DuckDB gives it: one row per column with its SQL type name.
pub(super) fn describe_batch(schema: &Schema) -> Result<RecordBatch> {
    let fields = schema.fields();
    let text = |value: &dyn Fn(&Field) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter(fields.iter().map(|f| value(f))))
    };
    Ok(RecordBatch::try_from_iter([
        ("column_name", text(&|f| Some(f.name().clone()))),
        ("column_type", text(&|f| Some(sql_type_name(f.data_type())))),
        (
            "null",
            text(&|f| Some(if f.is_nullable() { "YES" } else { "NO" }.into())),
        ),
        ("key", text(&|_| None)),
        ("default", text(&|_| None)),
        ("extra", text(&|_| None)),
    ])?)
}
