//! Identifiers as DuckDB resolves them: case-insensitive, case-preserving. DataFusion's
//! planner lowers unquoted identifiers and then matches names exactly, so `AdvEngineID`
//! would never find a file's `AdvEngineID` column (nor `"advengineid"` it). Before a
//! statement is planned, every identifier that names nothing as DataFusion would look it up,
//! but names exactly one column, alias or table when case is ignored, is written as that
//! name, quoted. Where two names differ only in case, the identifier is an error that names
//! both. Identifiers that name nothing at all are left for DataFusion's own error.

use std::collections::{BTreeSet, HashMap};
use std::ops::ControlFlow;

use datafusion::error::{DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, Query, Select, SelectItem, TableAlias, TableFactor, Visit, VisitMut,
    Visitor, VisitorMut,
};

use crate::session::relations::path_table;

/// The names a statement can mean, each as stored, found by its lower-case form.
#[derive(Debug, Default)]
pub struct Spellings {
    by_folded: HashMap<String, BTreeSet<String>>,
}

impl Spellings {
    /// A column's or table's name as stored.
    pub fn add(&mut self, name: &str) {
        self.by_folded
            .entry(name.to_lowercase())
            .or_default()
            .insert(name.to_string());
    }

    /// A name the statement defines (an alias, a CTE), as DataFusion will store it.
    fn add_defined(&mut self, ident: &Ident) {
        self.add(&as_looked_up(ident));
    }

    /// The stored name `ident` means when DataFusion would not find it as written; `None`
    /// when it finds it, or nothing matches even ignoring case. Among names differing only
    /// in case, the one written exactly so; else the identifier is ambiguous.
    fn spelling_of(&self, ident: &Ident) -> Result<Option<&String>> {
        let Some(spellings) = self.by_folded.get(&ident.value.to_lowercase()) else {
            return Ok(None);
        };
        let mut names = spellings.iter();
        let meant = match (names.next(), names.next()) {
            (Some(only), None) => only,
            _ => match spellings.get(&ident.value) {
                Some(exact) => exact,
                None => {
                    let names: Vec<String> = spellings.iter().map(|s| format!("\"{s}\"")).collect();
                    return Err(DataFusionError::Plan(format!(
                        "identifier {ident} is ambiguous: {} differ only in case; write \
                         the one you mean with its case",
                        names.join(" and ")
                    )));
                }
            },
        };
        Ok((*meant != as_looked_up(ident)).then_some(meant))
    }
}

