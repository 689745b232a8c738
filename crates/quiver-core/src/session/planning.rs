//! Planning a statement. Its path tables (`'data/*.parquet'`, `read_parquet(…)`) are first
//! made from their listings alone: if the optimised plan then reads listings only, no file
//! is opened at all. Otherwise each table reads its first footer for its file columns, and
//! the statement is planned again. `_path IN (subquery)` filters are answered first, so
//! that their values drop files while listing.

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::FieldRef;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{ScalarValue, TableReference};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::{Statement as SqlStatement, TableFactor};
use datafusion::sql::sqlparser::dialect::{DuckDbDialect, GenericDialect};
use datafusion::sql::sqlparser::parser::Parser;

use super::duckdb::identifiers::{self, Spellings};
use super::duckdb::{
    asof, clauses, columns, from_first, function_names, literals, pivot, precedence, samples,
};
use super::listing_only::answers_from_listing;
use super::relations::{self, path_tables, uses_wildcard, PathTable};
use super::{file_subqueries, virtual_columns, QuiverSession};
use crate::iceberg::{self, IcebergOptions, IcebergRead, IcebergSnapshot, IcebergTable};
use crate::metadata::{MetadataKind, MetadataTable};
use crate::source::ListingOptions;
use crate::table::{as_quiver_table, QuiverTable, TableOptions};
use crate::text::TextTable;

impl QuiverSession {
    /// The physical plan of a planned statement: the one way from logical to physical.
    pub(super) async fn physical(&self, plan: LogicalPlan) -> Result<Arc<dyn ExecutionPlan>> {
        let frame = self.context.execute_logical_plan(plan).await?;
        frame.create_physical_plan().await
    }

    /// The physical plan of a query's plan already optimised (`physical` would optimise
    /// it again).
    pub(super) async fn physical_of_optimized(
        &self,
        optimized: &LogicalPlan,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let state = self.context.state();
        (state.query_planner())
            .create_physical_plan(optimized, &state)
            .await
    }

    /// Plans a statement (see the module's comment).
    pub(super) async fn logical_plan(&self, mut statement: Statement) -> Result<LogicalPlan> {
        self.plan_named_views(&statement).await?;
        let mut order_all = None;
        if let Statement::Statement(inner) = &mut statement {
            self.macros.expand(inner.as_mut())?;
            samples::sample_tables(inner.as_mut())?;
            relations::describe_path_as_query(inner);
            from_first::select_star_when_from_first(inner);
            clauses::duckdb_clauses(inner);
            asof::marked_joins(inner)?;
            order_all = clauses::take_order_by_all(inner.as_mut());
            literals::duckdb_timestamp_literals(inner);
            literals::duckdb_blob_literals(inner);
            precedence::power_binds_tightest(inner);
        }
        let mut statement = self.answer_file_subqueries(statement).await;
        // Once, and after the file subqueries are taken out: they are planned (and expanded)
        // on their own.
        if let Some(inner) = sql_statement(&mut statement) {
            function_names::expand_duckdb_functions(inner);
        }
        let found = self.path_tables_of(&statement)?;
        let planned = self
            .plan_with_path_tables(&statement, &found)
            .await
            .and_then(asof::nearest_matches);
        self.tables.clear();
        match order_all {
            Some(order) => order.apply(planned?),
            None => planned,
        }
    }

    async fn plan_with_path_tables(
        &self,
        statement: &Statement,
        found: &[PathTable],
    ) -> Result<LogicalPlan> {
        let state = self.context.state();
        if found.is_empty() {
            return state
                .statement_to_plan(self.resolved(statement, found).await?)
                .await;
        }
        let named = virtual_columns::names_virtual_column(&statement.to_string());
        let listed = self.list_path_tables(found, named).await?;
        let planned = match wildcard_in(statement) {
            true => None,
            false => match self.resolved(statement, found).await {
                Ok(resolved) => state.statement_to_plan(resolved).await.ok(),
                Err(_) => None,
            },
        };
        if let Some(plan) = planned {
            if state
                .optimize(&plan)
                .is_ok_and(|optimized| answers_from_listing(&optimized))
            {
                return Ok(plan);
            }
        }
        self.complete_path_tables(found, listed).await?;
        let mut statement = self.resolved(statement, found).await?;
        if let (true, Some(inner)) = (named, sql_statement(&mut statement)) {
            virtual_columns::hide_from_wildcards(inner, &|factor: &TableFactor| {
                relations::relation_of(factor, &self.tables)
            });
        }
        state.statement_to_plan(statement).await
    }

