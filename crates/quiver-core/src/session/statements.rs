//! The statements a session answers itself, and the dispatch that sends the others to
//! DataFusion: `EXPLAIN COST`, COPY (written as the rows come, or where fragments run),
//! `CALL quiver_index_…`, SUMMARIZE, and file inspection.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::Schema;
use datafusion::error::{DataFusionError, Result};
use datafusion::sql::parser::{CopyToSource, CopyToStatement, DFParser, Statement};
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use futures::TryStreamExt;
use web_time::Instant;

use super::duckdb::{clauses, dialect, pivot, samples};
use super::output::{QueryOutput, QueryStream};
use super::{index_calls, summarize, QuiverSession};
use crate::copy::{self, CopyTarget, Destination, TextFormat, WrittenFile};
use crate::exec::{travelling_fragments, with_build_sides, ExecutorKind};
use crate::index::{build_index, refresh_index, show_index};
use crate::metadata::inspect::{describe_files, FileMetadata};
use crate::metrics::QueryMetrics;
use crate::source::unique_id;

impl QuiverSession {
    /// Runs every `;`-separated statement in order and returns the last one's output.
    pub async fn run(&self, sql: &str) -> Result<QueryOutput> {
        self.run_streaming(sql).await?.collect().await
    }

    /// Runs every `;`-separated statement in order; the last one's answer comes as it is
    /// produced.
    pub async fn run_streaming(&self, sql: &str) -> Result<QueryStream> {
        if let Some(query) = dialect::explain_cost(sql) {
            let (cost, placement) = self.estimate_cost(query).await?;
            let batch = placement.beside(cost.batch(&self.prices())?)?;
            return Ok(QueryOutput::of(batch, self.runtime.metrics()).into_stream());
        }
        let last = self.run_all_but_last(sql).await?;
        self.stream_any(last).await
    }

    /// Runs every statement of `sql` but the last, which it returns, parsed in DuckDB's
    /// words.
    pub(super) async fn run_all_but_last(&self, sql: &str) -> Result<Statement> {
        let sql = samples::rewrite_sample_clauses(&dialect::rewrite_duckdb_tokens(sql)?);
        let sql = dialect::rewrite_summarize(&dialect::rewrite_duckdb_copy(&sql));
        let sql = pivot::simplified_to_standard(&sql);
        let mut statements =
            DFParser::parse_sql_with_dialect(&sql, dialect::parser_dialect(&sql).as_ref())?;
        let last = statements
            .pop_back()
            .ok_or_else(|| DataFusionError::Plan("no SQL statement given".into()))?;
        for statement in statements {
            self.stream_any(statement).await?.collect().await?;
        }
        Ok(last)
    }

    /// The metadata of the files `pattern` names (a path, URL or glob), footers only.
    pub async fn describe_files(&self, pattern: &str) -> Result<Vec<FileMetadata>> {
        self.begin_query()?;
        describe_files(&self.runtime, pattern).await
    }

    /// COPY, the CALLs we answer ourselves, or a statement for DataFusion.
    pub(super) async fn stream_any(&self, statement: Statement) -> Result<QueryStream> {
        let mut inner = match statement {
            Statement::CopyTo(copy) => return Ok(self.run_copy(copy).await?.into_stream()),
            Statement::Statement(inner) => inner,
            other => return self.stream_statement(other).await,
        };
        clauses::session_scoped(&mut inner);
        if let Some(defined) = self.macros.define(&inner) {
            defined?;
            let nothing = RecordBatch::new_empty(Arc::new(Schema::empty()));
            return Ok(QueryOutput::of(nothing, self.runtime.metrics()).into_stream());
        }
        if self.defer_view(&inner).await? {
            let nothing = RecordBatch::new_empty(Arc::new(Schema::empty()));
            return Ok(QueryOutput::of(nothing, self.runtime.metrics()).into_stream());
        }
        if let SqlStatement::Call(function) = inner.as_ref() {
            if let Some(call) = index_calls::index_call(function) {
                return Ok(self.run_index_call(call?).await?.into_stream());
            }
            if let Some(target) = summarize::summarize_call(function) {
                return Ok(self.run_summarize(&target?).await?.into_stream());
            }
        }
        self.stream_statement(Statement::Statement(inner)).await
    }

