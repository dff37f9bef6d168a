//! `/metrics` is the operators', not the tenants': the public port answers 404 and the
//! admin listener serves it; a scrape reads the stored queue state and never computes
//! it, and the fleet's dispatchers compute it at most once per interval.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use quire_dispatcher::maintenance::{QueueStateRefresh, Task};
use quire_shared::db::{self, SessionKind};
use quire_shared::jobs::FaultTest;
use quire_shared::redis_client::RedisPool;
use serde_json::Value;
use tokio::sync::Barrier;

use crate::helpers::TestApp;

/// Concurrent scrapes and refresh passes: enough to race, few enough for 2 cores.
const SCRAPES: usize = 40;
const PASSES: usize = 8;

/// The value of the one sample named exactly `series` (name and labels), if any.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
}

async fn scrape_all(app: &TestApp) -> Vec<String> {
    let barrier = Arc::new(Barrier::new(SCRAPES));
    let url = format!("{}/metrics", app.admin_address);
    join_all((0..SCRAPES).map(|_| {
        let (barrier, http, url) = (Arc::clone(&barrier), app.http.clone(), url.clone());
        async move {
            barrier.wait().await;
            let response = http.get(&url).send().await.expect("scrape");
            assert_eq!(response.status(), 200);
            response.text().await.expect("body")
        }
    }))
    .await
}

/// `PASSES` refresh passes at once, as that many dispatchers would run them; answers
/// how many refreshed.
async fn refresh_all(app: &TestApp, interval: Duration) -> usize {
    let settings = &app.context.settings;
    let pool = db::build_pool_with(&settings.database, SessionKind::Dispatcher).expect("pool");
    let redis = RedisPool::build(&settings.redis).expect("redis");
    let barrier = Arc::new(Barrier::new(PASSES));
    let reports = join_all((0..PASSES).map(|_| {
        let task = QueueStateRefresh::new(
            pool.clone(),
            redis.clone(),
            settings.redis.namespace.clone(),
            interval,
        );
        let barrier = Arc::clone(&barrier);
        async move {
            barrier.wait().await;
            task.run_once().await.expect("a refresh pass")
        }
    }))
    .await;
    reports.iter().filter(|report| report.is_some()).count()
}

/// One refresh pass with a zero interval (the stored state is always old enough): it
/// refreshes unless another pass holds the lock, and nothing else runs one here. (Several
/// passes at a zero interval may each refresh in turn: which do depends on timing.)
async fn refresh_once(app: &TestApp) -> bool {
    let settings = &app.context.settings;
    let pool = db::build_pool_with(&settings.database, SessionKind::Dispatcher).expect("pool");
    let redis = RedisPool::build(&settings.redis).expect("redis");
    QueueStateRefresh::new(
        pool,
        redis,
        settings.redis.namespace.clone(),
        Duration::ZERO,
    )
    .run_once()
    .await
    .expect("a refresh pass")
    .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_port_answers_404_for_metrics_and_the_admin_listener_serves_them() {
    let app = TestApp::spawn().await;
    let public = app
        .http
        .get(format!("{}/metrics", app.address))
        // What Prometheus sends.
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        )
        .send()
        .await
        .expect("public scrape");
    assert_eq!(public.status(), 404);
    assert_eq!(public.headers()["content-type"], "application/problem+json");
    let body: Value = public.json().await.expect("json");
    assert_eq!(body["code"], "not_found", "{body}");

    for probe in ["/healthz", "/readyz"] {
        let response = app
            .http
            .get(format!("{}{probe}", app.admin_address))
            .send()
            .await
            .expect("probe");
        assert_eq!(response.status(), 200, "{probe} on the admin listener");
    }
    // The public port keeps its probes for load balancers.
    for probe in ["/healthz", "/readyz"] {
        let response = app.get_as("", probe).await;
        assert_eq!(response.status(), 200, "{probe} on the public port");
    }
    let admin = app
        .http
        .get(format!("{}/metrics", app.admin_address))
        .send()
        .await
        .expect("admin scrape");
    assert_eq!(admin.status(), 200);
    assert!(
        admin.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_scrapes_never_compute_the_queue_state_and_dispatchers_compute_it_once_per_interval()
 {
    let app = TestApp::spawn().await;
    app.enqueue_fault_jobs(3, FaultTest::default()).await;
    // Long enough that no pass of this test finds the state due again by the clock.
    let interval = Duration::from_secs(3600);

    // No dispatcher runs: however many scrape at once, nobody computes the state.
    for text in scrape_all(&app).await {
        assert_eq!(
            sample(&text, "quire_queue_state_refreshes_total"),
            None,
            "{text}"
        );
        assert!(!text.contains("quire_jobs{"), "a scrape computed: {text}");
    }

    // Dispatchers racing: exactly one computes, the others skip.
    assert_eq!(refresh_all(&app, interval).await, 1);
    for text in scrape_all(&app).await {
        assert_eq!(
            sample(&text, "quire_queue_state_refreshes_total"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "quire_jobs{type=\"fault-test\",status=\"QUEUED\"}"),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "quire_outbox_events{status=\"PENDING\"}"),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "quire_queue_length{queue=\"fault-test\"}"),
            Some(0.0),
            "{text}"
        );
    }

    // Within the interval, passes find it fresh: nobody computes again.
    assert_eq!(refresh_all(&app, interval).await, 0);
    let text = &scrape_all(&app).await[0];
    assert_eq!(
        sample(text, "quire_queue_state_refreshes_total"),
        Some(1.0),
        "{text}"
    );
    // Once an interval has passed (a zero interval: at once), one pass refreshes.
    assert!(refresh_once(&app).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_estimated_from_the_statistics_never_counted() {
    let app = TestApp::spawn().await;
    let ids = app.enqueue_fault_jobs(5, FaultTest::default()).await;
    let mut conn = app.pool.get().await.expect("connection");
    // Finished by hand: the estimate reads the statistics ANALYZE keeps, so until the
    // table is analyzed the finished states are left out rather than counted.
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "UPDATE processing_jobs SET status = 'SUCCEEDED', finished_at = now() \
             WHERE id = ANY($1)",
        )
        .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(&ids[..4]),
        &mut conn,
    )
    .await
    .expect("finish four");
    assert!(refresh_once(&app).await);
    let text = &scrape_all(&app).await[0];
    assert_eq!(
        sample(text, "quire_jobs{type=\"fault-test\",status=\"QUEUED\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "quire_jobs{type=\"fault-test\",status=\"SUCCEEDED\"}"),
        None,
        "not analyzed yet: {text}"
    );

    diesel_async::SimpleAsyncConnection::batch_execute(
        &mut *conn,
        "ANALYZE processing_jobs; ANALYZE outbox_events",
    )
    .await
    .expect("analyze");
    assert!(refresh_once(&app).await);
    let text = &scrape_all(&app).await[0];
    // A table this small is sampled whole: the estimate is exact.
    assert_eq!(
        sample(text, "quire_jobs{type=\"fault-test\",status=\"SUCCEEDED\"}"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "quire_jobs{type=\"fault-test\",status=\"QUEUED\"}"),
        Some(1.0),
        "{text}"
    );
}