    /// `statement` with its identifiers in the case the tables it names store them (see
    /// `identifiers`), as those tables, its path tables `found` among them, are now.
    async fn resolved(&self, statement: &Statement, found: &[PathTable]) -> Result<Statement> {
        let mut statement = statement.clone();
        let Some(inner) = sql_statement(&mut statement) else {
            return Ok(statement);
        };
        let mut spellings = Spellings::default();
        identifiers::add_defined_names(inner, &mut spellings);
        let mut add_columns = |table: &dyn TableProvider| {
            table
                .schema()
                .fields()
                .iter()
                .for_each(|f| spellings.add(f.name()));
        };
        for path_table in found {
            if let Some(table) = self.tables.get(&path_table.key) {
                add_columns(table.as_ref());
            }
        }
        for name in identifiers::named_tables(inner) {
            // A table that is not there is DataFusion's to report.
            if let Ok(table) = self
                .context
                .table_provider(self.table_reference(&name)?)
                .await
            {
                add_columns(table.as_ref());
            }
        }
        identifiers::resolve_identifiers(inner, &spellings)?;
        self.expand_columns(inner).await?;
        Ok(statement)
    }

    /// PIVOT, UNPIVOT and `COLUMNS(…)` written out (see `duckdb::pivot` and
    /// `duckdb::columns`) over the columns each FROM clause plans to, the innermost first.
    async fn expand_columns(&self, statement: &mut SqlStatement) -> Result<()> {
        let with = match &*statement {
            SqlStatement::Query(query) => query.with.as_ref().map(|with| format!("{with} ")),
            _ => None,
        };
        let with = with.as_deref().unwrap_or("");
        while let Some(pending) = pivot::next_pending(statement) {
            let columns = self.columns_of(with, &pending.table).await?;
            let values = match &pending.values_of {
                Some(column) => Some(self.values_of(with, &pending.table, column).await?),
                None => None,
            };
            pivot::write_out(statement, &columns, values.as_deref())?;
        }
        while let Some((index, from)) = columns::next_to_expand(statement) {
            let from: Vec<String> = from.iter().map(ToString::to_string).collect();
            let columns = self.columns_of(with, &from.join(", ")).await?;
            let before = statement.to_string();
            columns::expand(statement, index, &columns)?;
            if statement.to_string() == before {
                return Err(DataFusionError::Plan(format!(
                    "COLUMNS(…) cannot be written out here: {before}"
                )));
            }
        }
        Ok(())
    }

    /// The columns `FROM from` gives (after the statement's CTEs, `with`).
    async fn columns_of(&self, with: &str, from: &str) -> Result<Vec<columns::FromColumn>> {
        let plan = self
            .plan_sql(&format!("{with}SELECT * FROM {from}"))
            .await?;
        let named = |(relation, field): (Option<&TableReference>, &FieldRef)| {
            (
                relation.map(|r| r.table().to_string()),
                field.name().clone(),
            )
        };
        Ok(plan.schema().iter().map(named).collect())
    }

    /// The distinct values of `column` in `from`, in order, as SQL literals (a PIVOT's).
    async fn values_of(&self, with: &str, from: &str, column: &str) -> Result<Vec<String>> {
        let sql = format!("{with}SELECT DISTINCT {column} FROM {from} ORDER BY 1 NULLS LAST");
        let plan = self.plan_sql(&sql).await?;
        let batches = (self.context.execute_logical_plan(plan).await?)
            .collect()
            .await?;
        let mut values = vec![];
        for batch in &batches {
            for row in 0..batch.num_rows() {
                let value = ScalarValue::try_from_array(batch.column(0), row)?;
                values.push(pivot::literal(&value));
            }
        }
        Ok(values)
    }

    async fn plan_sql(&self, sql: &str) -> Result<LogicalPlan> {
        let mut parsed = DFParser::parse_sql_with_dialect(sql, &DuckDbDialect {})?;
        let statement = (parsed.pop_front())
            .ok_or_else(|| DataFusionError::Plan(format!("cannot read {sql}")))?;
        self.context.state().statement_to_plan(statement).await
    }

