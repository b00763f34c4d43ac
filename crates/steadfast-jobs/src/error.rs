//! What can go wrong talking to the job store.

use steadfast::PolicyError;

/// An error from the job store or from invalid options.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobsError {
    /// The retry options are invalid (same messages as [`steadfast::RetryPolicy`]).
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// An option is invalid; names the field and the constraint.
    #[error("invalid {field}: {constraint}")]
    Invalid {
        /// The option.
        field: &'static str,
        /// What it must satisfy.
        constraint: String,
    },
    /// The payload could not be serialized.
    #[error("payload is not serializable: {0}")]
    Payload(#[from] serde_json::Error),
    /// The database failed.
    #[error("job store: {0}")]
    Db(#[from] sqlx::Error),
    /// A migration failed.
    #[error("job store migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// No job with this id.
    #[error("no job with id {0}")]
    NotFound(i64),
}

impl JobsError {
    pub(crate) fn invalid(field: &'static str, constraint: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            constraint: constraint.into(),
        }
    }
}
