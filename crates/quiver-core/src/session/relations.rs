//! Tables named by paths (`FROM 'data/**/*.parquet'`, `FROM read_csv('f.csv')`, the
//! metadata tables `parquet_metadata('glob')` and friends; see `path_table`): found in a
//! statement, named, and planned. Making a table lists files and
//! reads a footer (async), but DataFusion's SQL planner is synchronous, so each statement
//! is walked first to build its tables, and the planner then finds them by their text.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use datafusion::catalog::TableProvider;
use datafusion::common::{plan_err, Result, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::sql::sqlparser::ast::{
    DescribeAlias, Ident, ObjectName, Query, SelectItem, SetExpr, Statement as SqlStatement,
    TableFactor, Visit, Visitor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

pub use super::path_table::PathTable;
use super::path_table::{function_table, quoted_path};
use super::virtual_columns::Relation;
use crate::source::is_signed_url;
use crate::table::as_quiver_table;
use crate::text::TextFiles;

/// Tables built for the statements of one session, by key.
#[derive(Debug, Default)]
pub struct ResolvedTables {
    tables: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
}

impl ResolvedTables {
    pub fn get(&self, key: &str) -> Option<Arc<dyn TableProvider>> {
        self.tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    pub fn insert(&self, key: String, table: Arc<dyn TableProvider>) {
        self.tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, table);
    }

    pub fn clear(&self) {
        self.tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Every path table a statement names.
pub fn path_tables<V: Visit>(statement: &V) -> Result<Vec<PathTable>> {
    struct Finder(Vec<Result<PathTable>>);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let Some(found) = path_table(factor) {
                self.0.push(found);
            }
            ControlFlow::Continue(())
        }
    }
    let mut finder = Finder(vec![]);
    let _ = statement.visit(&mut finder);
    finder.0.into_iter().collect()
}

/// Whether a statement selects `*` or `t.*` anywhere: a wildcard over a table made from its
/// listing alone would expand to the listing columns only, so such statements are never
/// answered from listings.
pub fn uses_wildcard<V: Visit>(statement: &V) -> bool {
    struct Finder(bool);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            self.0 |= set_has_wildcard(&query.body);
            if self.0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    fn set_has_wildcard(set: &SetExpr) -> bool {
        match set {
            // `COLUMNS(…)` (see `duckdb::columns`) is a `*` in disguise.
            SetExpr::Select(select) => select.projection.iter().any(|item| {
                matches!(
                    item,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                ) || super::duckdb::columns::uses_columns(select)
            }),
            SetExpr::SetOperation { left, right, .. } => {
                set_has_wildcard(left) || set_has_wildcard(right)
            }
            SetExpr::Query(query) => set_has_wildcard(&query.body),
            _ => false,
        }
    }
    let mut finder = Finder(false);
    let _ = statement.visit(&mut finder);
    finder.0
}

pub(super) fn path_table(factor: &TableFactor) -> Option<Result<PathTable>> {
    let TableFactor::Table { name, args, .. } = factor else {
        return None;
    };
    match args {
        Some(args) => function_table(name, &args.args),
        None => quoted_path(name).map(|path| Ok(PathTable::quoted(path))),
    }
}

/// `DESCRIBE 'data/*.parquet'` as `DESCRIBE SELECT * FROM 'data/*.parquet'`, which DataFusion
/// plans with the path table like any query (its own DESCRIBE looks names up in the catalog).
pub fn describe_path_as_query(statement: &mut SqlStatement) {
    let SqlStatement::ExplainTable {
        describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
        table_name,
        ..
    } = statement
    else {
        return;
    };
    if quoted_path(table_name).is_none() {
        return;
    }
    let text = format!("DESCRIBE SELECT * FROM {table_name}");
    if let Ok(query) = Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_statement())
    {
        *statement = query;
    }
}

/// The name a path table goes by in plans, as DuckDB names it: the last path segment
/// without wildcards, less its extension (`'data/lineitem/*.parquet'` is `lineitem`).
fn table_name(patterns: &[String]) -> String {
    let first = patterns.first().map(String::as_str).unwrap_or_default();
    // A signed URL's query string is not part of its name.
    let first = match first.split_once('?') {
        Some((path, _)) if is_signed_url(first) => path,
        _ => first,
    };
    first
        .trim_end_matches('/')
        .rsplit('/')
        .find(|segment| !segment.is_empty() && !segment.contains(['*', '?', '{', '[']))
        .map(|segment| match segment.rsplit_once('.') {
            Some((stem, _))
                if segment.ends_with(".parquet") || TextFiles::by_extension(segment).is_some() =>
            {
                stem.to_string()
            }
            _ => segment.to_string(),
        })
        .unwrap_or_else(|| "parquet".to_string())
}

/// A FROM item as `virtual_columns` sees it: the name its columns go by and, for a path
/// table, its virtual columns. `None` for relations whose name is not known here (a table
/// function or subquery without an alias).
pub(super) fn relation_of(factor: &TableFactor, tables: &ResolvedTables) -> Option<Relation> {
    let named = |name: &Ident| ObjectName::from(vec![name.clone()]);
    let (alias, name, args) = match factor {
        TableFactor::Table {
            alias, name, args, ..
        } => (alias, Some(name), args.is_some()),
        TableFactor::Derived { alias, .. } | TableFactor::Function { alias, .. } => {
            (alias, None, true)
        }
        _ => return None,
    };
    let alias = alias.as_ref().map(|a| named(&a.name));
    let plain = |qualifier: Option<ObjectName>| {
        qualifier.map(|qualifier| Relation {
            qualifier,
            virtual_columns: vec![],
        })
    };
    match path_table(factor) {
        Some(Ok(found)) => {
            let own_name = match found.metadata {
                Some(kind) => kind.function().to_string(),
                None => table_name(&found.patterns),
            };
            let qualifier = alias.unwrap_or_else(|| named(&Ident::with_quote('"', own_name)));
            let table = tables.get(&found.key)?;
            let virtual_columns = as_quiver_table(table.as_ref())
                .map(|t| t.virtual_columns())
                .unwrap_or_default();
            Some(Relation {
                qualifier,
                virtual_columns,
            })
        }
        Some(Err(_)) => None,
        None if args => plain(alias),
        None => plain(alias.or_else(|| name.cloned())),
    }
}

/// Plans path tables from what `ResolvedTables` holds for them.
#[derive(Debug)]
pub struct PathTablePlanner {
    pub tables: Arc<ResolvedTables>,
}

impl RelationPlanner for PathTablePlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        _context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let Some(found) = path_table(&relation) else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let found = found?;
        let Some(table) = self.tables.get(&found.key) else {
            return plan_err!("table '{}' was not prepared before planning", found.key);
        };
        let TableFactor::Table { alias, .. } = relation else {
            unreachable!("path_table matched a table")
        };
        let name = match found.metadata {
            Some(kind) => kind.function().to_string(),
            None => table_name(&found.patterns),
        };
        let plan =
            LogicalPlanBuilder::scan(TableReference::bare(name), provider_as_source(table), None)?
                .build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan, alias,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::parser::DFParser;

    fn tables(sql: &str) -> Vec<PathTable> {
        let statements = DFParser::parse_sql(sql).unwrap();
        match &statements[0] {
            datafusion::sql::parser::Statement::Statement(s) => path_tables(s.as_ref()).unwrap(),
            _ => panic!("not a plain statement"),
        }
    }

    #[test]
    fn quoted_paths_and_read_parquet_are_found() {
        let found = tables("SELECT * FROM 'd/*.parquet' a JOIN read_parquet(['x', 'y'], hive_partitioning => true) b ON a.k = b.k");
        assert_eq!(found[0].patterns, vec!["d/*.parquet"]);
        assert_eq!(found[1].patterns, vec!["x", "y"]);
        assert_eq!(found[1].hive_partitioning, Some(true));
    }

    #[test]
    fn read_parquet_takes_schema_and_duckdb_style_options() {
        let found = tables("SELECT * FROM read_parquet('f.parquet', schema => 'a BIGINT, b DECIMAL(10,2)', hive_partitioning = false)");
        assert_eq!(
            found[0].schema.as_deref(),
            Some("a BIGINT, b DECIMAL(10,2)")
        );
        assert_eq!(found[0].hive_partitioning, Some(false));
        let found = tables("SELECT * FROM read_parquet('d/*.parquet', union_by_name => true)");
        assert!(found[0].union_by_name);
    }

    #[test]
    fn path_tables_are_named_by_their_last_literal_segment() {
        assert_eq!(table_name(&["data/lineitem.parquet".into()]), "lineitem");
        assert_eq!(table_name(&["data/orders/**/*.parquet".into()]), "orders");
        assert_eq!(table_name(&["*.parquet".into()]), "parquet");
        assert_eq!(table_name(&["s3://b/people.csv".into()]), "people");
    }

    #[test]
    fn wildcards_are_seen_in_subqueries_and_unions() {
        let wildcard = |sql: &str| match &DFParser::parse_sql(sql).unwrap()[0] {
            datafusion::sql::parser::Statement::Statement(s) => uses_wildcard(s.as_ref()),
            _ => panic!("not a plain statement"),
        };
        assert!(wildcard("SELECT DISTINCT * FROM 'a.parquet'"));
        assert!(wildcard(
            "SELECT count(*) FROM (SELECT DISTINCT t.* FROM 'a.parquet' t)"
        ));
        assert!(wildcard("SELECT _file FROM 'a' UNION SELECT * FROM 'b'"));
        assert!(!wildcard(
            "SELECT DISTINCT _file, count(*) FROM 'data/*.parquet' GROUP BY 1"
        ));
    }

    #[test]
    fn describe_of_a_path_describes_a_query_over_it() {
        let parse = |sql: &str| {
            Parser::new(&GenericDialect {})
                .try_with_sql(sql)
                .unwrap()
                .parse_statement()
                .unwrap()
        };
        let mut statement = parse("DESCRIBE 'data/*.parquet'");
        describe_path_as_query(&mut statement);
        assert_eq!(
            statement.to_string(),
            "DESCRIBE SELECT * FROM 'data/*.parquet'"
        );
        let mut statement = parse("DESCRIBE lineitem");
        describe_path_as_query(&mut statement);
        assert_eq!(statement.to_string(), "DESCRIBE lineitem");
    }

    #[test]
    fn plain_table_names_are_left_alone() {
        assert!(tables("SELECT * FROM lineitem").is_empty());
    }
}
