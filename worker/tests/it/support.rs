//! `World`: one test's database, Redis namespace and tenant, with workers and a
//! dispatcher started in-process on demand. Jobs are `fault-test` jobs, enqueued directly:
//! the worker runs whatever job it is handed, so its tests need no document and no API.

use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::jobs::Job;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{self, RunningService, TestContext};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct World {
    pub context: TestContext,
    pub pool: PgPool,
    pub tenant_id: Uuid,
    shutdown: CancellationToken,
}

impl World {
    /// A fresh database with the fault oracle's tables (every `fault-test` run writes
    /// them) and an active tenant.
    pub async fn new() -> Self {
        let context = TestContext::new().await;
        quire_shared::telemetry::init("quire-tests", &context.settings.telemetry);
        let pool = context.pool();
        test_support::create_oracle_tables(&pool).await;
        let (tenant_id, _) = context.provisioned_tenant("tenant-a", Uuid::now_v7()).await;
        Self {
            context,
            pool,
            tenant_id,
            shutdown: CancellationToken::new(),
        }
    }

    /// A worker with this test's settings, running until drained or the test ends.
    pub fn start_worker(&self) -> RunningService {
        self.start_worker_with(|_| {})
    }

    /// [`World::start_worker`] with `change` applied to its settings.
    pub fn start_worker_with(&self, change: impl FnOnce(&mut Settings)) -> RunningService {
        let mut settings = self.context.settings.clone();
        change(&mut settings);
        RunningService::spawn(quire_worker::run, settings, &self.shutdown)
    }

    /// A dispatcher, until the test ends: it publishes what tests enqueue and the new
    /// events of retries, as in production, so no test imitates the publisher.
    pub fn start_dispatcher(&self) {
        RunningService::spawn(
            quire_dispatcher::run,
            self.context.settings.clone(),
            &self.shutdown,
        );
    }

    /// Enqueues `count` `fault-test` jobs of the tenant with the configured attempts.
    pub async fn enqueue_fault_jobs(&self, count: usize, payload: FaultTest) -> Vec<Uuid> {
        let attempts = self.context.settings.jobs.max_attempts;
        test_support::enqueue_fault_jobs(&self.pool, self.tenant_id, count, payload, attempts).await
    }

    /// A `fault-test` job that works for a minute, once a worker runs it (a worker and a
    /// dispatcher must be started): answers the job as it started.
    pub async fn running_long_job(&self) -> Job {
        let long = FaultTest {
            work_ms: 60_000,
            abort: false,
            transient_failures: 0,
            panic: false,
        };
        let job_id = self.enqueue_fault_jobs(1, long).await[0];
        self.wait_for_job(job_id, JobStatus::Running).await
    }

    pub async fn job(&self, job_id: Uuid) -> Job {
        test_support::job(&self.pool, job_id).await
    }

    /// Waits until the job reaches `status`, failing fast if it ends in another state.
    pub async fn wait_for_job(&self, job_id: Uuid, status: JobStatus) -> Job {
        test_support::wait_for_job(&self.pool, job_id, status).await
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
