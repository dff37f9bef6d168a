//! h. PostgreSQL stopped and started again mid-run.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::test_support::{
    PostgresServer, TestContext, TestDatabase, eventually, shared_redis_url,
};
use serde_json::Value;

use super::oracle::{assert_exactly_once, finished, tally, wait_all_finished};
use super::stack::Stack;
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_503_while_postgres_is_down_and_nothing_is_lost() {
    let _serial = one_at_a_time().await;
    let postgres = PostgresServer::start();
    let database = TestDatabase::create_on(&postgres.admin_url()).await;
    let mut stack = Stack::new(TestContext::with_servers(database, &shared_redis_url())).await;
    stack.start_all().await;
    let ids = stack
        .enqueue(
            500 * scale(),
            FaultTest {
                work_ms: 50,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            25,
        )
        .await;
    eventually(Duration::from_secs(60), "the run progresses", || async {
        (finished(&stack.pool, &ids).await >= ids.len() as i64 / 4).then_some(())
    })
    .await;

    postgres.stop();
    let http = reqwest::Client::new();
    let url = format!(
        "http://127.0.0.1:{}/api/documents/{}",
        stack.api_port,
        uuid::Uuid::now_v7()
    );
    let problem: Value = eventually(Duration::from_secs(15), "the api answers 503", || async {
        let response = http.get(&url).bearer_auth(&stack.token).send().await.ok()?;
        if response.status() != 503 {
            return None;
        }
        let content_type = response
            .headers()
            .get("content-type")?
            .to_str()
            .ok()?
            .to_owned();
        assert_eq!(content_type, "application/problem+json");
        response.json().await.ok()
    })
    .await;
    assert_eq!(problem["code"], "service_unavailable");
    postgres.start_again();

    wait_all_finished(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = tally(&stack.pool, &ids).await;
    println!("postgres_restart: {tally:?}");
    assert_exactly_once(&tally);
}
