//! What an operator sees: health and metrics on every process (the real binaries, each
//! with its own metrics registry; the API's on its admin listener), metrics that agree
//! with the database after 1,000 jobs, and the admin CLI's inspection commands and
//! actions.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{TestContext, eventually, free_port};
use serde_json::Value;

use crate::faults::stack::Stack;
use crate::helpers::TestApp;

/// The sum of every sample of `name` whose labels include all of `labels`.
fn sample_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let wanted = metric == name
                && labels
                    .iter()
                    .all(|(key, val)| label_text.contains(&format!("{key}=\"{val}\"")));
            wanted.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

async fn get_text(http: &reqwest::Client, url: &str) -> (u16, String) {
    let response = http.get(url).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_is_observable_and_metrics_agree_with_the_database() {
    let mut stack = Stack::new(TestContext::new().await).await;
    let (admin_port, dispatcher_port, worker_port) = (free_port(), free_port(), free_port());
    let admin_listen = format!("127.0.0.1:{admin_port}");
    stack.spawn("api", &[("QUIRE__SERVER__ADMIN_LISTEN", &admin_listen)]);
    let dispatcher_listen = format!("127.0.0.1:{dispatcher_port}");
    stack.spawn(
        "dispatcher-1",
        &[("QUIRE__DISPATCHER__PROBE_LISTEN", &dispatcher_listen)],
    );
    let worker_listen = format!("127.0.0.1:{worker_port}");
    stack.spawn(
        "worker-1",
        &[
            ("QUIRE__WORKER__PROBE_LISTEN", &worker_listen),
            ("QUIRE__WORKER__CONCURRENCY", "16"),
        ],
    );
    stack.wait_until_ready().await;
    let http = reqwest::Client::new();
    let api = format!("http://127.0.0.1:{}", stack.api_port);
    let admin = format!("http://127.0.0.1:{admin_port}");
    let dispatcher = format!("http://127.0.0.1:{dispatcher_port}");
    let worker = format!("http://127.0.0.1:{worker_port}");
    for base in [&api, &admin, &dispatcher, &worker] {
        eventually(
            Duration::from_secs(30),
            &format!("{base} is ready"),
            || async {
                // The api can be ready before the others listen: refused is "not yet".
                let response = http.get(format!("{base}/readyz")).send().await.ok()?;
                let status = response.status().as_u16();
                let body = response.text().await.ok()?;
                (status == 200 && body.contains("\"ready\"")).then_some(())
            },
        )
        .await;
        assert_eq!(get_text(&http, &format!("{base}/healthz")).await.0, 200);
    }

    let ids = stack.enqueue(1000, FaultTest::default(), 5).await;
    assert_eq!(ids.len(), 1000);
    let pool = stack.pool.clone();
    eventually(Duration::from_secs(120), "1,000 jobs succeeded", || async {
        let mut conn = pool.get().await.ok()?;
        let count = count_succeeded(&mut conn).await;
        (count == 1000).then_some(())
    })
    .await;

    let (_, worker_metrics) = get_text(&http, &format!("{worker}/metrics")).await;
    let finished = sample_sum(
        &worker_metrics,
        "quire_jobs_finished_total",
        &[("type", "fault-test"), ("outcome", "succeeded")],
    );
    assert_eq!(finished, 1000.0, "{worker_metrics}");
    assert_eq!(
        sample_sum(
            &worker_metrics,
            "quire_jobs_claimed_total",
            &[("type", "fault-test")]
        ),
        1000.0
    );
    assert_eq!(sample_sum(&worker_metrics, "quire_worker_slots", &[]), 16.0);
    assert_eq!(
        sample_sum(
            &worker_metrics,
            "quire_job_run_seconds_count",
            &[("type", "fault-test")]
        ),
        1000.0
    );

    let (_, dispatcher_metrics) = get_text(&http, &format!("{dispatcher}/metrics")).await;
    let published = sample_sum(&dispatcher_metrics, "quire_events_published_total", &[]);
    let republished = sample_sum(
        &dispatcher_metrics,
        "quire_lost_messages_republished_total",
        &[],
    );
    assert_eq!(published - republished, 1000.0, "{dispatcher_metrics}");

    // The public port serves no metrics; the admin listener serves the queue state a
    // dispatcher stored. Finished jobs are estimated from the statistics ANALYZE keeps
    // (autovacuum's, here by hand), exact for a table this small.
    assert_eq!(get_text(&http, &format!("{api}/metrics")).await.0, 404);
    let mut conn = pool.get().await.expect("connection");
    diesel_async::SimpleAsyncConnection::batch_execute(&mut *conn, "ANALYZE processing_jobs")
        .await
        .expect("analyze");
    drop(conn);
    let api_metrics = eventually(
        Duration::from_secs(30),
        "a refreshed queue state counts the 1,000 jobs",
        || async {
            let (status, text) = get_text(&http, &format!("{admin}/metrics")).await;
            let succeeded = sample_sum(
                &text,
                "quire_jobs",
                &[("type", "fault-test"), ("status", "SUCCEEDED")],
            );
            (status == 200 && succeeded == 1000.0).then_some(text)
        },
    )
    .await;
    assert_eq!(
        sample_sum(&api_metrics, "quire_jobs", &[("status", "QUEUED")]),
        0.0
    );
    assert_eq!(
        sample_sum(
            &api_metrics,
            "quire_queue_length",
            &[("queue", "fault-test")]
        ),
        0.0
    );
    assert_eq!(sample_sum(&api_metrics, "quire_workers_live", &[]), 1.0);
    assert_eq!(
        sample_sum(&api_metrics, "quire_live_worker_slots", &[]),
        16.0
    );
    assert_eq!(
        sample_sum(&api_metrics, "quire_outbox_lag_seconds", &[]),
        0.0
    );
    assert!(sample_sum(&api_metrics, "quire_queue_state_refreshes_total", &[]) >= 1.0);
}

async fn count_succeeded(conn: &mut diesel_async::AsyncPgConnection) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::Int8)]
        count: i64,
    }
    diesel_async::RunQueryDsl::get_result::<Count>(
        diesel::sql_query(
            "SELECT count(*) AS count FROM processing_jobs \
             WHERE job_type = 'fault-test' AND status = 'SUCCEEDED'",
        ),
        conn,
    )
    .await
    .map_or(0, |row| row.count)
}

