//! `_path`, `_file` and `_size` appear when named and never through `*`, as DuckDB's
//! `filename` and ClickHouse's virtual columns do: a `SELECT *` export has the file's
//! columns, no more. DataFusion has no hidden columns, so two steps do it:
//!
//! - a statement that never names a virtual column gets tables without them (most
//!   statements: nothing to hide);
//! - in one that does, every `*` and `t.*` over a path table gets an `EXCLUDE` of them,
//!   so that `SELECT _file, * FROM 'f.parquet'` is `_file` and the file's columns.
//!
//! A `*` over a join with a path table becomes one `t.*` per relation, each excluding its
//! own virtual columns; joins that merge or drop columns (`USING`, `NATURAL`, semi and anti
//! joins), relations without a name and a `*` with options of its own are left alone.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Ident, JoinConstraint, JoinOperator, ObjectName, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableFactor, VisitMut, VisitorMut,
    WildcardAdditionalOptions,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::source::VIRTUAL_COLUMNS;

/// Whether the statement's text names `_path`, `_file` or `_size` anywhere, as an
/// identifier (a string literal `'_path'` does not count).
pub fn names_virtual_column(sql: &str) -> bool {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return true;
    };
    tokens.iter().any(|token| match token {
        Token::Word(word) => VIRTUAL_COLUMNS
            .iter()
            .any(|name| word.value.eq_ignore_ascii_case(name)),
        _ => false,
    })
}

/// A relation of a FROM clause as the rewrite sees it.
pub struct Relation {
    /// The name its columns are qualified with (`alias`, or the table's name).
    pub qualifier: ObjectName,
    /// The virtual columns it has (empty for any other relation).
    pub virtual_columns: Vec<String>,
}

/// Adds the `EXCLUDE`s to every `*` of `statement`. `relation` describes a FROM item, or
/// says `None` when it cannot be named.
pub fn hide_from_wildcards<S: VisitMut>(
    statement: &mut S,
    relation: &dyn Fn(&TableFactor) -> Option<Relation>,
) {
    struct Hider<'a>(&'a dyn Fn(&TableFactor) -> Option<Relation>);
    impl VisitorMut for Hider<'_> {
        type Break = ();
        // Every query, nested ones included, comes here once; its body's selects are its own.
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            hide_in_set(&mut query.body, self.0);
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Hider(relation));
}

fn hide_in_set(set: &mut SetExpr, relation: &dyn Fn(&TableFactor) -> Option<Relation>) {
    match set {
        SetExpr::Select(select) => hide_in_select(select, relation),
        SetExpr::SetOperation { left, right, .. } => {
            hide_in_set(left, relation);
            hide_in_set(right, relation);
        }
        _ => {}
    }
}

fn hide_in_select(select: &mut Select, relation: &dyn Fn(&TableFactor) -> Option<Relation>) {
    let mut factors = vec![];
    let mut plain_joins = true;
    for from in &select.from {
        factors.push(&from.relation);
        for join in &from.joins {
            factors.push(&join.relation);
            plain_joins &= keeps_both_sides(&join.join_operator);
        }
    }
    let relations: Vec<Option<Relation>> = factors.into_iter().map(relation).collect();
    let has_virtual =
        |r: &Option<Relation>| r.as_ref().is_some_and(|r| !r.virtual_columns.is_empty());
    if !relations.iter().any(has_virtual) {
        return;
    }
    let mut projection = Vec::with_capacity(select.projection.len());
    for item in std::mem::take(&mut select.projection) {
        match item {
            SelectItem::Wildcard(mut options) if relations.len() == 1 => {
                let hidden = &relations[0].as_ref().expect("has virtual").virtual_columns;
                exclude(&mut options, hidden);
                projection.push(SelectItem::Wildcard(options));
            }
            SelectItem::Wildcard(options)
                if plain_joins
                    && has_no_options(&options)
                    && relations.iter().all(Option::is_some) =>
            {
                for found in relations.iter().flatten() {
                    let mut options = WildcardAdditionalOptions::default();
                    exclude(&mut options, &found.virtual_columns);
                    projection.push(SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(found.qualifier.clone()),
                        options,
                    ));
                }
            }
            SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(name),
                mut options,
            ) => {
                let found = relations
                    .iter()
                    .flatten()
                    .find(|r| same_name(&r.qualifier, &name));
                if let Some(found) = found {
                    exclude(&mut options, &found.virtual_columns);
                }
                projection.push(SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(name),
                    options,
                ));
            }
            other => projection.push(other),
        }
    }
    select.projection = projection;
}

/// Joins whose output is every column of both sides, each once per side.
fn keeps_both_sides(operator: &JoinOperator) -> bool {
    use JoinOperator::*;
    match operator {
        Join(constraint)
        | Inner(constraint)
        | Left(constraint)
        | LeftOuter(constraint)
        | Right(constraint)
        | RightOuter(constraint)
        | FullOuter(constraint)
        | CrossJoin(constraint) => {
            matches!(constraint, JoinConstraint::On(_) | JoinConstraint::None)
        }
        _ => false,
    }
}

