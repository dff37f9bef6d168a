//! Quire through a real three-master Redis Cluster: every key shares one hash tag, so the
//! dispatcher's pipelined pushes and the worker's BLMPOP over several lists work there.
//! Uploads go through the API (which never touches Redis on that path), the dispatcher
//! and a worker talk to the cluster, and every job completes.

use quire_shared::states::JobStatus;
use quire_shared::test_support::{DEADLINE, RedisCluster, TestContext, eventually};
use serde_json::Value;

use crate::helpers::{TestApp, uuid_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_flow_through_a_three_master_redis_cluster() {
    let cluster = RedisCluster::start().await;
    let mut context = TestContext::new().await;
    context.settings.redis.cluster_urls = cluster.urls();
    let app = TestApp::spawn_in(context).await;
    let mut jobs = Vec::new();
    for index in 0..30 {
        let response = app
            .upload_as(
                &app.token,
                format!("clustered note {index}").into_bytes(),
                "n.txt",
            )
            .await;
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.expect("json");
        jobs.push(uuid_at(&body, "/job/id"));
    }
    app.start_dispatcher();
    let _worker = app.start_worker();
    for job in jobs {
        app.wait_for_job(job, JobStatus::Succeeded).await;
    }
    // The API's readiness reads the cluster too, and so does the dispatcher's refresh of
    // the queue state the admin listener serves.
    let ready = app.get_as(&app.token, "/readyz").await;
    assert_eq!(ready.status(), 200);
    let url = format!("{}/metrics", app.admin_address);
    eventually(
        DEADLINE,
        "the queue state reads the cluster's lists",
        || async {
            let metrics = app.http.get(&url).send().await.ok()?.text().await.ok()?;
            metrics
                .contains("quire_queue_length{queue=\"analyze-document\"} 0")
                .then_some(())
        },
    )
    .await;
}