    /// Runs COPY's query with this session's executor, then writes its result (see
    /// `copy`); answers with the rows and files written. Fanned out, a query that is one
    /// fragment is written by the workers themselves, each its own files; the manifest
    /// that makes them one output is written here, last.
    async fn run_copy(&self, copy: CopyToStatement) -> Result<QueryOutput> {
        // DuckDB takes the format from the target's extension when none is named: a
        // `x.csv` written as Parquet would be a wrong answer, not a missing feature.
        let options: Vec<(String, String)> = (copy.options.iter())
            .map(|(key, value)| (key.clone(), option_text(value)))
            .collect();
        let text = TextFormat::of(&copy.target, copy.stored_as.as_deref(), &options)?;
        let query = match copy.source {
            CopyToSource::Query(query) => SqlStatement::Query(query),
            CopyToSource::Relation(name) => Parser::new(&GenericDialect {})
                .try_with_sql(&format!("SELECT * FROM {name}"))
                .and_then(|mut parser| parser.parse_statement())
                .map_err(|e| DataFusionError::Plan(e.to_string()))?,
        };
        let statement = Statement::Statement(Box::new(query));
        let target = CopyTarget {
            folder: format!("{}/", copy.target.trim_end_matches('/')),
            partition_by: copy.partitioned_by.clone(),
            job: unique_id(),
        };
        let single_file = copy.partitioned_by.is_empty() && !copy.target.ends_with('/');
        if let Some(format) = text {
            if !single_file {
                return Err(DataFusionError::NotImplemented(
                    "COPY writes a folder (PARTITION_BY, or a target ending in /) as Parquet \
                     only; name one CSV or JSON file"
                        .into(),
                ));
            }
            let stream = self.stream_statement(statement).await?;
            let s3 = self.options_now().s3();
            let (schema, metrics) = (stream.schema.clone(), stream.metrics);
            let written = copy::write_text(
                &self.runtime,
                &s3,
                &copy.target,
                &format,
                &schema,
                stream.batches,
            )
            .await?;
            return copy_answer(&[written], metrics);
        }
        let (written, metrics) = match single_file {
            true => {
                let destination = Destination::File(copy.target.clone());
                self.copy_here(statement, destination).await?
            }
            false => match self.write_where_fragments_run(&statement, &target).await? {
                Some(written) => written,
                None => {
                    let destination = Destination::Folder(target.clone());
                    self.copy_here(statement, destination).await?
                }
            },
        };
        let written = match single_file {
            true => written,
            false => {
                copy::commit(&self.runtime, &self.options_now().s3(), &target, written).await?
            }
        };
        copy_answer(&written, metrics)
    }

    /// COPY's query run here, its rows encoded to `destination` as the query produces
    /// them, never held whole.
    async fn copy_here(
        &self,
        statement: Statement,
        destination: Destination,
    ) -> Result<(Vec<WrittenFile>, Arc<QueryMetrics>)> {
        let s3 = self.options_now().s3();
        let mut stream = self.stream_statement(statement).await?;
        let threads = self.context.state_ref().read().config().target_partitions();
        let mut writer = copy::CopyWriter::new(&self.runtime, &s3, destination, &stream.schema)?
            .with_threads(threads);
        while let Some(batch) = stream.batches.try_next().await? {
            writer.write(&batch)?;
        }
        let started = Instant::now();
        let written = writer.finish().await?;
        stream.metrics.record_phase("write", started.elapsed());
        Ok((written, stream.metrics))
    }

