//! The registered job types behind one object-safe face, for code that meets a job by
//! its type string: the worker (run a claimed row), the catalogue, the dispatcher's
//! list of queues.

use std::marker::PhantomData;

use async_trait::async_trait;
use diesel_async::AsyncPgConnection;
use tokio_util::sync::CancellationToken;

use super::{BackgroundJob, JobContext, JobError, JobSpec};
use crate::db::DbError;
use crate::db::jobs::Job;
use crate::states::TenantStatus;

/// A registered job type, met by its type string.
pub trait Runnable: Send + Sync {
    fn spec(&self) -> JobSpec;

    /// The job's payload as its type's handler: parsed once per run. A payload that does
    /// not fit fails the job for good (no retry can fix it).
    fn prepare(&self, job: &Job) -> Result<Box<dyn Prepared>, JobError>;

    /// Fails at once, with a safe code, unless the job's tenant is in the state the type
    /// requires (DESIGN's `ensure_active_tenant`). The worker calls it for every job
    /// before its handler runs, with the tenant state its claim read (`None`: gone).
    fn check_tenant(&self, actual: Option<TenantStatus>) -> Result<(), JobError> {
        match self.spec().required_tenant_status {
            None => Ok(()),
            Some(required) if actual == Some(required) => Ok(()),
            Some(TenantStatus::Active) => Err(JobError::permanent(
                "tenant_inactive",
                "the tenant is not active",
            )),
            Some(_) => Err(JobError::permanent(
                "tenant_state",
                "the tenant is not in the state this job needs",
            )),
        }
    }
}

/// One job's parsed payload, ready to run and to commit its success.
#[async_trait]
pub trait Prepared: Send + Sync {
    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError>;

    fn writes_on_success(&self) -> bool;

    async fn commit_success(
        &self,
        context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError>;
}

#[async_trait]
impl<J: BackgroundJob> Prepared for J {
    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        BackgroundJob::run(self, context, job, cancelled).await
    }

    fn writes_on_success(&self) -> bool {
        J::WRITES_ON_SUCCESS
    }

    async fn commit_success(
        &self,
        context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        BackgroundJob::commit_success(self, context, conn, job).await
    }
}

/// The registration of one job type (see `types/mod.rs`).
pub struct Entry<J>(PhantomData<fn() -> J>);

impl<J: BackgroundJob> Entry<J> {
    pub const NEW: Self = Self(PhantomData);
}

impl<J: BackgroundJob> Runnable for Entry<J> {
    fn spec(&self) -> JobSpec {
        JobSpec::of::<J>()
    }

    fn prepare(&self, job: &Job) -> Result<Box<dyn Prepared>, JobError> {
        let payload: J = serde_json::from_value(job.payload.clone())
            .map_err(|_| JobError::permanent("invalid_payload", "the job payload is not valid"))?;
        Ok(Box::new(payload))
    }
}

/// The registered type with this type string.
pub fn find(job_type: &str) -> Option<&'static dyn Runnable> {
    super::types::REGISTERED
        .iter()
        .copied()
        .find(|runnable| runnable.spec().job_type == job_type)
}

/// Every registered type's spec, in registration order.
pub fn catalogue() -> impl Iterator<Item = JobSpec> {
    super::types::REGISTERED
        .iter()
        .map(|runnable| runnable.spec())
}

/// Every registered type string (the queues a worker serves by default).
pub fn job_types() -> impl Iterator<Item = &'static str> {
    catalogue().map(|spec| spec.job_type)
}

/// The types whose outcome is their document's status (`OWNS_DOCUMENT_STATUS`).
pub fn document_status_owners() -> Vec<&'static str> {
    catalogue()
        .filter(|spec| spec.owns_document_status)
        .map(|spec| spec.job_type)
        .collect()
}

/// The types that run only in a worker's analysis slots (`ANALYSIS_SLOT`): the worker
/// pops them only while one is free, and the dispatcher bounds their queues by them.
pub fn analysis_slot_types() -> Vec<&'static str> {
    catalogue()
        .filter(|spec| spec.analysis_slot)
        .map(|spec| spec.job_type)
        .collect()
}

/// The types an API client or operator may see (never the fault suite's).
pub fn public_job_types() -> impl Iterator<Item = JobSpec> {
    catalogue().filter(|spec| spec.public)
}
