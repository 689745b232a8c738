//! The table people read, in DuckDB's box style: column names with their SQL types above,
//! numbers to the right, and an answer too long or wide for a screen cut in the middle
//! (first and last rows, outer columns) with the counts below, so that a 1.5-million-row
//! SELECT prints 40 rows and says how many there are.

use std::collections::VecDeque;
use std::io::Write;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::Result;

use crate::sql_types::sql_type_name;

/// How much of an answer fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    /// Rows shown at most (half from the start, half from the end); 0 shows every row.
    pub max_rows: usize,
    /// Characters per line at most (the terminal's width), or no limit.
    pub max_width: Option<usize>,
}

impl Default for TableLayout {
    fn default() -> Self {
        Self {
            max_rows: 40,
            max_width: None,
        }
    }
}

/// Longest value shown whole when the table is wider than the screen.
const SQUEEZED_CELL: usize = 24;
/// What stands for the rows or columns left out.
const ROW_GAP: &str = "·";
const COLUMN_GAP: &str = "…";

/// The rows a table shows, kept while an answer streams by: the first and the last ones
/// and how many there were, so that memory does not grow with the answer.
#[derive(Debug)]
pub struct ShownRows {
    head: Vec<RecordBatch>,
    head_rows: usize,
    tail: VecDeque<RecordBatch>,
    tail_rows: usize,
    max_head: usize,
    max_tail: usize,
    total: usize,
}

impl ShownRows {
    /// For a table of `max_rows` rows at most (half from the start, half from the end; 0:
    /// every row).
    pub fn new(max_rows: usize) -> Self {
        let (max_head, max_tail) = match max_rows {
            0 => (usize::MAX, 0),
            n => (n.div_ceil(2), n / 2),
        };
        Self {
            head: vec![],
            head_rows: 0,
            tail: VecDeque::new(),
            tail_rows: 0,
            max_head,
            max_tail,
            total: 0,
        }
    }

    pub fn push(&mut self, batch: &RecordBatch) {
        let rows = batch.num_rows();
        self.total += rows;
        let to_head = rows.min(self.max_head - self.head_rows);
        if to_head > 0 {
            self.head.push(batch.slice(0, to_head));
            self.head_rows += to_head;
        }
        if to_head == rows || self.max_tail == 0 {
            return;
        }
        self.tail.push_back(batch.slice(to_head, rows - to_head));
        self.tail_rows += rows - to_head;
        // Batches wholly before the last `max_tail` rows are not needed any more.
        while let Some(first) = self.tail.front() {
            if self.tail_rows - first.num_rows() < self.max_tail {
                break;
            }
            self.tail_rows -= first.num_rows();
            self.tail.pop_front();
        }
    }

    /// Rows in the answer.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The rows to show, in order, with `None` where the ones left out would be.
    fn rows(&self) -> Vec<Option<(&RecordBatch, usize)>> {
        fn rows_of(batch: &RecordBatch) -> impl Iterator<Item = (&RecordBatch, usize)> {
            (0..batch.num_rows()).map(move |i| (batch, i))
        }
        let mut shown: Vec<Option<(&RecordBatch, usize)>> = self
            .head
            .iter()
            .flat_map(|b| rows_of(b).map(Some))
            .collect();
        let skipped = self.tail_rows.saturating_sub(self.max_tail);
        let tail = self.tail.iter().flat_map(rows_of).skip(skipped);
        if self.total > self.head_rows + (self.tail_rows - skipped) {
            shown.push(None);
        }
        shown.extend(tail.map(Some));
        shown
    }
}

pub fn write_table<W: Write>(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    layout: &TableLayout,
    out: &mut W,
) -> Result<()> {
    let mut rows = ShownRows::new(layout.max_rows);
    for batch in batches {
        rows.push(batch);
    }
    write_shown_rows(schema, &rows, layout, out)
}

