//! How a handler says it failed: transient (worth another attempt) or permanent. Codes
//! are stable and messages are safe to show a client: no paths, keys or error texts.

use crate::db::{DbError, DbFault};

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("{code}: {message}")]
    Permanent {
        code: &'static str,
        message: &'static str,
        /// The document this job works on is `FAILED` too.
        fail_document: bool,
    },
    #[error("{code}: {message}")]
    Transient {
        code: &'static str,
        message: &'static str,
        /// For the log only, never for a client.
        #[source]
        cause: Option<anyhow::Error>,
    },
    /// The run's fence no longer holds (cancelled, or taken over after this worker looked
    /// dead): the run stops without a write-back, as when the heartbeat finds it so.
    /// Neither the job's nor the document's failure.
    #[error("the job moved on without this worker")]
    FenceLost,
}

impl JobError {
    pub fn permanent(code: &'static str, message: &'static str) -> Self {
        Self::Permanent {
            code,
            message,
            fail_document: false,
        }
    }

    /// A permanent failure that also fails the job's document.
    pub fn document_failed(code: &'static str, message: &'static str) -> Self {
        Self::Permanent {
            code,
            message,
            fail_document: true,
        }
    }

    pub fn transient(
        code: &'static str,
        message: &'static str,
        cause: impl Into<anyhow::Error>,
    ) -> Self {
        Self::Transient {
            code,
            message,
            cause: Some(cause.into()),
        }
    }

    /// The database is unavailable under a handler: worth another attempt. Handlers call
    /// [`JobError::database`], which decides whether a fault is this one.
    pub fn database_unavailable(error: impl Into<anyhow::Error>) -> Self {
        Self::transient("database_unavailable", "the database is unavailable", error)
    }

    /// A database error under a handler, classified once ([`DbError::fault`]): data the
    /// database refuses fails the job and its document for good (another attempt would
    /// store the same data); anything else is worth another attempt.
    pub fn database(error: impl Into<DbError>) -> Self {
        let error = error.into();
        match error.fault() {
            DbFault::Data => {
                // A permanent failure carries no cause; this is the one place that still
                // has the server's words, and the operator needs them to find the data.
                tracing::warn!(error = ?error, "the database refused a job's data");
                Self::document_failed(
                    "invalid_data",
                    "the document holds data the database refuses",
                )
            }
            DbFault::StatementTimeout | DbFault::Unavailable => Self::database_unavailable(error),
        }
    }

    /// The object store failed under a handler: worth another attempt.
    pub fn storage_unavailable(error: impl Into<anyhow::Error>) -> Self {
        Self::transient(
            "storage_unavailable",
            "the document storage is unavailable",
            error,
        )
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Permanent { code, .. } | Self::Transient { code, .. } => code,
            Self::FenceLost => "fence_lost",
        }
    }

    pub fn safe_message(&self) -> &'static str {
        match self {
            Self::Permanent { message, .. } | Self::Transient { message, .. } => message,
            Self::FenceLost => "the job moved on without this worker",
        }
    }
}
