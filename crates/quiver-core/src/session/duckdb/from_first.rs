//! DuckDB's FROM-first form: `FROM t` alone is `SELECT * FROM t` (DataFusion plans the
//! empty select list it parses to as no columns, one empty row per row).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Select, SelectFlavor, SelectItem, VisitMut, VisitorMut, WildcardAdditionalOptions,
};

/// Gives every `FROM …` without a select list the list `*`.
pub fn select_star_when_from_first<V: VisitMut>(statement: &mut V) {
    struct Star;
    impl VisitorMut for Star {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            if select.flavor == SelectFlavor::FromFirstNoSelect && select.projection.is_empty() {
                let star = SelectItem::Wildcard(WildcardAdditionalOptions::default());
                select.projection.push(star);
                select.flavor = SelectFlavor::FromFirst;
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Star);
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn from_alone_selects_every_column() {
        for (sql, expected) in [
            ("FROM t", "FROM t SELECT *"),
            ("SELECT * FROM (FROM t)", "SELECT * FROM (FROM t SELECT *)"),
            ("FROM t SELECT a", "FROM t SELECT a"),
        ] {
            let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            select_star_when_from_first(&mut statement);
            assert_eq!(statement.to_string(), expected);
        }
    }
}