/// The table of the rows kept by `rows`.
pub fn write_shown_rows<W: Write>(
    schema: &SchemaRef,
    rows: &ShownRows,
    layout: &TableLayout,
    out: &mut W,
) -> Result<()> {
    let shown = rows.rows();
    let columns = formatted_columns(schema, &shown)?;
    let total_columns = columns.len();
    let columns = fit_width(columns, layout.max_width);
    let footer = counts(rows.total(), &shown, total_columns, &columns);
    let mut widths: Vec<usize> = columns.iter().map(Column::width).collect();
    // The counts widen the last column rather than stick out of the box.
    if let Some(footer) = &footer {
        let table = widths.iter().map(|w| w + 3).sum::<usize>() + 1;
        let needed = chars(footer) + 4;
        if let Some(last) = widths.last_mut() {
            *last += needed.saturating_sub(table);
        }
    }
    draw(&columns, &widths, footer.as_deref(), out)
}

/// Each column of `schema` with its name, type and the shown rows' cells as text (a gap
/// of three `ROW_GAP` cells where rows are left out).
fn formatted_columns(
    schema: &SchemaRef,
    shown: &[Option<(&RecordBatch, usize)>],
) -> Result<Vec<Column>> {
    let mut columns: Vec<Column> = schema
        .fields()
        .iter()
        .map(|field| Column {
            name: field.name().clone(),
            type_name: sql_type_name(field.data_type()).to_lowercase(),
            right: is_numeric(field.data_type()),
            cells: Vec::with_capacity(shown.len()),
        })
        .collect();
    let options = FormatOptions::default().with_null("NULL");
    for (index, column) in columns.iter_mut().enumerate() {
        let mut formatted: Option<(&RecordBatch, ArrayFormatter)> = None;
        for row in shown {
            let Some((batch, i)) = *row else {
                // The gap between the first and last rows.
                column.cells.extend([ROW_GAP; 3].map(String::from));
                continue;
            };
            let same = formatted
                .as_ref()
                .is_some_and(|(b, _)| std::ptr::eq(*b, batch));
            if !same {
                let formatter = ArrayFormatter::try_new(batch.column(index).as_ref(), &options)?;
                formatted = Some((batch, formatter));
            }
            if let Some((_, formatter)) = &formatted {
                column.cells.push(one_line(&formatter.value(i).to_string()));
            }
        }
    }
    Ok(columns)
}

/// The box: names and types, the cells, and the counts of what is not shown.
fn draw<W: Write>(
    columns: &[Column],
    widths: &[usize],
    footer: Option<&str>,
    out: &mut W,
) -> Result<()> {
    let height = columns.first().map(|c| c.cells.len()).unwrap_or(0);
    let line = |left: &str, middle: &str, right: &str| {
        let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        format!("{left}{}{right}", parts.join(middle))
    };
    let row = |cells: Vec<(&str, bool)>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|((text, right), width)| pad(text, *width, *right))
            .collect();
        format!("│ {} │", parts.join(" │ "))
    };
    writeln!(out, "{}", line("┌", "┬", "┐"))?;
    let names = columns.iter().map(|c| (c.name.as_str(), false)).collect();
    writeln!(out, "{}", row(names))?;
    let types = columns
        .iter()
        .map(|c| (c.type_name.as_str(), false))
        .collect();
    writeln!(out, "{}", row(types))?;
    writeln!(
        out,
        "{}",
        line("├", if height == 0 { "┴" } else { "┼" }, "┤")
    )?;
    for i in 0..height {
        let cells = columns
            .iter()
            .map(|c| {
                let text = c.cells[i].as_str();
                (text, c.right && text != ROW_GAP)
            })
            .collect();
        writeln!(out, "{}", row(cells))?;
    }
    match footer {
        Some(footer) => {
            if height > 0 {
                writeln!(out, "{}", line("├", "┴", "┤"))?;
            }
            writeln!(out, "{}", boxed(footer, widths))?;
            writeln!(out, "{}", line("└", "─", "┘"))?;
        }
        None => writeln!(out, "{}", line("└", "┴", "┘"))?,
    }
    Ok(())
}

