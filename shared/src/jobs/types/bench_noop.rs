//! `bench-noop`: succeeds at once. What the benchmark measures with it is the queue
//! itself: enqueue, publish, pop, claim, heartbeat, fenced finish.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::db::jobs::Job;
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::states::TenantStatus;

/// Payload of `bench-noop`: none (`{}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchNoop {}

#[async_trait]
impl BackgroundJob for BenchNoop {
    const JOB_TYPE: &'static str = "bench-noop";
    const DESCRIPTION: Description = Description {
        payload: &[],
        enqueued_by: "quire-bench",
        work: "nothing: measures the queue's own cost",
    };
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Active);
    const TIME_LIMIT: Duration = Duration::from_secs(60);

    async fn run(
        &self,
        _context: &JobContext,
        _job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        Ok(())
    }
}