    /// With a remote executor, a COPY whose query is a single fragment (scan, filter,
    /// projection) is written where the fragment runs; `None` otherwise.
    async fn write_where_fragments_run(
        &self,
        statement: &Statement,
        target: &CopyTarget,
    ) -> Result<Option<(Vec<WrittenFile>, Arc<QueryMetrics>)>> {
        let Some(runner) = self.remote.as_deref() else {
            return Ok(None);
        };
        if self.options.executor != ExecutorKind::Remote {
            return Ok(None);
        }
        let metrics = self.begin_query()?;
        let plan = self.logical_plan(statement.clone()).await?;
        let mut top = self.physical(plan).await?;
        // Merging partitions is not work when each partition becomes its own files.
        while matches!(top.name(), "CoalescePartitionsExec" | "CoalesceBatchesExec")
            && top.fetch().is_none()
        {
            let child = Arc::clone(top.children()[0]);
            top = child;
        }
        let context = self.context.task_ctx();
        // A join whose build side travels is written by the workers that probe it.
        let top = with_build_sides(top, &context, runner).await?;
        let mut found = Vec::new();
        travelling_fragments(&top, &context, &mut found)?;
        match found.as_slice() {
            [fragment] if Arc::ptr_eq(&fragment.plan, &top) => {
                match runner.write(fragment, target, &context).await {
                    Some(written) => Ok(Some((written?, metrics))),
                    None => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// `CALL quiver_index_build|refresh|show('glob' [, 'to'])` (see `index_calls`).
    async fn run_index_call(
        &self,
        (action, glob, to): (index_calls::IndexAction, String, Option<String>),
    ) -> Result<QueryOutput> {
        let status = self.index(action, &glob, to.as_deref()).await?;
        let batch = index_calls::status_batch(&status)?;
        Ok(QueryOutput::of(batch, self.runtime.metrics()))
    }

    /// Builds, refreshes or shows the index of `glob` (at `to`, or beside the data), with
    /// the session's settings: `CALL quiver_index_…` and `quiver index`.
    pub async fn index(
        &self,
        action: index_calls::IndexAction,
        glob: &str,
        to: Option<&str>,
    ) -> Result<crate::index::IndexStatus> {
        use index_calls::IndexAction;
        self.begin_query()?;
        let runtime = &self.runtime;
        match action {
            IndexAction::Build => build_index(runtime, glob, to).await,
            IndexAction::Refresh => refresh_index(runtime, glob, to).await,
            IndexAction::Show => show_index(runtime, glob, to).await,
        }
    }

    /// SUMMARIZE (see `summarize`): the source's columns, then one aggregate over them.
    async fn run_summarize(&self, target: &str) -> Result<QueryOutput> {
        let source = summarize::source_query(target);
        let parse = |sql: &str| -> Result<Statement> {
            DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?
                .pop_front()
                .ok_or_else(|| DataFusionError::Plan(format!("SUMMARIZE: nothing in {sql}")))
        };
        self.begin_query()?;
        let columns = self.logical_plan(parse(&source)?).await?;
        let columns = columns.schema().as_arrow().clone();
        let mut output = self
            .run_statement(parse(&summarize::summary_query(&columns, &source))?)
            .await?;
        let answer = datafusion::arrow::compute::concat_batches(&output.schema, &output.batches)?;
        let batch = summarize::summary_batch(&columns, &answer)?;
        output.schema = batch.schema();
        output.batches = vec![batch];
        Ok(output)
    }
}

/// COPY's answer: the rows and files it wrote.
fn copy_answer(written: &[WrittenFile], metrics: Arc<QueryMetrics>) -> Result<QueryOutput> {
    let rows: u64 = written.iter().map(|f| f.rows).sum();
    let batch = RecordBatch::try_from_iter([
        ("rows", Arc::new(UInt64Array::from(vec![rows])) as ArrayRef),
        (
            "files",
            Arc::new(UInt64Array::from(vec![written.len() as u64])) as ArrayRef,
        ),
    ])?;
    Ok(QueryOutput::of(batch, metrics))
}

/// A COPY option's value as written, without its quotes.
fn option_text(value: &datafusion::sql::sqlparser::ast::Value) -> String {
    use datafusion::sql::sqlparser::ast::Value;
    match value {
        Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

    fn session() -> QuiverSession {
        QuiverSession::local_two_threads()
    }

    /// The error `sql` fails with, as a person reads it.
    async fn error_of(session: &QuiverSession, sql: &str) -> String {
        let error = session.run(sql).await.expect_err("an error");
        describe(&error)
    }

    #[tokio::test]
    async fn statements_go_to_their_own_answers_and_the_last_one_is_returned() {
        let dir = tempfile::tempdir().unwrap();
        let session = session();
        let file = dir.path().join("t.parquet");
        let copy = format!(
            "COPY (SELECT 7 AS x UNION ALL SELECT 8) TO '{}'",
            file.display()
        );
        let written = session.run(&copy).await.unwrap();
        let rows = written.batches[0]
            .column(0)
            .as_primitive::<UInt64Type>()
            .value(0);
        assert_eq!((written.schema.field(0).name().as_str(), rows), ("rows", 2));
        // Earlier statements run (a setting, a view); the last one answers.
        let sql = format!(
            "SET quiver.coalesce_gap = 0; CREATE VIEW t AS SELECT * FROM '{}'; \
             SELECT sum(x) AS s FROM t",
            file.display()
        );
        let output = session.run(&sql).await.unwrap();
        assert_eq!(output.schema.field(0).name(), "s");
        assert_eq!(session.runtime().query().settings.fetch.coalesce_gap, 0);
        // SUMMARIZE and EXPLAIN COST are answered here, each with its own columns.
        let summary = session.run("SUMMARIZE t").await.unwrap();
        assert_eq!(summary.schema.field(0).name(), "column_name");
        let cost = session.run("EXPLAIN COST SELECT * FROM t").await.unwrap();
        assert_eq!(cost.schema.field(0).name(), "files");
        // DuckDB's temporary tables and views are the session's own.
        let temporary = "CREATE TEMP TABLE u AS SELECT 1 AS y; \
                         CREATE TEMPORARY VIEW w AS SELECT y + 1 AS z FROM u; SELECT z FROM w";
        let output = session.run(temporary).await.unwrap();
        let z = output.batches[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(z.value(0), 2);
    }

    #[tokio::test]
    async fn what_a_statement_cannot_do_is_an_error_that_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let session = session();
        let avro = format!(
            "COPY (SELECT 1) TO '{}' STORED AS AVRO",
            dir.path().join("t.avro").display()
        );
        assert!(error_of(&session, &avro)
            .await
            .contains("COPY writes Parquet, CSV and JSON, not avro"));
        let glob = format!("{}/*.parquet", dir.path().display());
        let show = format!("CALL quiver_index_show('{glob}')");
        assert!(
            error_of(&session, &show).await.contains("no index at"),
            "the index call ran"
        );
        let set = error_of(&session, "SET quiver.coalesce_gap = 'abc'").await;
        assert!(set.starts_with("quiver.coalesce_gap"), "{set}");
        assert!(error_of(&session, "").await.contains("no SQL statement"));
    }
}
