//! DuckDB's SQL as Quiver reads it, where DataFusion's differs. Text rewrites before parsing
//! (dialect: COPY's options, SUMMARIZE, EXPLAIN COST); AST rewrites before planning
//! (from_first: `FROM t` alone; function_names: DuckDB-only functions, from the table in
//! macros; identifiers: case-insensitive names; literals: timestamps' offsets and seconds;
//! precedence: `^` above `*`); a planner for operators (operators: `/`, `//`, `^`); and an
//! analyzer rule for what depends on types (typed: casts to integers round, `length` and
//! `concat` of lists); and functions DataFusion lacks (vectors: dot products, cosines).
//! What differs, and why DuckDB's meaning wins, is listed in docs/decisions.md.

pub mod dialect;
pub mod from_first;
pub mod function_names;
pub mod identifiers;
pub mod literals;
mod macros;
pub mod operators;
pub mod precedence;
pub mod typed;
pub mod vectors;
