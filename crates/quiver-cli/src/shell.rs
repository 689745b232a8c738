//! The interactive shell `quiver` opens on a terminal, with DuckDB's habits: statements end
//! at `;` and may span lines, history is kept in `~/.quiver_history`, Ctrl-C cancels the
//! running query (or the line being typed) and keeps the session, Ctrl-D leaves, and dot
//! commands set the output (`.mode`, `.maxrows`, `.timer`, `.profile`, `.output`, `.once`)
//! and list the session's tables (`.tables`, `.schema`). Piped into `quiver`,
//! a script runs as `duckdb < script.sql` runs it (`run_script`).

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use quiver_core::format::OutputFormat;
use quiver_core::{describe, QuiverSession};
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use tokio::sync::Notify;

use crate::catalog;
use crate::output::{print_result, write_result, Printing};
use crate::progress::Progress;
use crate::statement_end::{has_sql, is_complete, may_end_statement};

const HELP: &str = "\
Enter SQL ending with ';' (it may span lines). Ctrl-C cancels a running query, Ctrl-D leaves.
  .help                       this text
  .mode table|csv|json        how results print (now: {mode})
  .maxrows N                  rows a table shows, first and last halves (0: all; now: {maxrows})
  .timer on|off               print each statement's time
  .profile on|off             print requests, bytes and time per phase after each statement
  .read FILE                  run the SQL in FILE
  .output [FILE]              results to FILE from now on (none: to the screen again)
  .once FILE                  the next result to FILE
  .tables                     the session's tables and views
  .schema [NAME]              the CREATE statement of each view (or of NAME)
  .quit                       leave (also .exit, Ctrl-D)
Examples:
  SELECT * FROM 'data/*.parquet' LIMIT 10;
  DESCRIBE 'data/*.parquet';
  SELECT _file, count(*) FROM 'data/**/*.parquet' GROUP BY 1;";

pub fn run(runtime: &tokio::runtime::Runtime, session: QuiverSession) -> Result<(), String> {
    let mut editor: Editor<ShellHelper, DefaultHistory> =
        Editor::new().map_err(|e| format!("cannot open the terminal: {e}"))?;
    editor.set_helper(Some(ShellHelper {
        files: FilenameCompleter::new(),
    }));
    let history = history_file();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    println!(
        "quiver {}: SQL over Parquet files. Enter \".help\" for help.",
        env!("CARGO_PKG_VERSION")
    );
    let interrupts = Arc::new(Notify::new());
    let notify = Arc::clone(&interrupts);
    // SIGINT comes only while a query runs: at the prompt the line editor reads Ctrl-C as a
    // key. ctrlc rather than tokio's `signal` feature, which would change tokio's build for
    // the Lambda functions too (cargo-lambda then rebuilds them from scratch in CI).
    ctrlc::set_handler(move || notify.notify_waiters())
        .map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    let mut shell = Shell::new(session, interrupts);
    let mut statement = String::new();
    loop {
        let prompt = if statement.is_empty() {
            "quiver> "
        } else {
            "   ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => match shell.take_line(runtime, &mut statement, &line) {
                Taken::Command(flow) => {
                    let _ = editor.add_history_entry(line.trim());
                    if let Flow::Quit = flow {
                        break;
                    }
                }
                Taken::Ran(sql) => {
                    let _ = editor.add_history_entry(sql);
                }
                Taken::Pending => {}
            },
            // Ctrl-C while typing drops what was typed.
            Err(ReadlineError::Interrupted) => statement.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("reading input: {e}")),
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    Ok(())
}

/// SQL piped into `quiver`, run as `duckdb < script.sql` runs it: every statement's answer
/// prints, dot commands are obeyed, a failing statement prints its error and the script goes
/// on; the run fails at the end if any statement did.
pub fn run_script(
    runtime: &tokio::runtime::Runtime,
    session: QuiverSession,
    input: impl std::io::BufRead,
) -> Result<(), String> {
    // Ctrl-C ends the process, as for any command in a pipeline.
    let mut shell = Shell::new(session, Arc::new(Notify::new()));
    let mut statement = String::new();
    for line in input.lines() {
        let line = line.map_err(|e| format!("reading SQL from standard input: {e}"))?;
        if let Taken::Command(Flow::Quit) = shell.take_line(runtime, &mut statement, &line) {
            break;
        }
    }
    // The last statement may end without `;`.
    if has_sql(&statement) {
        shell.run_sql(runtime, statement.trim());
    }
    match shell.failures.get() {
        0 => Ok(()),
        1 => Err("1 statement of the script failed".into()),
        n => Err(format!("{n} statements of the script failed")),
    }
}