    /// Each path table made from its listing alone (with the virtual columns when the
    /// statement `named` one), and registered for the planner; an Iceberg table from its
    /// metadata (it is listed by its manifests, not by its folder).
    pub(super) async fn list_path_tables(
        &self,
        found: &[PathTable],
        named: bool,
    ) -> Result<Vec<Option<QuiverTable>>> {
        let s3 = &self.runtime.query().settings.s3;
        let mut listed = Vec::with_capacity(found.len());
        for path_table in found {
            if let Some((read, options)) = &path_table.iceberg {
                let provider = self.iceberg_table(&path_table.patterns[0], *read, options);
                self.tables.insert(path_table.key.clone(), provider.await?);
                listed.push(None);
                continue;
            }
            let options = ListingOptions {
                hive_partitioning: path_table.hive_partitioning,
                s3: s3.clone(),
                nothing_is_empty: path_table.metadata == Some(MetadataKind::Files),
            };
            let patterns = path_table.patterns.clone();
            let table = QuiverTable::list(&self.runtime, patterns, &options, named).await?;
            let provider: Arc<dyn TableProvider> = match (path_table.metadata, &path_table.text) {
                // Metadata tables are whole once listed: their footers are read by the scan.
                (Some(kind), _) => Arc::new(MetadataTable::new(kind, table.files())),
                // Text tables too, once their columns are sniffed from a sample.
                (None, Some(text)) => {
                    Arc::new(TextTable::open(&self.runtime, table.files(), text.clone()).await?)
                }
                (None, None) => Arc::new(table.clone()),
            };
            self.tables.insert(path_table.key.clone(), provider);
            listed.push(Some(table));
        }
        Ok(listed)
    }

    /// The Parquet table `found` names, whole: listed, and its file columns read. A view
    /// whose body is that table alone becomes it (see `lazy_views`).
    pub(super) async fn parquet_table(&self, found: PathTable) -> Result<QuiverTable> {
        let found = [found];
        let made = match self.list_path_tables(&found, false).await {
            Ok(listed) => self.complete_path_tables(&found, listed).await,
            Err(e) => Err(e),
        };
        let table = self.tables.get(&found[0].key);
        self.tables.clear();
        made?;
        let table = table.as_deref().and_then(as_quiver_table).cloned();
        table.ok_or_else(|| DataFusionError::Internal(format!("{} is not Parquet", found[0].key)))
    }

    /// What of the Iceberg table at `location` the statement reads.
    async fn iceberg_table(
        &self,
        location: &str,
        read: IcebergRead,
        iceberg: &IcebergOptions,
    ) -> Result<Arc<dyn TableProvider>> {
        let runtime = &self.runtime;
        Ok(match read {
            IcebergRead::Rows => {
                let state = self.context.state_ref().read().config_options().clone();
                let options = TableOptions::for_statement(&state, &runtime.query().settings);
                Arc::new(IcebergTable::open(runtime, location, iceberg, options).await?)
            }
            IcebergRead::Snapshots => {
                let table = IcebergSnapshot::open(runtime, location, iceberg).await?;
                Arc::new(iceberg::snapshots_table(&table)?)
            }
            IcebergRead::Metadata => {
                let table = IcebergSnapshot::open(runtime, location, iceberg).await?;
                Arc::new(iceberg::metadata_table(runtime, &table).await?)
            }
        })
    }

    /// The listed path tables with their file columns (a footer read each), registered in
    /// their place.
    async fn complete_path_tables(
        &self,
        found: &[PathTable],
        listed: Vec<Option<QuiverTable>>,
    ) -> Result<()> {
        let state = self.context.state_ref().read().config_options().clone();
        let settings = &self.runtime.query().settings;
        for (path_table, table) in found.iter().zip(listed) {
            let Some(table) = table else { continue };
            if path_table.metadata.is_some() || path_table.text.is_some() {
                continue;
            }
            let options = TableOptions {
                schema_override: path_table
                    .schema
                    .as_deref()
                    .map(|s| self.parse_schema(s))
                    .transpose()?,
                union_by_name: path_table.union_by_name,
                ..TableOptions::for_statement(&state, settings)
            };
            let full = table.with_file_columns(&self.runtime, &options).await?;
            self.tables.insert(path_table.key.clone(), Arc::new(full));
        }
        Ok(())
    }