/// The name DataFusion's planner looks `ident` up by.
fn as_looked_up(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// Adds the names `statement` defines itself: select-list aliases, table aliases and their
/// column lists, and WITH's names and column lists.
pub fn add_defined_names<V: Visit>(statement: &V, spellings: &mut Spellings) {
    struct Definitions<'a>(&'a mut Spellings);
    impl Definitions<'_> {
        fn alias(&mut self, alias: &TableAlias) {
            self.0.add_defined(&alias.name);
            for column in &alias.columns {
                self.0.add_defined(&column.name);
            }
        }
    }
    impl Visitor for Definitions<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            for cte in query.with.iter().flat_map(|with| &with.cte_tables) {
                self.alias(&cte.alias);
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
            for item in &select.projection {
                if let SelectItem::ExprWithAlias { alias, .. } = item {
                    self.0.add_defined(alias);
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let Some(alias) = table_alias(factor) {
                self.alias(alias);
            }
            if let TableFactor::Table { name, .. } = factor {
                if let Some(last) = name.0.last().and_then(|part| part.as_ident()) {
                    self.0.add_defined(last);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Definitions(spellings));
}

/// The tables `statement` names other than by path (and other than as a table function).
pub fn named_tables<V: Visit>(statement: &V) -> Vec<ObjectName> {
    struct Names(Vec<ObjectName>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name, args: None, ..
            } = factor
            {
                if path_table(factor).is_none() {
                    self.0.push(name.clone());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(vec![]);
    let _ = statement.visit(&mut names);
    names.0
}

fn table_alias(factor: &TableFactor) -> Option<&TableAlias> {
    match factor {
        TableFactor::Table { alias, .. }
        | TableFactor::Derived { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::NestedJoin { alias, .. } => alias.as_ref(),
        _ => None,
    }
}

/// Writes every column reference of `statement` that `spellings` resolves as its stored
/// name, quoted (see the module's comment).
pub fn resolve_identifiers<V: VisitMut>(statement: &mut V, spellings: &Spellings) -> Result<()> {
    struct Resolver<'a>(&'a Spellings);
    impl Resolver<'_> {
        fn resolve(&self, ident: &mut Ident) -> Result<()> {
            if let Some(spelling) = self.0.spelling_of(ident)? {
                *ident = Ident::with_quote('"', spelling.as_str());
            }
            Ok(())
        }
    }
    impl VisitorMut for Resolver<'_> {
        type Break = DataFusionError;
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<DataFusionError> {
            let resolved = match expr {
                Expr::Identifier(ident) => self.resolve(ident),
                Expr::CompoundIdentifier(parts) => {
                    parts.iter_mut().try_for_each(|part| self.resolve(part))
                }
                _ => Ok(()),
            };
            match resolved {
                Ok(()) => ControlFlow::Continue(()),
                Err(error) => ControlFlow::Break(error),
            }
        }
    }
    match statement.visit(&mut Resolver(spellings)) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn resolved(sql: &str, columns: &[&str]) -> Result<String> {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let mut spellings = Spellings::default();
        columns.iter().for_each(|c| spellings.add(c));
        add_defined_names(&statement, &mut spellings);
        resolve_identifiers(&mut statement, &spellings)?;
        Ok(statement.to_string())
    }

    #[test]
    fn an_identifier_finds_its_column_whatever_its_case() {
        let sql = "SELECT AdvEngineID, count(*) FROM hits WHERE advengineid <> 0 \
                   GROUP BY ADVENGINEID";
        assert_eq!(
            resolved(sql, &["AdvEngineID", "UserID"]).unwrap(),
            "SELECT \"AdvEngineID\", count(*) FROM hits WHERE \"AdvEngineID\" <> 0 \
             GROUP BY \"AdvEngineID\""
        );
        // Quoted with another case, as DuckDB allows; qualified by the table's name.
        assert_eq!(
            resolved("SELECT \"userid\", Hits.UserID FROM hits", &["UserID"]).unwrap(),
            "SELECT \"UserID\", Hits.\"UserID\" FROM hits"
        );
    }

    #[test]
    fn names_found_as_written_and_aliases_are_left_alone() {
        let sql = "SELECT x, Total AS Sum1 FROM t ORDER BY sum1";
        assert_eq!(resolved(sql, &["x", "total"]).unwrap(), sql);
        // A quoted alias is found by an unquoted reference in another case.
        assert_eq!(
            resolved("SELECT a AS \"Big\" FROM t ORDER BY big", &["a"]).unwrap(),
            "SELECT a AS \"Big\" FROM t ORDER BY \"Big\""
        );
        // Names that match nothing are DataFusion's to report.
        assert_eq!(
            resolved("SELECT nope FROM t", &["a"]).unwrap(),
            "SELECT nope FROM t"
        );
    }

    #[test]
    fn two_columns_differing_only_in_case_are_an_error_naming_both() {
        let error = resolved("SELECT Id FROM t", &["ID", "iD"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"ID\" and \"iD\""), "{error}");
        // Written as one of them is stored, quoted or not, it is that one.
        assert_eq!(
            resolved("SELECT \"ID\", ID, iD FROM t", &["ID", "iD"]).unwrap(),
            "SELECT \"ID\", \"ID\", \"iD\" FROM t"
        );
    }
}
