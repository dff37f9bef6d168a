use quire_shared::db::outbox;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::{RedisServer, TestContext, eventually};

use crate::helpers::{DEADLINE, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_while_redis_is_down_succeeds_and_runs_once_redis_is_back() {
    let mut redis = RedisServer::start().await;
    let app = TestApp::spawn_in(TestContext::with_redis_url(&redis.url()).await).await;
    app.start_dispatcher();
    let _worker = app.start_worker();

    redis.kill().await;
    let (document_id, job_id) = app.upload(b"uploaded while the broker is down").await;
    // Reads never touch Redis either.
    let read = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(read.status(), 200);

    // The dispatcher tried, failed, and put the event back: nothing is lost or dropped.
    let event = eventually(DEADLINE, "a failed publish is recorded", || async {
        let mut conn = app.pool.get().await.ok()?;
        let events = outbox::job_events(&mut conn, job_id).await.ok()?;
        let event = events.into_iter().next()?;
        (event.publish_attempts >= 1 && event.status == EventStatus::Pending).then_some(event)
    })
    .await;
    let error = event.last_error.expect("a safe error is recorded");
    assert!(
        !error.contains("redis://") && !error.contains("127.0.0.1"),
        "{error}"
    );
    assert_eq!(app.job(job_id).await.status, JobStatus::Queued);

    // Nobody touches anything: Redis comes back, empty, and the job runs.
    redis.restart().await;
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
}
