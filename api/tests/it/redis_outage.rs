//! The API through a Redis outage: an upload and reads never touch Redis. What the
//! dispatcher does meanwhile (a failed push put back with a safe error, published once
//! Redis is back) is tested in the dispatcher crate (`dispatcher/tests/it/redis_outage.rs`).

use quire_shared::states::JobStatus;
use quire_shared::test_support::{RedisServer, TestContext};

use crate::helpers::TestApp;

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
    assert_eq!(app.job(job_id).await.status, JobStatus::Queued);

    // Nobody touches anything: Redis comes back, empty, and the job runs.
    redis.restart().await;
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
}