/// What the table does not show, as counts: `1,500,000 rows (40 shown)  30 columns (8
/// shown)`; `None` when it shows everything (and has rows).
fn counts(
    total_rows: usize,
    shown: &[Option<(&RecordBatch, usize)>],
    total_columns: usize,
    columns: &[Column],
) -> Option<String> {
    let shown_rows = shown.iter().flatten().count();
    let shown_columns = columns.iter().filter(|c| !c.is_gap()).count();
    if total_rows > 0 && shown_rows == total_rows && shown_columns == total_columns {
        return None;
    }
    let mut counts = vec![if shown_rows < total_rows {
        format!(
            "{} rows ({} shown)",
            thousands(total_rows),
            thousands(shown_rows)
        )
    } else {
        let noun = if total_rows == 1 { "row" } else { "rows" };
        format!("{} {noun}", thousands(total_rows))
    }];
    if shown_columns < total_columns {
        counts.push(format!("{total_columns} columns ({shown_columns} shown)"));
    }
    Some(counts.join("  "))
}

struct Column {
    name: String,
    type_name: String,
    right: bool,
    cells: Vec<String>,
}

impl Column {
    fn width(&self) -> usize {
        self.cells
            .iter()
            .map(|c| chars(c))
            .chain([chars(&self.name), chars(&self.type_name)])
            .max()
            .unwrap_or(0)
    }

    fn is_gap(&self) -> bool {
        self.name == COLUMN_GAP && self.type_name.is_empty()
    }

    fn squeeze(&mut self, width: usize) {
        for text in std::iter::once(&mut self.name)
            .chain(std::iter::once(&mut self.type_name))
            .chain(self.cells.iter_mut())
        {
            if chars(text) > width {
                *text = text.chars().take(width - 1).collect::<String>() + COLUMN_GAP;
            }
        }
    }
}

/// Columns that fit `max_width`: long values cut first, then columns left out from the
/// middle, where a `…` column stands for them.
fn fit_width(mut columns: Vec<Column>, max_width: Option<usize>) -> Vec<Column> {
    let Some(max_width) = max_width else {
        return columns;
    };
    let total =
        |columns: &[Column]| -> usize { columns.iter().map(|c| c.width() + 3).sum::<usize>() + 1 };
    if total(&columns) <= max_width {
        return columns;
    }
    for column in &mut columns {
        column.squeeze(SQUEEZED_CELL);
    }
    if total(&columns) <= max_width || columns.len() < 2 {
        return columns;
    }
    let height = columns[0].cells.len();
    let gap = Column {
        name: COLUMN_GAP.into(),
        type_name: String::new(),
        right: false,
        cells: vec![COLUMN_GAP.into(); height],
    };
    let mut right = columns.split_off(columns.len().div_ceil(2));
    let mut left = columns;
    let fits = |left: &[Column], right: &[Column]| total(left) + total(right) + 3 - 1 <= max_width;
    while !fits(&left, &right) && left.len() + right.len() > 1 {
        if right.len() >= left.len() {
            right.remove(0);
        } else {
            left.pop();
        }
    }
    left.push(gap);
    left.extend(right);
    left
}

fn is_numeric(data_type: &DataType) -> bool {
    data_type.is_numeric()
}

