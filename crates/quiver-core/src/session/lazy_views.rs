//! Views planned when a statement first names them. A script of `CREATE VIEW t AS SELECT *
//! FROM read_parquet('…')`, one per table, read every table's footer before its first
//! query, and a query names a few of them: TPC-DS's 24 views cost 28 ms of a fresh
//! process's 34 ms before its first statement (a round trip each on S3). A view is checked
//! when it is created (its paths listed, so that a wrong path is an error there, as in
//! DuckDB; the tables it names known), and planned, its footers read, when a statement
//! first names it or reads the information schema. A view DataFusion must see at once (a
//! column list, TEMPORARY, IF NOT EXISTS, a body with WITH or a table function) is planned
//! as it is created. A view that is a path table alone is that table under its name.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use datafusion::common::TableReference;
use datafusion::error::{DataFusionError, Result};
use datafusion::sql::parser::Statement;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{
    CreateTableOptions, CreateView, ObjectName, ObjectType, Query, SetExpr,
    Statement as SqlStatement, TableFactor, Visit, Visitor,
};

use super::relations::{path_table, path_tables, PathTable};
use super::QuiverSession;

/// The views created and not yet planned, by their full name (`catalog.schema.table`).
#[derive(Debug, Default)]
pub(super) struct LazyViews {
    pending: Mutex<HashMap<String, Statement>>,
}

impl LazyViews {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Statement>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl QuiverSession {
    /// Keeps `statement`, a `CREATE VIEW` that can wait (see the module's comment), to be
    /// planned when first named; `false` when it must be planned now.
    pub(super) async fn defer_view(&self, statement: &SqlStatement) -> Result<bool> {
        let SqlStatement::CreateView(view) = statement else {
            return Ok(false);
        };
        if !can_wait(view) || !self.names_known(&view.query)? {
            return Ok(false);
        }
        let name = self.table_reference(&view.name)?;
        let key = self.full_name(&name);
        let exists = self.context.table_exist(name.clone())?;
        if !view.or_replace && (exists || self.views.pending().contains_key(&key)) {
            return Err(DataFusionError::Execution(format!(
                "Table '{name}' already exists"
            )));
        }
        // Its paths are listed now: a wrong path is an error where it is written.
        self.begin_query()?;
        let found = path_tables(view.query.as_ref())?;
        let listed = self.list_path_tables(&found, false).await;
        self.tables.clear();
        listed?;
        if exists {
            self.context.deregister_table(name)?;
        }
        let mut replacing = view.clone();
        replacing.or_replace = true;
        let create = Statement::Statement(Box::new(SqlStatement::CreateView(replacing)));
        self.views.pending().insert(key, create);
        Ok(true)
    }

