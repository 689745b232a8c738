//! One error type for the core. Every variant names what failed (a path, a range, a
//! bucket) so that a user can act on the message without a backtrace.

use datafusion::error::DataFusionError;

pub type Result<T, E = QuiverError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum QuiverError {
    #[error("{path}: no such file or directory")]
    NotFound { path: String },

    #[error("'{pattern}' matched no files")]
    NoMatch { pattern: String },

    #[error("{path}: not a Parquet file ({reason})")]
    NotParquet { path: String, reason: String },

    #[error("{path}: corrupt Parquet footer: {reason}")]
    CorruptFooter { path: String, reason: String },

    #[error("{path}: corrupt Parquet data: {reason}")]
    CorruptData { path: String, reason: String },

    #[error("{path}: reading bytes {start}..{end}: {reason}")]
    Read {
        path: String,
        start: u64,
        end: u64,
        reason: String,
    },

    #[error("{path}: {reason}")]
    Io { path: String, reason: String },

    /// A CSV or JSON file that does not read as its sample said it would.
    #[error("{path}: {reason}")]
    Text { path: String, reason: String },

    #[error("{bucket}: no such bucket")]
    NoSuchBucket { bucket: String },

    #[error("{path}: access denied: {reason}")]
    Denied { path: String, reason: String },

    #[error("{path}: the file changed while the query ran (was {expected}, now {found}); run the query again")]
    Changed {
        path: String,
        expected: String,
        found: String,
    },

    #[error("{location}: {reason}")]
    Unsupported { location: String, reason: String },

    #[error("{0}")]
    Invalid(String),
}

impl QuiverError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    pub fn text(path: &str, reason: impl Into<String>) -> Self {
        Self::Text {
            path: path.to_string(),
            reason: reason.into(),
        }
    }
}

impl From<QuiverError> for DataFusionError {
    fn from(error: QuiverError) -> Self {
        DataFusionError::External(Box::new(error))
    }
}

/// The message a person should see: DataFusion wraps our errors (and its own) in layers
/// such as "External error: …" or "Arrow error: …"; the innermost cause is what matters.
pub fn describe(error: &DataFusionError) -> String {
    match error.find_root() {
        DataFusionError::External(inner) => inner.to_string(),
        DataFusionError::SQL(parse, _) => format!("SQL syntax error: {parse}"),
        DataFusionError::Plan(message) | DataFusionError::Configuration(message) => message.clone(),
        DataFusionError::ResourcesExhausted(message) => format!(
            "the query needs more memory than quiver.memory_limit allows ({message}); raise \
             it, e.g. SET quiver.memory_limit = '16GB' (or 'off'), or read less at once"
        ),
        DataFusionError::SchemaError(schema_error, _) => schema_error.to_string(),
        other => other.to_string(),
    }
}

/// `contain_panic` where panics abort (the browser's build): nothing can be contained, so
/// `work` just runs, and the panic hook prints the message, the only trace of why the
/// module stopped (the page then starts a new one).
#[cfg(panic = "abort")]
pub fn contain_panic<T>(work: impl FnOnce() -> T) -> std::result::Result<T, String> {
    Ok(work())
}

/// Runs `work`, turning a panic into an error message. Arrow's reading of schema
/// flatbuffers (a Parquet file's `ARROW:schema` hint, a fragment's scan schema) asserts
/// instead of failing on some malformed input, and a hostile file must give an error, not
/// take the process down. The panic is not printed: it is reported as the error.
#[cfg(not(panic = "abort"))]
pub fn contain_panic<T>(work: impl FnOnce() -> T) -> std::result::Result<T, String> {
    use std::cell::Cell;
    use std::panic::{catch_unwind, set_hook, take_hook, AssertUnwindSafe};
    thread_local! {
        static CONTAINED: Cell<bool> = const { Cell::new(false) };
    }
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = take_hook();
        set_hook(Box::new(move |info| {
            if !CONTAINED.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = CONTAINED.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(work));
    CONTAINED.with(|c| c.set(outer));
    result.map_err(|panic| {
        (panic.downcast_ref::<String>().cloned())
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "malformed input".into())
    })
}