/// One line per cell: newlines and tabs would break the box.
fn one_line(text: &str) -> String {
    if text.contains(['\n', '\r', '\t']) {
        text.replace(['\n', '\r', '\t'], " ")
    } else {
        text.to_string()
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn pad(text: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(chars(text)));
    if right {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

/// A line of text inside a box as wide as the table.
fn boxed(text: &str, widths: &[usize]) -> String {
    let inner = widths
        .iter()
        .map(|w| w + 3)
        .sum::<usize>()
        .saturating_sub(1);
    format!(
        "│ {} │",
        pad(text, inner.saturating_sub(2).max(chars(text)), false)
    )
}

/// `1500000` as `1,500,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    fn render(batch: &RecordBatch, layout: TableLayout) -> String {
        let mut out = vec![];
        write_table(
            &batch.schema(),
            std::slice::from_ref(batch),
            &layout,
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn numbers(n: i64) -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "name",
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i % 2 == 0).then(|| format!("n{i}"))),
                )) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn a_small_answer_is_whole_with_types_and_nulls() {
        let text = render(&numbers(2), TableLayout::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "│ id     │ name    │");
        assert_eq!(lines[2], "│ bigint │ varchar │");
        assert_eq!(lines[4], "│      0 │ n0      │");
        assert_eq!(lines[5], "│      1 │ NULL    │");
        assert_eq!(lines[6], "└────────┴─────────┘");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn a_long_answer_shows_its_ends_and_counts() {
        let text = render(&numbers(1_500_000), TableLayout::default());
        let lines: Vec<&str> = text.lines().collect();
        // Border, names, types, rule, 20 rows, 3 gap rows, 20 rows, rule, counts, border.
        assert_eq!(lines.len(), 4 + 20 + 3 + 20 + 3);
        assert!(lines[4].contains(" 0 "), "{}", lines[4]);
        assert!(lines[24].contains('·'));
        assert!(lines[46].contains("1499999"), "{}", lines[46]);
        assert!(
            lines[48].contains("1,500,000 rows (40 shown)"),
            "{}",
            lines[48]
        );
        // Every line of the box is as wide as the others.
        let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "{widths:?}");
    }

    #[test]
    fn a_wide_answer_leaves_out_middle_columns() {
        let columns: Vec<(String, ArrayRef)> = (0..30)
            .map(|i| {
                (
                    format!("column_{i}"),
                    Arc::new(Int64Array::from(vec![i as i64])) as ArrayRef,
                )
            })
            .collect();
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let layout = TableLayout {
            max_rows: 40,
            max_width: Some(80),
        };
        let text = render(&batch, layout);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
        assert!(lines[1].starts_with("│ column_0 "), "{}", lines[1]);
        assert!(
            lines[1].trim_end_matches(" │").ends_with("column_29"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains(" … "));
        assert!(text.contains("30 columns ("), "{text}");
        // All rows are shown, so the count says only how many there are.
        assert!(text.contains("1 row  30 columns"), "{text}");
    }

    #[test]
    fn an_answer_in_many_batches_gives_the_same_table_and_keeps_only_its_ends() {
        let whole = numbers(1000);
        let pieces: Vec<RecordBatch> = (0..1000)
            .step_by(7)
            .map(|i| whole.slice(i, 7.min(1000 - i)))
            .collect();
        for max_rows in [0, 1, 2, 40, 999, 1000, 2000] {
            let layout = TableLayout {
                max_rows,
                max_width: None,
            };
            let mut split = vec![];
            write_table(&whole.schema(), &pieces, &layout, &mut split).unwrap();
            let split = String::from_utf8(split).unwrap();
            assert_eq!(split, render(&whole, layout), "max_rows {max_rows}");
        }
        let mut rows = ShownRows::new(40);
        pieces.iter().for_each(|piece| rows.push(piece));
        let kept: usize = (rows.head.iter().chain(&rows.tail))
            .map(RecordBatch::num_rows)
            .sum();
        assert!(kept <= 40 + 7, "kept {kept} rows to show 40");
        assert_eq!(rows.total(), 1000);
    }

    #[test]
    fn an_empty_answer_says_so() {
        let text = render(&numbers(0), TableLayout::default());
        assert!(text.contains("0 rows"), "{text}");
    }

    #[test]
    fn max_rows_zero_shows_everything() {
        let text = render(
            &numbers(100),
            TableLayout {
                max_rows: 0,
                max_width: None,
            },
        );
        assert_eq!(text.lines().count(), 4 + 100 + 1);
    }
}
