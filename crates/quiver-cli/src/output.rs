//! Where a result goes and how it looks: a file or standard output, in a format, with the
//! table cut to the terminal (`quiver query` and the shell share this).

use std::io::{IsTerminal, Write};
use std::path::Path;

use futures::StreamExt;
use quiver_core::format::{write_batches_with_layout, OutputFormat, ResultWriter, TableLayout};
use quiver_core::{describe, QueryOutput, QueryStream};

#[derive(Debug, Clone, Copy)]
pub struct Printing {
    pub format: OutputFormat,
    pub layout: TableLayout,
    /// Threads that encode Parquet output (the query's own).
    pub threads: usize,
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
            threads: 1,
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
    let mut destination = Destination::open(printing, path)?;
    let written = write_batches_with_layout(
        printing.format,
        &output.schema,
        &output.batches,
        &printing.layout,
        destination.writer(),
    );
    destination.close(written)
}

/// Writes `output` to `out`, a file the shell's `.output` or `.once` opened, in `printing`'s
/// format; what was written there before stays.
pub fn write_result(
    printing: &Printing,
    output: &QueryOutput,
    out: &mut std::fs::File,
) -> Result<(), String> {
    let writer = std::io::BufWriter::new(out);
    let (schema, batches) = (&output.schema, &output.batches);
    write_batches_with_layout(printing.format, schema, batches, &printing.layout, writer)
        .map_err(|e| describe(&e))
}

/// As `print_result`, writing rows as they come, so that memory does not grow with the
/// answer (the table keeps only the rows it shows).
pub async fn print_stream(
    printing: &Printing,
    answer: QueryStream,
    path: Option<&Path>,
) -> Result<(), String> {
    let mut destination = Destination::open(printing, path)?;
    let mut batches = answer.batches;
    let written = async {
        let out = destination.writer();
        let mut writer = ResultWriter::new(printing.format, &answer.schema, &printing.layout, out)?
            .with_threads(printing.threads);
        while let Some(batch) = batches.next().await {
            writer.write(&batch?)?;
        }
        writer.finish()
    }
    .await;
    destination.close(written)
}

/// Standard output, or a file written beside `path` and renamed to it once whole, so that a
/// query failing half-way never leaves half an answer (or destroys an older one) there.
/// Paths that are not regular files (`/dev/null`, a FIFO) are written directly.
struct Destination<'a> {
    file: Option<(&'a Path, Option<std::path::PathBuf>, std::fs::File)>,
}

impl<'a> Destination<'a> {
    fn open(printing: &Printing, path: Option<&'a Path>) -> Result<Self, String> {
        let Some(path) = path else {
            if printing.format.is_binary() && std::io::stdout().is_terminal() {
                return Err(
                    "refusing to write binary output to a terminal; use --output FILE or a pipe"
                        .into(),
                );
            }
            return Ok(Self { file: None });
        };
        let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
        let partial = (!special).then(|| {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            std::path::PathBuf::from(partial)
        });
        let file = std::fs::File::create(partial.as_deref().unwrap_or(path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            file: Some((path, partial, file)),
        })
    }

    fn writer(&mut self) -> std::io::BufWriter<Box<dyn Write + Send + '_>> {
        let out: Box<dyn Write + Send + '_> = match &mut self.file {
            Some((_, _, file)) => Box::new(file),
            None => Box::new(std::io::stdout()),
        };
        std::io::BufWriter::new(out)
    }

    fn close(self, written: datafusion::error::Result<()>) -> Result<(), String> {
        match (self.file, written) {
            (None, Err(e)) if closed_pipe(&e) => Ok(()),
            (None, written) => written.map_err(|e| describe(&e)),
            (Some((_, None, _)), written) => written.map_err(|e| describe(&e)),
            (Some((path, Some(partial), _)), Ok(())) => {
                std::fs::rename(&partial, path).map_err(|e| format!("{}: {e}", path.display()))
            }
            (Some((_, Some(partial), _)), Err(e)) => {
                let _ = std::fs::remove_file(&partial);
                Err(describe(&e))
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
