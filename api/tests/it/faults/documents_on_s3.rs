//! Scenarios a (`kill -9` workers), b (Redis restarted, once empty) and h (PostgreSQL
//! stopped) with the stack on the S3 backend and real document work: uploads through
//! the api's S3 path while the faults happen, whose analyses read the sources back from
//! S3 (integrity check, text) and write their assets there. Every document ends `READY`
//! exactly once: one analysis job, succeeded, its assets stored and named once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{Array, Int8, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use quire_shared::test_support::{
    PostgresServer, RedisServer, TestContext, TestDatabase, eventually, shared_redis_url,
    shared_s3_settings,
};
use serde_json::Value;
use uuid::Uuid;

use super::stack::{DISPATCHERS, Stack, WORKERS};
use super::{one_at_a_time, scale};

/// The stack's context moved to the shared S3 bucket under a prefix of its own.
fn on_s3(mut context: TestContext) -> TestContext {
    let prefix = context.namespace.clone();
    context.use_s3(shared_s3_settings(&prefix));
    context
}

/// Attempts enough that a run's faults never exhaust a job (a killed run costs one).
const MAX_ATTEMPTS: (&str, &str) = ("QUIRE__JOBS__MAX_ATTEMPTS", "25");

fn start(stack: &mut Stack) {
    for name in ["api"].into_iter().chain(DISPATCHERS).chain(WORKERS) {
        stack.spawn(name, &[MAX_ATTEMPTS]);
    }
}

/// Uploads text documents one after another until told to stop, and answers the ids of
/// those the api accepted (201). Uploads refused by a fault under the api are not
/// counted.
struct Uploader {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Uuid>>,
}

impl Uploader {
    fn start(stack: &Stack, at_most: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let url = format!("http://127.0.0.1:{}/api/documents", stack.api_port);
        let token = stack.token.clone();
        let task = tokio::spawn({
            let stop = Arc::clone(&stop);
            async move {
                let http = reqwest::Client::new();
                let mut accepted = Vec::new();
                let mut index = 0usize;
                while !AtomicBool::load(&stop, Ordering::Relaxed) && accepted.len() < at_most {
                    index += 1;
                    let text = format!("letter {index} of a run with faults, dated 3 March 2024");
                    let form = reqwest::multipart::Form::new().part(
                        "file",
                        reqwest::multipart::Part::bytes(text.into_bytes())
                            .file_name(format!("letter-{index}.txt"))
                            .mime_str("text/plain")
                            .expect("mime"),
                    );
                    let Ok(response) = http
                        .post(&url)
                        .bearer_auth(&token)
                        .multipart(form)
                        .send()
                        .await
                    else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    match response.status().as_u16() {
                        201 => {
                            let body: Value = response.json().await.expect("json");
                            accepted.push(crate::helpers::uuid_at(&body, "/document/id"));
                        }
                        // A fault under the api (the database going away mid-request
                        // may answer 500): not accepted, tried again.
                        500 | 503 => tokio::time::sleep(Duration::from_millis(50)).await,
                        other => panic!("an upload answered {other}"),
                    }
                }
                accepted
            }
        });
        Self { stop, task }
    }

    async fn finish(self) -> Vec<Uuid> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("uploader")
    }
}

/// Per document: how its analysis ended, and what it left in storage.
#[derive(Debug, Default, PartialEq, Eq)]
struct Documents {
    uploaded: usize,
    ready: i64,
    /// Analysis jobs beyond one per document.
    extra_jobs: i64,
    succeeded_jobs: i64,
    /// Current asset rows beyond one per version and kind.
    duplicated_assets: i64,
    /// Objects a version or asset row names that the bucket does not hold.
    missing_objects: usize,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Int8)]
    count: i64,
}

#[derive(QueryableByName)]
struct Key {
    #[diesel(sql_type = Text)]
    storage_key: String,
}

