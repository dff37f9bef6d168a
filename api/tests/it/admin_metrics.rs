//! `/metrics` is the operators', not the tenants': the public port answers 404 and the
//! admin listener serves it; a scrape reads the stored queue state and never computes
//! it, and the fleet's dispatchers compute it at most once per interval.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use quire_dispatcher::maintenance::{QueueStateRefresh, Task};
use quire_shared::db::{self, SessionKind, tenants};
use quire_shared::jobs::FaultTest;
use quire_shared::redis_client::RedisPool;
use quire_shared::states::TenantStatus;
use quire_shared::test_support;
use serde_json::Value;
use tokio::sync::Barrier;
use uuid::Uuid;

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
            settings.dispatcher.queue_state_top_tenants,
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
    let top_tenants = app.context.settings.dispatcher.queue_state_top_tenants;
    refresh_once_naming(app, top_tenants).await
}

/// As [`refresh_once`], naming `top_tenants` tenants in the per-tenant gauges.
async fn refresh_once_naming(app: &TestApp, top_tenants: usize) -> bool {
    let settings = &app.context.settings;
    let pool = db::build_pool_with(&settings.database, SessionKind::Dispatcher).expect("pool");
    let redis = RedisPool::build(&settings.redis).expect("redis");
    QueueStateRefresh::new(
        pool,
        redis,
        settings.redis.namespace.clone(),
        Duration::ZERO,
        top_tenants,
    )
    .run_once()
    .await
    .expect("a refresh pass")
    .is_some()
}