/// `quire-admin jobs|stats|workers` show and act on what the database holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_inspects_retries_and_cancels_jobs() {
    let app = TestApp::spawn().await;
    let run = |args: &[&str]| {
        let (ok, out, err) = app.admin_cli(args);
        assert!(ok, "quire-admin {args:?} failed: {err}");
        out
    };
    // A job that fails once for good, and one left queued (no worker serves it yet).
    let failing = app
        .enqueue_fault_jobs(
            1,
            FaultTest {
                transient_failures: 99,
                ..FaultTest::default()
            },
        )
        .await[0];
    app.start_dispatcher();
    let worker = app.start_worker();
    app.wait_for_job(failing, JobStatus::Failed).await;
    worker.drain().await;
    let queued = app.enqueue_fault_jobs(1, FaultTest::default()).await[0];

    let listed = run(&["jobs", "list", "--status", "failed"]);
    assert!(listed.contains(&failing.to_string()), "{listed}");
    assert!(!listed.contains(&queued.to_string()), "{listed}");
    let shown: Value =
        serde_json::from_str(&run(&["jobs", "show", &failing.to_string()])).expect("json");
    assert_eq!(shown["status"], "FAILED");
    let stats = run(&["stats"]);
    assert!(stats.contains("fault-test\tFAILED\t1"), "{stats}");
    assert!(stats.contains("fault-test\tQUEUED\t1"), "{stats}");
    let seconds = |name: &str| {
        stats
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix('\t'))
            .and_then(|value| value.trim_end_matches('s').parse::<f64>().ok())
    };
    assert!(seconds("outbox lag").is_some(), "{stats}");
    assert!(
        seconds("oldest queued job").is_some_and(|age| age > 0.0),
        "a job waits: {stats}"
    );

    assert!(run(&["jobs", "cancel", &queued.to_string()]).contains("CANCELLED"));
    assert_eq!(app.job(queued).await.status, JobStatus::Cancelled);
    let (ok, _, err) = app.admin_cli(&["jobs", "cancel", &queued.to_string()]);
    assert!(!ok && err.contains("CANCELLED"), "{err}");
    let (ok, _, err) = app.admin_cli(&["jobs", "retry", &queued.to_string()]);
    assert!(!ok && err.contains("not FAILED"), "{err}");

    assert!(run(&["jobs", "retry", &failing.to_string()]).contains("QUEUED"));
    assert_eq!(app.job(failing).await.status, JobStatus::Queued);

    let worker = app.start_worker();
    let listed = eventually(
        Duration::from_secs(30),
        "the worker reports itself",
        || async {
            let out = app.admin_cli(&["workers"]).1;
            out.contains("/4").then_some(out)
        },
    )
    .await;
    // id, host, pid, busy/slots, analysis slots (at most its 4 slots), queues, last seen.
    let fields: Vec<&str> = listed
        .lines()
        .next()
        .expect("a worker")
        .split('\t')
        .collect();
    assert_eq!(fields.len(), 7, "{listed}");
    assert_eq!(fields[4], "4", "{listed}");
    worker.drain().await;
    assert!(
        !run(&["workers"]).contains("/4"),
        "a cleanly stopped worker is forgotten at once"
    );
}