fn has_no_options(options: &WildcardAdditionalOptions) -> bool {
    options.opt_ilike.is_none()
        && options.opt_exclude.is_none()
        && options.opt_except.is_none()
        && options.opt_replace.is_none()
        && options.opt_rename.is_none()
        && options.opt_alias.is_none()
}

/// Adds `names` to the wildcard's EXCLUDE, less those it excludes already.
fn exclude(options: &mut WildcardAdditionalOptions, names: &[String]) {
    let mut excluded: Vec<ObjectName> = match options.opt_exclude.take() {
        Some(ExcludeSelectItem::Single(name)) => vec![name],
        Some(ExcludeSelectItem::Multiple(names)) => names,
        None => vec![],
    };
    let already = |name: &str, excluded: &[ObjectName]| {
        excluded
            .iter()
            .any(|e| normalized(e).last().is_some_and(|last| last == name))
    };
    for name in names {
        if !already(name, &excluded) {
            excluded.push(ObjectName::from(vec![Ident::new(name)]));
        }
    }
    if !excluded.is_empty() {
        options.opt_exclude = Some(ExcludeSelectItem::Multiple(excluded));
    }
}

/// An object name's parts as DataFusion resolves them: unquoted ones in lower case.
fn normalized(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|part| match part.as_ident() {
            Some(ident) if ident.quote_style.is_none() => ident.value.to_lowercase(),
            Some(ident) => ident.value.clone(),
            None => part.to_string(),
        })
        .collect()
}

fn same_name(a: &ObjectName, b: &ObjectName) -> bool {
    normalized(a) == normalized(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::parser::Parser;

    /// Rewrites `sql` as if every table named `t…` or `'…'` were a path table.
    fn hidden(sql: &str) -> String {
        let mut statement = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_statement()
            .unwrap();
        hide_from_wildcards(&mut statement, &|factor: &TableFactor| match factor {
            TableFactor::Table { name, alias, .. } => {
                let is_path = name.to_string().starts_with(['t', '\'']);
                Some(Relation {
                    qualifier: alias
                        .as_ref()
                        .map(|a| ObjectName::from(vec![a.name.clone()]))
                        .unwrap_or_else(|| name.clone()),
                    virtual_columns: if is_path {
                        vec!["_path".into(), "_file".into()]
                    } else {
                        vec![]
                    },
                })
            }
            _ => None,
        });
        statement.to_string()
    }

    #[test]
    fn names_are_seen_as_identifiers_only() {
        assert!(names_virtual_column(
            "SELECT _file, count(*) FROM 'x' GROUP BY 1"
        ));
        assert!(names_virtual_column("SELECT t._PATH FROM 'x' t"));
        assert!(names_virtual_column("SELECT * EXCLUDE (_size) FROM 'x'"));
        assert!(!names_virtual_column(
            "SELECT * FROM 'x' WHERE name = '_path'"
        ));
        assert!(!names_virtual_column("SELECT a_path, _files FROM 'x'"));
    }

    #[test]
    fn a_star_over_one_path_table_excludes_its_virtual_columns() {
        assert_eq!(
            hidden("SELECT _file, * FROM t"),
            "SELECT _file, * EXCLUDE (_path, _file) FROM t"
        );
        assert_eq!(
            hidden("SELECT * EXCLUDE (x, _file) FROM t"),
            "SELECT * EXCLUDE (x, _file, _path) FROM t"
        );
        assert_eq!(
            hidden("SELECT a.* FROM t AS a"),
            "SELECT a.* EXCLUDE (_path, _file) FROM t AS a"
        );
    }

    #[test]
    fn a_star_over_a_join_becomes_one_star_per_relation() {
        assert_eq!(
            hidden("SELECT * FROM t1 AS a JOIN other AS b ON a.k = b.k"),
            "SELECT a.* EXCLUDE (_path, _file), b.* FROM t1 AS a JOIN other AS b ON a.k = b.k"
        );
        // USING merges its columns: left as it is.
        assert_eq!(
            hidden("SELECT * FROM t1 JOIN t2 USING (k)"),
            "SELECT * FROM t1 JOIN t2 USING(k)"
        );
    }

    #[test]
    fn nested_queries_and_unions_are_rewritten_too() {
        assert_eq!(
            hidden("SELECT * FROM (SELECT * FROM t) AS s UNION ALL SELECT * FROM t"),
            "SELECT * FROM (SELECT * EXCLUDE (_path, _file) FROM t) AS s UNION ALL SELECT * EXCLUDE (_path, _file) FROM t"
        );
        assert_eq!(hidden("SELECT * FROM other"), "SELECT * FROM other");
    }
}
