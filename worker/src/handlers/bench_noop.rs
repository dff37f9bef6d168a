//! `bench-noop`: succeeds at once. What `quire-bench` measures with it is the
//! queue itself: enqueue, publish, pop, claim, heartbeat, fenced finish.

use async_trait::async_trait;
use quire_shared::catalogue::JobType;
use quire_shared::db::jobs::Job;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct BenchNoop;

#[async_trait]
impl JobHandler for BenchNoop {
    fn job_type(&self) -> JobType {
        JobType::BenchNoop
    }

    async fn run(
        &self,
        _context: &WorkerContext,
        _job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        Ok(())
    }
}
