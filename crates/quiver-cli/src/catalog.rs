//! `.tables` and `.schema` in the shell: the session's tables and views as DuckDB's shell
//! lists them (the names, in columns; each view's CREATE statement), read from the
//! information schema.

use datafusion::arrow::array::{Array, AsArray};
use quiver_core::{describe, QuiverSession};

/// The names of the session's tables and views, sorted, in columns that fit `width`.
pub fn tables(
    runtime: &tokio::runtime::Runtime,
    session: &QuiverSession,
    width: usize,
) -> Result<String, String> {
    let names = strings(
        runtime,
        session,
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = 'public' ORDER BY table_name",
    )?;
    Ok(in_columns(&names, width))
}

/// The CREATE statement of each view (of `name` alone, if given), one per line.
pub fn schema(
    runtime: &tokio::runtime::Runtime,
    session: &QuiverSession,
    name: Option<&str>,
) -> Result<String, String> {
    let only = name
        .map(|n| {
            format!(
                " AND lower(table_name) = lower('{}')",
                n.replace('\'', "''")
            )
        })
        .unwrap_or_default();
    let sql = format!(
        "SELECT definition FROM information_schema.views \
         WHERE table_schema = 'public'{only} ORDER BY table_name"
    );
    let definitions = strings(runtime, session, &sql)?;
    Ok(definitions.iter().map(|d| format!("{d};\n")).collect())
}

/// The first column of `sql`'s answer, as text.
fn strings(
    runtime: &tokio::runtime::Runtime,
    session: &QuiverSession,
    sql: &str,
) -> Result<Vec<String>, String> {
    let output = runtime
        .block_on(session.run(sql))
        .map_err(|e| describe(&e))?;
    let mut found = vec![];
    for batch in &output.batches {
        let column = datafusion::arrow::compute::cast(
            batch.column(0),
            &datafusion::arrow::datatypes::DataType::Utf8,
        )
        .map_err(|e| e.to_string())?;
        let text = column.as_string::<i32>();
        found.extend(
            (0..text.len())
                .filter(|&i| text.is_valid(i))
                .map(|i| text.value(i).to_string()),
        );
    }
    Ok(found)
}

/// `names` down columns, as `ls` lays them out, in at most `width` characters a line.
fn in_columns(names: &[String], width: usize) -> String {
    if names.is_empty() {
        return String::new();
    }
    let cell = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) + 2;
    let columns = (width / cell).max(1);
    let rows = names.len().div_ceil(columns);
    let mut out = String::new();
    for row in 0..rows {
        let line: String = (row..names.len())
            .step_by(rows)
            .map(|i| format!("{:<cell$}", names[i]))
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_down_columns_that_fit_the_width() {
        let names: Vec<String> = ["customer", "lineitem", "nation", "orders", "region"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            in_columns(&names, 30),
            "customer  nation    region\nlineitem  orders\n"
        );
        assert_eq!(in_columns(&names[..1], 5), "customer\n");
        assert_eq!(in_columns(&[], 80), "");
    }
}