    /// Plans the waiting views `statement` names: all of them when it reads the information
    /// schema (SHOW TABLES, DESCRIBE) or drops a view.
    pub(super) async fn plan_named_views(&self, statement: &Statement) -> Result<()> {
        if self.views.pending().is_empty() {
            return Ok(());
        }
        let named = self.named_views(statement)?;
        for key in named {
            let Some(create) = self.views.pending().remove(&key) else {
                continue; // planned meanwhile, as a view another one names
            };
            let planned = match only_a_path_table(&create) {
                Some((name, found)) => self.register_view(&name, found, &create).await,
                // Boxed: the view's own query may name waiting views.
                None => match Box::pin(self.logical_plan(create.clone())).await {
                    Ok(plan) => self.context.execute_logical_plan(plan).await.map(drop),
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = planned {
                self.views.pending().insert(key, create);
                return Err(e);
            }
        }
        Ok(())
    }

    /// The table `found` under the view's name, with `create` as its definition: what
    /// DataFusion's view of it would read, without its plan (see `only_a_path_table`).
    async fn register_view(
        &self,
        name: &ObjectName,
        found: PathTable,
        create: &Statement,
    ) -> Result<()> {
        let table = self.parquet_table(found).await?;
        let table = Arc::new(table.named_by_view(create.to_string()));
        let name = self.table_reference(name)?;
        self.context.register_table(name, table).map(drop)
    }

    /// The full names of the waiting views `statement` may read.
    fn named_views(&self, statement: &Statement) -> Result<Vec<String>> {
        let everything = match statement {
            Statement::Statement(inner) => matches!(
                inner.as_ref(),
                SqlStatement::Drop {
                    object_type: ObjectType::View | ObjectType::Table,
                    ..
                }
            ),
            _ => false,
        };
        let state = self.context.state_ref();
        let references = state.read().resolve_table_references(statement)?;
        let information_schema = references
            .iter()
            .any(|r| r.schema() == Some("information_schema"));
        if everything || information_schema {
            return Ok(self.views.pending().keys().cloned().collect());
        }
        Ok(references.iter().map(|r| self.full_name(r)).collect())
    }

    /// Whether every table `query` names, other than by path, is a table or view of the
    /// session's (or one waiting): else it is planned now, for DataFusion's own error.
    fn names_known(&self, query: &Query) -> Result<bool> {
        let mut names = Names::default();
        let _ = query.visit(&mut names);
        if names.must_plan {
            return Ok(false);
        }
        for name in names.tables {
            let name = self.table_reference(&name)?;
            let waiting = self.views.pending().contains_key(&self.full_name(&name));
            if !waiting && !self.context.table_exist(name)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(super) fn table_reference(
        &self,
        name: &datafusion::sql::sqlparser::ast::ObjectName,
    ) -> Result<TableReference> {
        let state = self.context.state_ref();
        let normalize = state
            .read()
            .config_options()
            .sql_parser
            .enable_ident_normalization;
        object_name_to_table_reference(name.clone(), normalize)
    }

    /// `catalog.schema.table`, with the session's defaults for the parts not given.
    fn full_name(&self, name: &TableReference) -> String {
        let state = self.context.state_ref();
        let state = state.read();
        let defaults = &state.config_options().catalog;
        name.clone()
            .resolve(&defaults.default_catalog, &defaults.default_schema)
            .to_string()
    }
}

/// Whether DataFusion's view would be the same made later: a plain `CREATE [OR REPLACE]
/// VIEW name AS query`.
fn can_wait(view: &CreateView) -> bool {
    !view.materialized
        && !view.temporary
        && !view.or_alter
        && !view.if_not_exists
        && view.columns.is_empty()
        && view.to.is_none()
        && view.params.is_none()
        && matches!(view.options, CreateTableOptions::None)
}

/// The tables a query names other than by path; `must_plan` once it holds what only
/// planning resolves (a WITH clause's names, a table function).
#[derive(Default)]
struct Names {
    tables: Vec<datafusion::sql::sqlparser::ast::ObjectName>,
    must_plan: bool,
}

impl Visitor for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.must_plan |= query.with.is_some();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            _ if path_table(factor).is_some() => {}
            TableFactor::Table {
                name, args: None, ..
            } => self.tables.push(name.clone()),
            TableFactor::Derived { .. } | TableFactor::NestedJoin { .. } => {}
            _ => self.must_plan = true,
        }
        ControlFlow::Continue(())
    }
}

/// The view's name and the one Parquet path table its body is, whole: `SELECT * FROM 'path'`
/// or `SELECT * FROM read_parquet(…)`, the view a script writes for each table. Such a view is
/// that table under its own name: DataFusion's view of it plans `SELECT *` when first named
/// and puts a projection of every column into each query, which cost ClickBench's 105-column
/// `hits` 2.5 ms of a fresh process's statement.
fn only_a_path_table(create: &Statement) -> Option<(ObjectName, PathTable)> {
    let Statement::Statement(inner) = create else {
        return None;
    };
    let SqlStatement::CreateView(view) = inner.as_ref() else {
        return None;
    };
    let SetExpr::Select(select) = view.query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { alias: None, .. } = &from.relation else {
        return None;
    };
    // Anything more than `SELECT * FROM table` prints as more.
    if view.query.to_string() != format!("SELECT * FROM {}", from.relation) {
        return None;
    }
    let found = path_table(&from.relation)?.ok()?;
    let parquet = found.metadata.is_none() && found.text.is_none() && found.iceberg.is_none();
    parquet.then(|| (view.name.clone(), found))
}

#[cfg(test)]
mod tests {
    use crate::source::{LocalSource, ObjectSource};
    use crate::table::as_quiver_table;
    use crate::{describe, QuiverSession};
    use datafusion::arrow::util::pretty::pretty_format_batches;

    fn session() -> QuiverSession {
        QuiverSession::local_two_threads()
    }

    async fn text(session: &QuiverSession, sql: &str) -> String {
        let output = session.run(sql).await.unwrap();
        pretty_format_batches(&output.batches).unwrap().to_string()
    }

    async fn error(session: &QuiverSession, sql: &str) -> String {
        describe(&session.run(sql).await.expect_err(sql))
    }

    #[tokio::test]
    async fn a_view_reads_its_footer_when_first_named_and_is_checked_when_created() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.parquet");
        let session = session();
        let copy = format!("COPY (SELECT 7 AS x) TO '{}'", file.display());
        session.run(&copy).await.unwrap();
        let meta = LocalSource.head(file.to_str().unwrap()).await.unwrap();
        let read = || session.runtime().footers.encoded_len(&meta).is_some();

