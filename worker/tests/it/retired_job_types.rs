//! A job of a type no release runs any more (`jobs::RETIRED_JOB_TYPES`), still queued by
//! an old release, fails with its own code; the worker goes on serving the others.

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::RunQueryDsl;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use uuid::Uuid;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_a_retired_job_type_fails_that_job_and_the_worker_goes_on() {
    let world = World::new().await;
    let (job_id, event_id) = (Uuid::now_v7(), Uuid::now_v7());
    let mut conn = world.pool.get().await.expect("connection");
    // As an old release would have written it.
    diesel::sql_query(
        "WITH job AS ( \
             INSERT INTO processing_jobs (id, tenant_id, job_type, payload, status, max_attempts, current_event_id) \
             VALUES ($1, $3, 'generate-thumbnails', '{}', 'QUEUED', 5, $2) RETURNING id) \
         INSERT INTO outbox_events (id, job_id, tenant_id, queue, message, status) \
         SELECT $2, job.id, $3, 'analyze-document', \
                jsonb_build_object('v', 1, 'event_id', $2, 'job_id', job.id, 'tenant_id', $3, \
                                   'job_type', 'generate-thumbnails'), 'PENDING' FROM job",
    )
    .bind::<SqlUuid, _>(job_id)
    .bind::<SqlUuid, _>(event_id)
    .bind::<SqlUuid, _>(world.tenant_id)
    .execute(&mut conn)
    .await
    .expect("insert a retired job");
    world.start_dispatcher();
    let _worker = world.start_worker();
    let job = world.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("retired_job_type"));
    // The worker still works.
    let next = world.enqueue_fault_jobs(1, FaultTest::default()).await[0];
    world.wait_for_job(next, JobStatus::Succeeded).await;
}
