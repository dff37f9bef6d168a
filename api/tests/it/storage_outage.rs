//! The S3 server goes away under a running system (a private SeaweedFS, killed and
//! started again): jobs that read from it retry with backoff and finish once it is back;
//! an upload during the outage answers 503 problem+json and leaves neither a row nor an
//! object; the API's readiness probe names the store as what is not ready.

use quire_shared::states::JobStatus;
use quire_shared::test_support::{SeaweedServer, TestContext, eventually};
use serde_json::Value;

use crate::helpers::{DEADLINE, TestApp};

async fn document_count(app: &TestApp) -> i64 {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use quire_shared::db::schema::documents;
    let mut conn = app.pool.get().await.expect("connection");
    documents::table
        .filter(documents::tenant_id.eq(app.tenant_id))
        .count()
        .get_result(&mut conn)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_outage_is_transient_for_jobs_and_a_503_for_uploads() {
    let mut server = SeaweedServer::start().await;
    let mut context = TestContext::new().await;
    let prefix = context.namespace.clone();
    context.use_s3(server.s3_settings(&prefix));
    // Attempts enough to outlast a restart (each fails fast: the connection is refused).
    context.settings.jobs.max_attempts = 50;
    let app = TestApp::spawn_in(context).await;
    let (document_id, job_id) = app.upload(b"a letter stored before the outage").await;
    let source = crate::integrity::stored_key(&app, document_id).await;

    server.kill().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    // The analysis reads the source from S3: it fails and goes back to the queue.
    let retried = eventually(DEADLINE, "the analysis is retried", || async {
        let job = app.job(job_id).await;
        assert_ne!(job.status, JobStatus::Failed, "{:?}", job.error_code);
        // Back in the queue after a failed attempt, waiting out its backoff.
        (job.attempts >= 1 && job.status == JobStatus::Queued).then_some(job)
    })
    .await;
    assert_eq!(
        retried.error_code.as_deref(),
        Some("storage_unavailable"),
        "a storage fault is transient"
    );

    let refused = app
        .upload_as(
            &app.token,
            b"uploaded during the outage".to_vec(),
            "late.txt",
        )
        .await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let problem: Value = refused.json().await.expect("json");
    assert_eq!(problem["code"], "service_unavailable");
    assert!(
        !problem.to_string().contains("127.0.0.1"),
        "nothing internal: {problem}"
    );
    assert_eq!(
        document_count(&app).await,
        1,
        "no row for the refused upload"
    );
    // The readiness probe says why, and names no address.
    let ready = app.get_as("", "/readyz").await;
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.headers()["content-type"], "application/problem+json");
    assert!(ready.headers().contains_key("retry-after"));
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["code"], "not_ready", "{body}");
    assert_eq!(body["checks"]["storage"], false, "{body}");
    assert_eq!(body["checks"]["database"], true, "{body}");
    assert_eq!(body["checks"]["redis"], true, "{body}");
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");

    server.restart().await;
    eventually(DEADLINE, "the api is ready again", || async {
        (app.get_as("", "/readyz").await.status() == 200).then_some(())
    })
    .await;
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert!(job.attempts >= 2);
    let document: Value = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(document["status"], "READY");
    let sources: Vec<String> = app
        .context
        .stored_keys()
        .await
        .into_iter()
        .filter(|key| key.contains("/sources/"))
        .collect();
    assert_eq!(sources, [source], "no object of the refused upload");
}