/// Every sample of `metric` by its one label's value.
fn by_label(text: &str, metric: &str) -> HashMap<String, f64> {
    let prefix = format!("{metric}{{");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            let (_, label) = labels.split_once("=\"")?;
            Some((label.trim_end_matches('"').to_owned(), value.parse().ok()?))
        })
        .collect()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_tenant_gauges_name_the_top_tenants_by_id_and_sum_the_rest_as_other() {
    let app = TestApp::spawn().await;
    let max_attempts = app.context.settings.jobs.max_attempts;
    let mut conn = app.pool.get().await.expect("connection");
    // 30 tenants with 1, 2, …, 30 queued jobs (465 in all); names they chose that must
    // never reach a label.
    let mut depth_of = HashMap::new();
    for depth in 1..=30 {
        let name = format!("chosen-name-{}", Uuid::new_v4().simple());
        let tenant = tenants::create_tenant(&mut conn, &name, TenantStatus::Active)
            .await
            .expect("tenant");
        test_support::enqueue_fault_jobs(
            &app.pool,
            tenant.id,
            depth,
            FaultTest::default(),
            max_attempts,
        )
        .await;
        depth_of.insert(tenant.id.to_string(), depth as f64);
    }
    let id_with = |depth: f64| {
        depth_of
            .iter()
            .find_map(|(id, d)| (*d == depth).then(|| id.clone()))
            .expect("a tenant of that depth")
    };
    // The oldest job of all waits in a tenant outside the top 5 (depth 3); the deepest
    // tenant's oldest waits less long.
    let age = |tenant: String, seconds: i32| {
        diesel::sql_query(
            "UPDATE processing_jobs SET queued_at = now() - $2 * interval '1 second' \
             WHERE id = (SELECT id FROM processing_jobs WHERE tenant_id = $1 LIMIT 1)",
        )
        .bind::<diesel::sql_types::Uuid, _>(Uuid::parse_str(&tenant).expect("uuid"))
        .bind::<diesel::sql_types::Integer, _>(seconds)
    };
    diesel_async::RunQueryDsl::execute(age(id_with(3.0), 1000), &mut conn)
        .await
        .expect("age one job");
    diesel_async::RunQueryDsl::execute(age(id_with(30.0), 500), &mut conn)
        .await
        .expect("age another");

    assert!(refresh_once_naming(&app, 5).await);
    let text = &scrape_all(&app).await[0];
    let queued = by_label(text, "quire_tenant_queued_jobs");
    let oldest = by_label(text, "quire_tenant_oldest_queued_job_seconds");
    assert!(
        !text.contains("chosen-name-"),
        "a tenant's name leaked: {text}"
    );

    // The five deepest by id, and `other`: never more than N + 1 label values.
    let mut expected: HashMap<String, f64> = (26..=30)
        .map(|depth| (id_with(f64::from(depth)), f64::from(depth)))
        .collect();
    expected.insert("other".into(), (1..=25).sum::<i32>().into());
    assert_eq!(queued, expected, "{text}");
    assert_eq!(oldest.len(), 6, "{text}");
    // Together they are every queued job, as the per-type gauge counts them.
    assert_eq!(queued.values().sum::<f64>(), 465.0);
    assert_eq!(
        sample(text, "quire_jobs{type=\"fault-test\",status=\"QUEUED\"}"),
        Some(465.0),
        "{text}"
    );
    // Ages: `other` holds the oldest of the rest; the deepest tenant its own.
    let within = |value: Option<&f64>, seconds: f64| {
        value.is_some_and(|value| (seconds..seconds + 60.0).contains(value))
    };
    assert!(within(oldest.get("other"), 1000.0), "{text}");
    assert!(within(oldest.get(&id_with(30.0)), 500.0), "{text}");
    assert!(
        oldest.get(&id_with(26.0)).is_some_and(|age| *age < 60.0),
        "{text}"
    );
    assert!(
        sample(text, "quire_oldest_queued_job_seconds")
            .is_some_and(|age| within(Some(&age), 1000.0)),
        "{text}"
    );

    // With room for every tenant: all 30 by id, and an empty `other`.
    assert!(refresh_once_naming(&app, 40).await);
    let text = &scrape_all(&app).await[0];
    let queued = by_label(text, "quire_tenant_queued_jobs");
    assert_eq!(queued.len(), 31, "{text}");
    assert_eq!(queued.get("other"), Some(&0.0), "{text}");
    assert_eq!(queued.values().sum::<f64>(), 465.0);
    // N = 0: `other` alone holds the whole backlog.
    assert!(refresh_once_naming(&app, 0).await);
    let text = &scrape_all(&app).await[0];
    let queued = by_label(text, "quire_tenant_queued_jobs");
    assert_eq!(
        queued,
        HashMap::from([("other".to_owned(), 465.0)]),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_tenants_and_queues_show_in_the_gauges() {
    let app = TestApp::spawn().await;
    assert!(refresh_once(&app).await);
    let text = &scrape_all(&app).await[0];
    assert_eq!(sample(text, "quire_paused_tenants"), Some(0.0), "{text}");
    let paused = by_label(text, "quire_queue_paused");
    assert_eq!(paused.get("verify-document"), Some(&0.0), "{text}");
    assert!(paused.values().all(|value| *value == 0.0), "{text}");

    // What the pause actions write (built apart): the tenant's column and a queue row.
    let mut conn = app.pool.get().await.expect("connection");
    let mut paused_tenants = vec![app.tenant_id];
    for _ in 0..2 {
        let name = format!("paused-{}", Uuid::new_v4().simple());
        let tenant = tenants::create_tenant(&mut conn, &name, TenantStatus::Active)
            .await
            .expect("tenant");
        paused_tenants.push(tenant.id);
    }
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query("UPDATE tenants SET processing_paused_at = now() WHERE id = ANY($1)")
            .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(&paused_tenants),
        &mut conn,
    )
    .await
    .expect("pause tenants");
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "INSERT INTO queue_pauses (queue, paused_by) VALUES ('verify-document', 'test')",
        ),
        &mut conn,
    )
    .await
    .expect("pause a queue");

    assert!(refresh_once(&app).await);
    let text = &scrape_all(&app).await[0];
    assert_eq!(sample(text, "quire_paused_tenants"), Some(3.0), "{text}");
    let paused = by_label(text, "quire_queue_paused");
    assert_eq!(paused.get("verify-document"), Some(&1.0), "{text}");
    assert_eq!(paused.get("analyze-document"), Some(&0.0), "{text}");
    assert_eq!(paused.values().sum::<f64>(), 1.0, "{text}");
}