        session
            .run(&format!(
                "CREATE VIEW t AS SELECT * FROM '{}'",
                file.display()
            ))
            .await
            .unwrap();
        session
            .run("CREATE VIEW u AS SELECT x + 1 AS y FROM t")
            .await
            .unwrap();
        assert!(!read(), "no footer is read by CREATE VIEW");
        // The information schema lists them: reading it plans the waiting views.
        let tables = text(&session, "SHOW TABLES").await;
        assert!(
            tables.contains("| t ") && tables.contains("| u "),
            "{tables}"
        );
        assert!(read());
        assert!(text(&session, "SELECT y FROM u").await.contains("| 8 |"));

        // Checked as they are created: a wrong path, an unknown table, a taken name.
        let missing = dir.path().join("missing.parquet");
        let sql = format!("CREATE VIEW m AS SELECT * FROM '{}'", missing.display());
        assert!(error(&session, &sql).await.contains("missing.parquet"));
        let unknown = error(&session, "CREATE VIEW m AS SELECT * FROM nowhere").await;
        assert!(unknown.contains("nowhere"), "{unknown}");
        let taken = error(&session, "CREATE VIEW t AS SELECT 1 AS x").await;
        assert!(taken.contains("already exists"), "{taken}");
        // OR REPLACE replaces, and DROP drops a view never planned.
        session
            .run("CREATE OR REPLACE VIEW t AS SELECT 2 AS x")
            .await
            .unwrap();
        assert!(text(&session, "SELECT x FROM t").await.contains("| 2 |"));
        let sql = format!("CREATE VIEW w AS SELECT * FROM '{}'", file.display());
        session.run(&sql).await.unwrap();
        session.run("DROP VIEW w").await.unwrap();
        assert!(error(&session, "SELECT * FROM w")
            .await
            .contains("not found"));
    }

    #[tokio::test]
    async fn a_view_of_a_path_table_alone_is_that_table_under_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.parquet");
        let session = session();
        let copy = format!("COPY (SELECT 7 AS x) TO '{}'", file.display());
        session.run(&copy).await.unwrap();
        let path = file.display();
        for view in [
            format!("CREATE VIEW t AS select * from read_parquet('{path}')"),
            format!("CREATE VIEW q AS SELECT * FROM '{path}'"),
            format!("CREATE VIEW f AS SELECT * FROM '{path}' WHERE x > 7"),
            format!("CREATE VIEW a AS SELECT * FROM '{path}' AS renamed(y)"),
        ] {
            session.run(&view).await.unwrap();
        }
        assert!(text(&session, "SELECT t.x FROM t").await.contains("| 7 |"));
        assert!(text(&session, "SELECT x + 1 AS y FROM q")
            .await
            .contains("| 8 |"));
        let n = text(&session, "SELECT count(*) AS n FROM f").await;
        assert!(n.contains("| 0 |"), "{n}");
        assert!(text(&session, "SELECT y FROM a").await.contains("| 7 |"));
        let mut tables = vec![];
        for name in ["t", "q", "f", "a"] {
            let provider = session.context().table_provider(name).await.unwrap();
            tables.push(as_quiver_table(provider.as_ref()).is_some());
        }
        assert_eq!(
            tables,
            [true, true, false, false],
            "a filter or an alias plans"
        );
        // Still a view to the information schema and to DROP VIEW.
        let sql = "SELECT table_type FROM information_schema.tables WHERE table_name = 't'";
        assert!(text(&session, sql).await.contains("| VIEW "));
        let sql = "SELECT definition FROM information_schema.views WHERE table_name = 'q'";
        let definition = text(&session, sql).await;
        assert!(
            definition.contains("VIEW q AS SELECT * FROM '"),
            "{definition}"
        );
        session.run("DROP VIEW t").await.unwrap();
        assert!(error(&session, "SELECT * FROM t")
            .await
            .contains("not found"));
    }

    #[tokio::test]
    async fn a_view_that_fails_to_plan_waits_to_be_planned_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.parquet");
        std::fs::write(&file, b"not parquet at all").unwrap();
        let session = session();
        let sql = format!("CREATE VIEW t AS SELECT * FROM '{}'", file.display());
        session.run(&sql).await.unwrap();
        let failed = error(&session, "SELECT * FROM t").await;
        assert!(failed.contains("t.parquet"), "{failed}");
        // The file fixed, the view is planned, not lost.
        std::fs::remove_file(&file).unwrap();
        let copy = format!("COPY (SELECT 7 AS x) TO '{}'", file.display());
        session.run(&copy).await.unwrap();
        assert!(text(&session, "SELECT x FROM t").await.contains("| 7 |"));
    }
}
