//! Where a result goes and how it looks: a file or standard output, in a format, with the
//! table cut to the terminal (`quiver query` and the shell share this).

use std::io::IsTerminal;
use std::path::Path;

use quiver_core::format::{write_batches_with_layout, OutputFormat, TableLayout};
use quiver_core::{describe, QueryOutput};

#[derive(Debug, Clone, Copy)]
pub struct Printing {
    pub format: OutputFormat,
    pub layout: TableLayout,
}

impl Printing {
    /// Tables as wide as the terminal standard output is, if it is one.
    pub fn for_terminal() -> Self {
        let max_width = std::io::stdout()
            .is_terminal()
            .then(|| console::Term::stdout().size_checked())
            .flatten()
            .map(|(_rows, columns)| columns as usize)
            .filter(|columns| *columns >= 20);
        Self {
            format: OutputFormat::Table,
            layout: TableLayout {
                max_width,
                ..TableLayout::default()
            },
        }
    }
}

/// Writes `output` to `path`, or to standard output (never binary to a terminal; a reader
/// that goes away, as `| head` does, ends the output quietly).
pub fn print_result(
    printing: &Printing,
    output: &QueryOutput,
    path: Option<&Path>,
) -> Result<(), String> {
    let write = |out: &mut (dyn std::io::Write + Send)| {
        write_batches_with_layout(
            printing.format,
            &output.schema,
            &output.batches,
            &printing.layout,
            std::io::BufWriter::new(out),
        )
    };
    match path {
        Some(path) => {
            let mut file =
                std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            write(&mut file).map_err(|e| describe(&e))
        }
        None => {
            if printing.format.is_binary() && std::io::stdout().is_terminal() {
                return Err(
                    "refusing to write binary output to a terminal; use --output FILE or a pipe"
                        .into(),
                );
            }
            match write(&mut std::io::stdout()) {
                Err(e) if closed_pipe(&e) => Ok(()),
                other => other.map_err(|e| describe(&e)),
            }
        }
    }
}

/// Whether writing failed because the reader of standard output went away (`quiver query
/// ... | head`): then the output ends quietly, as `cat`'s does. The CSV writer keeps only
/// the io error's text, hence the second test.
pub fn closed_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        let io = error.downcast_ref::<std::io::Error>();
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || error.to_string().contains("Broken pipe")
        {
            return true;
        }
        next = error.source();
    }
    false
}
