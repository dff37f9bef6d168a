//! `World`: one test's database, Redis namespace and tenant, a dispatcher started on
//! demand, and the few statements tests use to put rows into the state they need.

use std::time::Duration;

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::RunQueryDsl;
use quire_shared::broker;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::jobs::{self, Enqueued, Job, NewJob};
use quire_shared::db::outbox::{self, OutboxEvent};
use quire_shared::jobs::{BackgroundJob, BenchNoop};
use quire_shared::redis_client::RedisPool;
use quire_shared::states::JobStatus;
use quire_shared::test_support::TestContext;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use quire_shared::test_support::DEADLINE;

/// The job type of test jobs: its handler does nothing, and no dispatcher code looks
/// at a job's type.
pub const JOB_TYPE: &str = BenchNoop::JOB_TYPE;

pub struct World {
    pub context: TestContext,
    pub pool: PgPool,
    pub redis: RedisPool,
    pub tenant_id: Uuid,
    shutdown: CancellationToken,
}

impl World {
    pub async fn new() -> Self {
        Self::in_context(TestContext::new().await).await
    }

    pub async fn in_context(context: TestContext) -> Self {
        quire_shared::telemetry::init("quire-tests", &context.settings.telemetry);
        let pool = context.pool();
        let redis = RedisPool::build(&context.settings.redis).expect("redis pool");
        let (tenant_id, _) = context.provisioned_tenant("tenant-a", Uuid::now_v7()).await;
        Self {
            context,
            pool,
            redis,
            tenant_id,
            shutdown: CancellationToken::new(),
        }
    }

    /// Runs a dispatcher (publisher and maintenance) until the test ends.
    pub fn start_dispatcher(&self) {
        self.start_dispatcher_with(|_| {});
    }

    /// [`World::start_dispatcher`] with `change` applied to its settings.
    pub fn start_dispatcher_with(&self, change: impl FnOnce(&mut Settings)) {
        let mut settings = self.context.settings.clone();
        change(&mut settings);
        tokio::spawn(quire_dispatcher::run(settings, self.shutdown.child_token()));
    }

    /// A `QUEUED` job with its `PENDING` event due now, as the API enqueues one.
    pub async fn enqueue(&self) -> Enqueued {
        let job = NewJob::new(
            self.tenant_id,
            BenchNoop {},
            self.context.settings.jobs.max_attempts,
            Some(format!("req-{}", Uuid::now_v7().simple())),
        );
        let mut conn = self.pool.get().await.expect("connection");
        jobs::enqueue(&mut conn, &job)
            .await
            .expect("enqueue")
            .expect("a test job never conflicts")
    }

    /// Claims the job as a worker would, with a lease of `lease`.
    pub async fn claim(&self, enqueued: Enqueued, lease: Duration) -> Job {
        let mut conn = self.pool.get().await.expect("connection");
        jobs::claim_job(
            &mut conn,
            enqueued.job_id,
            enqueued.event_id,
            "worker-test",
            Uuid::now_v7(),
            lease,
        )
        .await
        .expect("claim")
        .expect("claimed")
    }

    pub async fn job(&self, job_id: Uuid) -> Job {
        quire_shared::test_support::job(&self.pool, job_id).await
    }

    /// Waits until the job reaches `status`, failing fast if it ends in another state.
    pub async fn wait_for_job(&self, job_id: Uuid, status: JobStatus) -> Job {
        quire_shared::test_support::wait_for_job(&self.pool, job_id, status).await
    }

    /// Lets the job's lease run out, as if its worker had died.
    pub async fn expire_lease(&self, job_id: Uuid) {
        self.execute(
            "UPDATE processing_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            job_id,
        )
        .await;
    }

    /// The job's events, oldest first.
    pub async fn events(&self, job_id: Uuid) -> Vec<OutboxEvent> {
        let mut conn = self.pool.get().await.expect("connection");
        outbox::job_events(&mut conn, job_id).await.expect("events")
    }

    /// Runs `sql` with `$1` bound to `id` (moving a row's clock back, mostly); answers
    /// how many rows it changed.
    pub async fn execute(&self, sql: &str, id: Uuid) -> usize {
        let mut conn = self.pool.get().await.expect("connection");
        diesel::sql_query(sql)
            .bind::<SqlUuid, _>(id)
            .execute(&mut conn)
            .await
            .expect("statement")
    }

    /// The key of the test job type's list.
    pub fn list(&self) -> String {
        broker::queue_key(&self.context.namespace, JOB_TYPE)
    }

    /// The event id of the oldest message in the test job type's list.
    pub async fn oldest_event_id(&self) -> Option<Uuid> {
        broker::oldest_event_ids(&self.redis, &self.context.namespace, &[JOB_TYPE])
            .await
            .expect("read the oldest message")
            .pop()
            .and_then(|(_, event_id)| event_id)
    }

    /// A connection to this test's Redis for commands the protocol never sends (DEL).
    pub async fn redis_command(&self) -> quire_shared::redis_client::RedisConnection {
        self.redis.get().await.expect("redis connection")
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
