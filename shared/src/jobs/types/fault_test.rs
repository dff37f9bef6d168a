//! `fault-test`: the fault suite's oracle (feature `fault-injection` only). Each run logs
//! its start in `fault_starts`; its effect is a row in `fault_effects`, keyed by job id,
//! written in the same transaction as the job's success — a second effect for the same
//! job counts in `duplicates` instead of failing. The suite creates both tables.

use std::time::Duration;

use async_trait::async_trait;
use diesel::sql_types::{Int4, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::db::DbError;
use crate::db::jobs::Job;
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::states::TenantStatus;

/// Payload of the fault suite's `fault-test` job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultTest {
    /// How long the handler works, in steps of at most 100 ms.
    pub work_ms: u64,
    /// Abort the whole worker process mid-run (a poison pill).
    pub abort: bool,
    /// Fail transiently on this many first attempts, then succeed.
    #[serde(default)]
    pub transient_failures: i32,
    /// Panic inside the handler's task mid-run (a bug in a handler), after its start is
    /// logged: the worker must fail that attempt, not hold the job, and serve on.
    #[serde(default)]
    pub panic: bool,
}

#[async_trait]
impl BackgroundJob for FaultTest {
    const JOB_TYPE: &'static str = "fault-test";
    const DESCRIPTION: Description = Description {
        payload: &[
            ("work_ms", "integer"),
            ("abort", "boolean"),
            ("transient_failures", "integer"),
            ("panic", "boolean"),
        ],
        enqueued_by: "the fault suite",
        work: "test oracle",
    };
    const TENANT_GUARD: Option<TenantStatus> = None;
    const TIME_LIMIT: Duration = Duration::from_secs(300);
    const PUBLIC: bool = false;
    const WRITES_ON_SUCCESS: bool = true;

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload = self;
        {
            let mut conn = context.connection().await?;
            diesel::sql_query(
                "INSERT INTO fault_starts (job_id, worker_id, attempt) VALUES ($1, $2, $3)",
            )
            .bind::<SqlUuid, _>(job.id)
            .bind::<Text, _>(&context.worker_id)
            .bind::<Int4, _>(job.attempts)
            .execute(&mut conn)
            .await
            .map_err(JobError::database_unavailable)?;
        }
        if job.attempts <= payload.transient_failures {
            return Err(JobError::Transient {
                code: "fault_transient",
                message: "the fault suite asked for a transient failure",
                cause: None,
            });
        }
        if payload.abort {
            tracing::warn!("fault-test job aborts its worker");
            std::process::abort();
        }
        if payload.panic {
            panic!("fault-test job panics in its handler");
        }
        let mut left = payload.work_ms;
        while left > 0 {
            // A step boundary: a cancelled job stops here without its effect.
            if cancelled.is_cancelled() {
                return Ok(());
            }
            let step = left.min(100);
            tokio::time::sleep(Duration::from_millis(step)).await;
            left -= step;
        }
        Ok(())
    }

    async fn commit_success(
        &self,
        _context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        diesel::sql_query(
            "INSERT INTO fault_effects (job_id) VALUES ($1) \
             ON CONFLICT (job_id) DO UPDATE SET duplicates = fault_effects.duplicates + 1",
        )
        .bind::<SqlUuid, _>(job.id)
        .execute(conn)
        .await?;
        Ok(())
    }
}