struct Shell {
    /// Woken by Ctrl-C.
    interrupts: Arc<Notify>,
    session: QuiverSession,
    printing: Printing,
    timer: bool,
    profile: bool,
    /// Where results go instead of standard output (`.output`, `.once`).
    redirect: std::cell::RefCell<Option<Redirect>>,
    /// Statements and dot commands that failed.
    failures: std::cell::Cell<usize>,
}

/// A file results are written to; `once`: for the next result only.
struct Redirect {
    file: std::fs::File,
    once: bool,
}

enum Flow {
    Continue,
    Quit,
}

/// What a line of input did (see `Shell::take_line`).
enum Taken {
    /// It was a dot command.
    Command(Flow),
    /// It ended a statement, which ran.
    Ran(String),
    /// It is part of a statement not yet ended.
    Pending,
}

impl Shell {
    fn new(session: QuiverSession, interrupts: Arc<Notify>) -> Self {
        Self {
            interrupts,
            session,
            printing: Printing::for_terminal(),
            timer: false,
            profile: false,
            redirect: Default::default(),
            failures: Default::default(),
        }
    }

    /// Takes a line of input, typed or piped, into `statement`: a dot command where a statement
    /// may start (comments before it count for nothing) runs at once; a statement runs once it
    /// ends with `;`.
    fn take_line(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        statement: &mut String,
        line: &str,
    ) -> Taken {
        if line.trim_start().starts_with('.') && !has_sql(statement) {
            statement.clear();
            return Taken::Command(self.dot_command(runtime, line.trim()));
        }
        statement.push_str(line);
        statement.push('\n');
        if !may_end_statement(line) || !is_complete(statement) {
            return Taken::Pending;
        }
        let sql = std::mem::take(statement).trim().to_string();
        self.run_sql(runtime, &sql);
        Taken::Ran(sql)
    }

    /// Results go to `path` (emptied first) from now on, or (`once`) for the next one.
    fn redirect_to(&self, path: &str, once: bool) -> Result<(), String> {
        let file = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
        *self.redirect.borrow_mut() = Some(Redirect { file, once });
        Ok(())
    }

    /// `write` given the file results go to (`None`: standard output); a `.once` file is
    /// closed after it.
    fn to_output<T>(&self, write: impl FnOnce(Option<&mut std::fs::File>) -> T) -> T {
        let mut redirect = self.redirect.borrow_mut();
        let written = write(redirect.as_mut().map(|to| &mut to.file));
        if redirect.as_ref().is_some_and(|to| to.once) {
            *redirect = None;
        }
        written
    }

    /// Text a dot command answers with, where results go.
    fn emit(&self, text: &str) {
        use std::io::Write;
        let written = self.to_output(|file| match file {
            Some(file) => file.write_all(text.as_bytes()),
            None => std::io::stdout().write_all(text.as_bytes()),
        });
        if let Err(e) = written {
            self.failed(&format!("writing: {e}"));
        }
    }

    fn failed(&self, message: &str) {
        eprintln!("Error: {message}");
        self.failures.set(self.failures.get() + 1);
    }

    /// Runs `sql` until it ends or Ctrl-C cancels it; errors print and the session stays.
    fn run_sql(&self, runtime: &tokio::runtime::Runtime, sql: &str) {
        let started = Instant::now();
        let outcome = runtime.block_on(async {
            let progress = Progress::start(Arc::clone(self.session.runtime()));
            // Registered before the query starts, so a Ctrl-C from now on wakes it.
            let interrupted = self.interrupts.notified();
            // Dropping the query's future stops its streams and tasks; caches stay.
            let outcome = tokio::select! {
                result = self.session.run(sql) => Some(result),
                _ = interrupted => None,
            };
            progress.finish();
            outcome
        });
        match outcome {
            None => eprintln!("Interrupted: the query was cancelled."),
            Some(Err(e)) => self.failed(&describe(&e)),
            Some(Ok(output)) => {
                if self.profile {
                    eprint!("{}", output.metrics.report());
                    let spent = output.metrics.snapshot();
                    eprintln!("{}", self.session.cost_line(&spent, Default::default()));
                }
                // A statement with no columns (CREATE VIEW, SET) prints nothing, as in DuckDB.
                let printed =
                    self.to_output(|file| match (output.schema.fields().is_empty(), file) {
                        (true, _) => Ok(()),
                        (false, Some(file)) => write_result(&self.printing, &output, file),
                        (false, None) => print_result(&self.printing, &output, None),
                    });
                if let Err(e) = printed {
                    self.failed(&e);
                }
            }
        }
        if self.timer {
            println!("Run Time (s): real {:.3}", started.elapsed().as_secs_f64());
        }
    }

