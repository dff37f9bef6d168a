//! Scenario d: a job that completes while the rescuer decides to rescue it.

use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::RunQueryDsl;
use quire_shared::db::jobs;
use quire_shared::db::maintenance;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_finishing_while_the_rescuer_runs_has_exactly_one_outcome() {
    let app = TestApp::spawn().await;
    let rounds = 40;
    let ids = app.enqueue_fault_jobs(rounds, FaultTest::default()).await;
    let (mut completions_won, mut rescues_won) = (0, 0);
    for job_id in ids {
        let mut conn = app.pool.get().await.expect("connection");
        let event_id = app.job(job_id).await.current_event_id.expect("event");
        let job = jobs::claim_job(
            &mut conn,
            job_id,
            event_id,
            "worker-racer",
            Uuid::now_v7(),
            Duration::from_secs(60),
        )
        .await
        .expect("claim")
        .expect("claimed");
        // The worker looks dead: its lease ran out, but it is about to report success.
        diesel::sql_query("UPDATE processing_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
            .bind::<SqlUuid, _>(job_id)
            .execute(&mut conn)
            .await
            .expect("expire lease");
        let fence = job.fence().expect("fence");
        let barrier = Arc::new(Barrier::new(2));
        let (pool_a, pool_b) = (app.pool.clone(), app.pool.clone());
        let (barrier_a, barrier_b) = (Arc::clone(&barrier), Arc::clone(&barrier));
        let completion = tokio::spawn(async move {
            let mut conn = pool_a.get().await.expect("connection");
            barrier_a.wait().await;
            jobs::mark_succeeded(&mut conn, &fence)
                .await
                .expect("complete")
        });
        let rescue = tokio::spawn(async move {
            let mut conn = pool_b.get().await.expect("connection");
            barrier_b.wait().await;
            maintenance::rescue_expired_leases(&mut conn, 100)
                .await
                .expect("rescue")
        });
        let completed = completion.await.expect("completion task");
        let rescued = rescue.await.expect("rescue task");

        let after = app.job(job_id).await;
        if completed {
            completions_won += 1;
            assert_eq!(
                after.status,
                JobStatus::Succeeded,
                "a completed job must stay SUCCEEDED"
            );
            assert_eq!(rescued.requeued, 0);
        } else {
            rescues_won += 1;
            assert_eq!(rescued.requeued, 1);
            assert_eq!(after.status, JobStatus::Queued);
            assert_ne!(
                after.current_event_id,
                Some(event_id),
                "a rescue announces a new event"
            );
        }
    }
    assert_eq!(completions_won + rescues_won, rounds);
}