async fn documents(context: &TestContext, pool: &PgPool, ids: &[Uuid]) -> Documents {
    let mut conn = pool.get().await.expect("connection");
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT 'ready' AS name, count(*) AS count FROM documents WHERE id = ANY($1) AND status = 'READY' \
         UNION ALL \
         SELECT 'jobs', count(*) FROM processing_jobs WHERE document_id = ANY($1) AND job_type = 'analyze-document' \
         UNION ALL \
         SELECT 'succeeded', count(*) FROM processing_jobs WHERE document_id = ANY($1) \
             AND job_type = 'analyze-document' AND status = 'SUCCEEDED' \
         UNION ALL \
         SELECT 'assets', count(*) - count(DISTINCT (version_id, kind)) FROM assets \
             WHERE document_id = ANY($1)",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .load(&mut conn)
    .await
    .expect("documents tally");
    let keys: Vec<Key> = diesel::sql_query(
        "SELECT storage_key FROM document_versions WHERE document_id = ANY($1) \
         UNION ALL \
         SELECT storage_key FROM assets WHERE document_id = ANY($1)",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .load(&mut conn)
    .await
    .expect("named keys");
    let stored: std::collections::BTreeSet<String> =
        context.stored_keys().await.into_iter().collect();
    let mut tally = Documents {
        uploaded: ids.len(),
        missing_objects: keys
            .iter()
            .filter(|key| !stored.contains(&key.storage_key))
            .count(),
        ..Documents::default()
    };
    for row in rows {
        match row.name.as_str() {
            "ready" => tally.ready = row.count,
            "jobs" => tally.extra_jobs = row.count - ids.len() as i64,
            "succeeded" => tally.succeeded_jobs = row.count,
            "assets" => tally.duplicated_assets = row.count,
            _ => {}
        }
    }
    tally
}

async fn wait_all_ready(pool: &PgPool, ids: &[Uuid], deadline: Duration) {
    eventually(
        deadline,
        &format!("all {} documents are READY", ids.len()),
        || async {
            let mut conn = pool.get().await.ok()?;
            let row: Row = diesel::sql_query(
                "SELECT 'open' AS name, count(*) AS count FROM documents \
                 WHERE id = ANY($1) AND status <> 'READY'",
            )
            .bind::<Array<SqlUuid>, _>(ids)
            .get_result(&mut conn)
            .await
            .ok()?;
            (row.count == 0).then_some(())
        },
    )
    .await;
}

fn assert_ready_exactly_once(tally: &Documents) {
    assert!(tally.uploaded > 0, "{tally:?}");
    assert_eq!(tally.ready, tally.uploaded as i64, "{tally:?}");
    assert_eq!(tally.succeeded_jobs, tally.uploaded as i64, "{tally:?}");
    assert_eq!(tally.extra_jobs, 0, "{tally:?}");
    assert_eq!(tally.duplicated_assets, 0, "{tally:?}");
    assert_eq!(tally.missing_objects, 0, "{tally:?}");
}

/// a. on S3: a worker killed every ~2 s while documents are uploaded and analyzed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_while_documents_flow_through_s3_leaves_each_ready_once() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(on_s3(TestContext::new().await)).await;
    start(&mut stack);
    stack.wait_until_ready().await;
    let uploader = Uploader::start(&stack, 400 * scale());

    let mut kills = 0;
    while kills < 3 * scale() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        stack.assert_alive();
        let victim = WORKERS[(Uuid::new_v4().as_u128() % WORKERS.len() as u128) as usize];
        stack.kill(victim).await;
        stack.spawn(victim, &[MAX_ATTEMPTS]);
        kills += 1;
    }
    let ids = uploader.finish().await;
    // A killed run is rescued after its lease, then runs again.
    wait_all_ready(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = documents(&stack.context, &stack.pool, &ids).await;
    println!("kill_workers on s3: kills={kills} {tally:?}");
    assert_ready_exactly_once(&tally);
}

/// b. on S3: Redis restarted twice while documents flow, the second time empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarting_while_documents_flow_through_s3_leaves_each_ready_once() {
    use deadpool_redis::redis;
    let _serial = one_at_a_time().await;
    let mut redis_server = RedisServer::start().await;
    let context = on_s3(TestContext::with_redis_url(&redis_server.url()).await);
    let mut stack = Stack::new(context).await;
    start(&mut stack);
    stack.wait_until_ready().await;
    let uploader = Uploader::start(&stack, 400 * scale());

    for round in 1..=2 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if round == 2 {
            let client = redis::Client::open(redis_server.url()).expect("client");
            let mut conn = client
                .get_multiplexed_async_connection()
                .await
                .expect("redis");
            let _: String = redis::cmd("FLUSHALL")
                .query_async(&mut conn)
                .await
                .expect("flushall");
        }
        redis_server.restart().await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ids = uploader.finish().await;
    wait_all_ready(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = documents(&stack.context, &stack.pool, &ids).await;
    println!("redis_restarts on s3: {tally:?}");
    assert_ready_exactly_once(&tally);
}

/// h. on S3: PostgreSQL stopped while documents are analyzed; uploads answer 503 until
/// it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopping_while_documents_flow_through_s3_leaves_each_ready_once() {
    let _serial = one_at_a_time().await;
    let postgres = PostgresServer::start();
    let database = TestDatabase::create_on(&postgres.admin_url()).await;
    let context = on_s3(TestContext::with_servers(database, &shared_redis_url()));
    let mut stack = Stack::new(context).await;
    start(&mut stack);
    stack.wait_until_ready().await;
    let uploader = Uploader::start(&stack, 150 * scale());
    eventually(
        Duration::from_secs(60),
        "documents are being uploaded",
        || async {
            let mut conn = stack.pool.get().await.ok()?;
            let row: Row =
                diesel::sql_query("SELECT 'uploaded' AS name, count(*) AS count FROM documents")
                    .get_result(&mut conn)
                    .await
                    .ok()?;
            (row.count >= 50).then_some(())
        },
    )
    .await;

    postgres.stop();
    // The uploader keeps trying: while the database is down every upload is a 503.
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/api/documents", stack.api_port);
    let problem: Value = eventually(Duration::from_secs(15), "an upload answers 503", || async {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(b"sent while the database is down".to_vec())
                .file_name("down.txt")
                .mime_str("text/plain")
                .expect("mime"),
        );
        let response = http
            .post(&url)
            .bearer_auth(&stack.token)
            .multipart(form)
            .send()
            .await
            .ok()?;
        if response.status() != 503 {
            return None;
        }
        assert_eq!(
            response.headers().get("content-type")?.to_str().ok()?,
            "application/problem+json"
        );
        response.json().await.ok()
    })
    .await;
    assert_eq!(problem["code"], "service_unavailable");
    postgres.start_again();

    let ids = uploader.finish().await;
    wait_all_ready(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = documents(&stack.context, &stack.pool, &ids).await;
    println!("postgres_restart on s3: {tally:?}");
    assert_ready_exactly_once(&tally);
}