    fn dot_command(&mut self, runtime: &tokio::runtime::Runtime, line: &str) -> Flow {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or_default();
        let argument = words.next();
        let on_off = |value: Option<&str>, current: bool| match value {
            Some("on") => Ok(true),
            Some("off") => Ok(false),
            None => Ok(!current),
            Some(other) => Err(format!("{command} takes on or off, not '{other}'")),
        };
        let result: Result<(), String> = match command {
            ".quit" | ".exit" | ".q" => return Flow::Quit,
            ".help" => {
                let mode = format!("{:?}", self.printing.format).to_lowercase();
                let maxrows = self.printing.layout.max_rows.to_string();
                println!(
                    "{}",
                    HELP.replace("{mode}", &mode).replace("{maxrows}", &maxrows)
                );
                Ok(())
            }
            ".timer" => on_off(argument, self.timer).map(|on| self.timer = on),
            ".profile" => on_off(argument, self.profile).map(|on| self.profile = on),
            ".mode" => match argument.map(str::parse::<OutputFormat>) {
                Some(Ok(format)) if !format.is_binary() => {
                    self.printing.format = format;
                    Ok(())
                }
                Some(Ok(_)) => Err("the shell prints table, csv or json; use `quiver query --format` for binary output".into()),
                Some(Err(e)) => Err(e),
                None => Err(".mode takes table, csv or json".into()),
            },
            ".maxrows" => match argument.map(str::parse::<usize>) {
                Some(Ok(rows)) => {
                    self.printing.layout.max_rows = rows;
                    Ok(())
                }
                _ => Err(".maxrows takes a number of rows (0: all)".into()),
            },
            ".read" => match argument {
                Some(path) => match std::fs::read_to_string(path) {
                    Ok(sql) => {
                        self.run_sql(runtime, &sql);
                        Ok(())
                    }
                    Err(e) => Err(format!("{path}: {e}")),
                },
                None => Err(".read takes a file name".into()),
            },
            ".output" => match argument {
                Some(path) => self.redirect_to(path, false),
                None => {
                    *self.redirect.borrow_mut() = None;
                    Ok(())
                }
            },
            ".once" => match argument {
                Some(path) => self.redirect_to(path, true),
                None => Err(".once takes a file name".into()),
            },
            ".tables" => {
                let width = self.printing.layout.max_width.unwrap_or(80);
                catalog::tables(runtime, &self.session, width).map(|text| self.emit(&text))
            }
            ".schema" => {
                catalog::schema(runtime, &self.session, argument).map(|text| self.emit(&text))
            }
            other => Err(format!("unknown command {other}; enter .help for the list")),
        };
        if let Err(message) = result {
            self.failed(&message);
        }
        Flow::Continue
    }
}

fn history_file() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".quiver_history"))
}

/// Tab completion: file names inside quotes, SQL words elsewhere.
struct ShellHelper {
    files: FilenameCompleter,
}

const WORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT JOIN",
    "INNER JOIN",
    "ON",
    "USING",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS NULL",
    "IS NOT NULL",
    "BETWEEN",
    "LIKE",
    "ILIKE",
    "DISTINCT",
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "WITH",
    "UNION ALL",
    "DESCRIBE",
    "EXPLAIN",
    "SUMMARIZE",
    "COPY",
    "TO",
    "CREATE VIEW",
    "SET",
    "SHOW",
    "read_parquet",
    "parquet_metadata",
    "parquet_schema",
    "parquet_file_metadata",
    "parquet_kv_metadata",
    "_path",
    "_file",
    "_size",
];

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        context: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let in_quotes = before.matches('\'').count() % 2 == 1;
        if in_quotes {
            let start = before.rfind('\'').map(|i| i + 1).unwrap_or(0);
            let (at, pairs) = self.files.complete(&line[start..], pos - start, context)?;
            return Ok((start + at, pairs));
        }
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(|i| i + 1)
            .unwrap_or(0);
        let word = &before[start..];
        if word.is_empty() {
            return Ok((pos, vec![]));
        }
        let lower = word.chars().all(|c| !c.is_uppercase());
        let pairs = WORDS
            .iter()
            .filter(|w| w.to_lowercase().starts_with(&word.to_lowercase()))
            .map(|w| {
                let text = if lower {
                    w.to_lowercase()
                } else {
                    w.to_string()
                };
                Pair {
                    display: text.clone(),
                    replacement: text,
                }
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        Cow::Borrowed(line)
    }
}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}
