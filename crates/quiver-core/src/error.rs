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

    #[error("{path}: reading bytes {start}..{end}: {reason}")]
    Read {
        path: String,
        start: u64,
        end: u64,
        reason: String,
    },

    #[error("{path}: {reason}")]
    Io { path: String, reason: String },

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