    /// `_path IN (subquery)` with the subquery's answer in its place (see
    /// `file_subqueries`). A subquery that fails on its own (a correlated one), answers
    /// with other than one column, or with too many values, is left as it was.
    async fn answer_file_subqueries(&self, mut statement: Statement) -> Statement {
        let Some(inner) = sql_statement(&mut statement) else {
            return statement;
        };
        file_subqueries::add_join_subqueries(inner);
        let mut answers = vec![];
        for query in file_subqueries::file_subqueries(inner) {
            let subquery =
                Statement::Statement(Box::new(SqlStatement::Query(Box::new(query.clone()))));
            // Boxed: a subquery may hold file subqueries of its own.
            if let Ok(values) = Box::pin(self.single_column_values(subquery)).await {
                answers.push((query, values));
            }
        }
        file_subqueries::substitute(inner, &answers);
        statement
    }

    /// The values of a one-column query, as text.
    async fn single_column_values(&self, statement: Statement) -> Result<Vec<Option<String>>> {
        let plan = self.logical_plan(statement).await?;
        let batches = self
            .context
            .execute_logical_plan(plan)
            .await?
            .collect()
            .await?;
        let mut values = vec![];
        for batch in batches {
            if batch.num_columns() != 1 {
                return Err(DataFusionError::Plan("not one column".into()));
            }
            let column = datafusion::arrow::compute::cast(batch.column(0), &DataType::Utf8)?;
            let column = column.as_string::<i32>();
            values.extend(column.iter().map(|v| v.map(str::to_string)));
            if values.len() > file_subqueries::MAX_VALUES {
                return Err(DataFusionError::Plan("too many values".into()));
            }
        }
        Ok(values)
    }

    /// The path tables a statement names, each once.
    fn path_tables_of(&self, statement: &Statement) -> Result<Vec<PathTable>> {
        let mut found = match statement {
            Statement::Statement(inner) => path_tables(inner.as_ref())?,
            Statement::Explain(explain) => match explain.statement.as_ref() {
                Statement::Statement(inner) => path_tables(inner.as_ref())?,
                _ => vec![],
            },
            _ => vec![],
        };
        let mut seen = std::collections::HashSet::new();
        found.retain(|table| seen.insert(table.key.clone()));
        Ok(found)
    }

    /// `col TYPE, …` in SQL's own type names, mapped to Arrow by DataFusion's planner.
    fn parse_schema(&self, text: &str) -> Result<SchemaRef> {
        let columns = Parser::new(&GenericDialect {})
            .try_with_sql(text)
            .and_then(|mut parser| parser.parse_comma_separated(Parser::parse_column_def))
            .map_err(|e| DataFusionError::Plan(format!("schema '{text}': {e}")))?;
        if columns.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "schema '{text}' names no column"
            )));
        }
        let select = columns
            .iter()
            .map(|c| {
                format!(
                    "CAST(NULL AS {}) AS \"{}\"",
                    c.data_type,
                    c.name.value.replace('"', "\"\"")
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let plan = futures::executor::block_on(
            self.context
                .state()
                .create_logical_plan(&format!("SELECT {select}")),
        )?;
        Ok(Arc::new(plan.schema().as_arrow().clone()))
    }
}

/// Whether a statement (or the one EXPLAIN explains) selects `*` somewhere.
fn wildcard_in(statement: &Statement) -> bool {
    match statement {
        Statement::Statement(inner) => uses_wildcard(inner.as_ref()),
        Statement::Explain(explain) => match explain.statement.as_ref() {
            Statement::Statement(inner) => uses_wildcard(inner.as_ref()),
            _ => true,
        },
        _ => true,
    }
}

/// The SQL statement itself, or the one EXPLAIN explains.
fn sql_statement(statement: &mut Statement) -> Option<&mut SqlStatement> {
    match statement {
        Statement::Statement(inner) => Some(inner.as_mut()),
        Statement::Explain(explain) => match explain.statement.as_mut() {
            Statement::Statement(inner) => Some(inner.as_mut()),
            _ => None,
        },
        _ => None,
    }
}
