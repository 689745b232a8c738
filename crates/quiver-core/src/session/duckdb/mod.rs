//! DuckDB's SQL as Quiver reads it, where DataFusion's differs. Text rewrites before parsing
//! (dialect: COPY's options, SUMMARIZE, EXPLAIN COST); AST rewrites before planning
//! (from_first: `FROM t` alone; clauses: SEMI and ANTI joins, ORDER BY ALL; asof: ASOF
//! joins, in text, then in the AST, then in the plan; columns:
//! `COLUMNS(…)`, over the columns its FROM clause plans to; pivot: PIVOT and UNPIVOT, in
//! text then over the columns and values planning finds; samples:
//! `USING SAMPLE` and `TABLESAMPLE`, in text then in the AST; function_names: DuckDB-only functions, from the table in
//! macros; identifiers: case-insensitive names; literals: timestamps' offsets and seconds;
//! precedence: `^` above `*`); a planner for operators (operators: `/`, `//`, `^`); and an
//! analyzer rule for what depends on types (typed: casts to integers round, `length` and
//! `concat` of lists, `avg` of a DECIMAL as decimal_avg sums it); and functions DataFusion
//! lacks (vectors: dot products, cosines; and row_functions, which text, numbers, bytes,
//! lists and hashes fill: distances, graphemes, paths, printf, hex and base64, list
//! positions and masks, struct fields, DuckDB's hash; aggregates: product).
//! What differs, and why DuckDB's meaning wins, is listed in docs/decisions.md.

pub mod aggregates;
pub mod asof;
mod bytes;
pub mod clauses;
pub mod columns;
mod decimal_avg;
pub mod dialect;
pub mod from_first;
pub mod function_names;
mod hashes;
pub mod identifiers;
mod lists;
pub mod literals;
mod macros;
mod numbers;
pub mod operators;
pub mod pivot;
pub mod precedence;
pub mod row_functions;
pub mod samples;
mod structs;
mod text;
pub mod typed;
pub mod vectors;

pub use bytes::BYTES;
pub use hashes::HASHES;
pub use lists::LISTS;
pub use numbers::NUMBERS;
pub use structs::STRUCTS;
pub use text::TEXT;

/// One statement as DuckDB's dialect parses it: the starting point of the rewrites' tests.
#[cfg(test)]
fn parsed(sql: &str) -> datafusion::sql::sqlparser::ast::Statement {
    use datafusion::sql::sqlparser::{dialect::DuckDbDialect, parser::Parser};
    Parser::new(&DuckDbDialect {})
        .try_with_sql(sql)
        .and_then(|mut parser| parser.parse_statement())
        .unwrap()
}
