//! Typed jobs (DESIGN §7). Each job type is ONE file in `types/`: its payload struct
//! implements [`BackgroundJob`], which holds the stable type string, the retry class,
//! the tenant guard, the time limit and the handler. `types/mod.rs` registers each type
//! with one line; the catalogue route, `docs/jobs.md`, the worker's lookup and every
//! enqueue read the type from there. Job types are stable strings on the wire and in
//! the database, never Rust type names.
//!
//! The models: the crates.io worker's `BackgroundJob` (a payload struct with a
//! `JOB_NAME` and `run`) and River's `JobArgs` (`Kind()` plus insert options).

mod catalogue;
mod context;
mod error;
mod registry;
pub mod types;

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::AsyncPgConnection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use catalogue::{JobSpec, RETIRED_JOB_TYPES, render_markdown};
pub use context::JobContext;
pub use error::JobError;
pub use registry::{
    Prepared, Runnable, analysis_slot_types, catalogue, document_status_owners, find, job_types,
    public_job_types,
};
pub use types::*;

use crate::db::DbError;
use crate::db::jobs::Job;
use crate::states::TenantStatus;

/// How a job type's transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryClass {
    /// Retried with jittered exponential backoff up to `jobs.max_attempts` attempts.
    Backoff,
    /// At most three attempts: the signed request it carries expires within minutes.
    ShortLived,
    /// Webhook deliveries: their own backoff (`webhooks.retry_backoff_*`), at most
    /// [`WEBHOOK_MAX_ATTEMPTS`] attempts, and none later than `webhooks.retry_for_seconds`
    /// after the delivery was made (the handler ends it then): up to a day by default.
    Webhook,
}

/// Attempts a webhook delivery gets at most (see [`RetryClass::Webhook`]).
pub const WEBHOOK_MAX_ATTEMPTS: i32 = 20;

impl RetryClass {
    /// Attempts a job of this class gets, given the configured default.
    pub fn max_attempts(self, configured: i32) -> i32 {
        match self {
            Self::Backoff => configured,
            Self::ShortLived => configured.min(3),
            Self::Webhook => WEBHOOK_MAX_ATTEMPTS,
        }
    }
}

/// What the catalogue says of a job type besides its behaviour: shown by
/// `GET /api/jobs/catalogue` and rendered into `docs/jobs.md`.
#[derive(Debug, Clone, Copy)]
pub struct Description {
    /// Payload fields and their JSON types.
    pub payload: &'static [(&'static str, &'static str)],
    pub enqueued_by: &'static str,
    pub work: &'static str,
}

/// A job type: its payload is `Self`. Everything Quire knows of the type is here, so a
/// new type is one file and one registration line in `types/mod.rs`.
#[async_trait]
pub trait BackgroundJob: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The stable type string (queue name, `processing_jobs.job_type`).
    const JOB_TYPE: &'static str;
    const DESCRIPTION: Description;
    const RETRY: RetryClass = RetryClass::Backoff;
    /// The tenant state the job needs; the worker fails it at once otherwise. `None`
    /// only for test jobs.
    const TENANT_GUARD: Option<TenantStatus>;
    /// Wall-clock limit of one attempt; past it the attempt fails transiently.
    const TIME_LIMIT: Duration;
    /// The job's outcome is its document's readiness: the document is `PENDING` while
    /// it waits, `FAILED` when it fails for good or is cancelled. Only the analysis.
    const OWNS_DOCUMENT_STATUS: bool = false;
    /// Listed in the catalogue and `docs/jobs.md` (false for the fault suite's job).
    const PUBLIC: bool = true;
    /// The job decodes images and runs the analysis tools: a worker runs at most
    /// `worker.analysis_concurrency` of these at once, and pops one only while it has an
    /// analysis slot free (their memory, docs/decisions.md "Slots and analysis slots").
    const ANALYSIS_SLOT: bool = false;
    /// True when [`Self::commit_success`] writes anything. Without such writes the fenced
    /// `SUCCEEDED` is one statement on its own: no `BEGIN` and `COMMIT` round trips.
    const WRITES_ON_SUCCESS: bool = false;

    /// The document this job works on (`processing_jobs.document_id`).
    fn document_id(&self) -> Option<Uuid> {
        None
    }

    /// The payload fields that make two active jobs of this type (for the same tenant
    /// and document) the same job, for `enqueue_or_active`: a JSON object the active
    /// job's payload contains. The default: any active job of this type and document.
    fn identity(&self) -> serde_json::Value {
        serde_json::Value::Object(serde_json::Map::new())
    }

    /// Does the work. `cancelled` fires when the job was cancelled or taken over; a
    /// handler checks it at step boundaries (the executor also drops the run at once).
    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError>;

    /// Writes that must commit with the job's success, in the same transaction as the
    /// fenced `SUCCEEDED` (for example the document's new status). A type that
    /// overrides it sets [`Self::WRITES_ON_SUCCESS`].
    async fn commit_success(
        &self,
        _context: &JobContext,
        _conn: &mut AsyncPgConnection,
        _job: &Job,
    ) -> Result<(), DbError> {
        Ok(())
    }
}

/// Attempts a new job of type `J` gets, given the configured default.
pub fn max_attempts<J: BackgroundJob>(configured: i32) -> i32 {
    J::RETRY.max_attempts(configured)
}
