//! Awaiting a condition with a deadline: tests never sleep for a fixed time and hope.

use std::future::Future;
use std::time::Duration;

/// Polls `probe` until it returns `Some`, panicking with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match within(deadline, probe).await {
        Some(value) => value,
        None => panic!("timed out after {deadline:?} waiting until {what}"),
    }
}

/// Polls `probe` until it returns `Some`, or `None` after `deadline`: for a caller that
/// does something else than fail when the condition never came.
pub async fn within<T, F, Fut>(deadline: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = tokio::time::Instant::now();
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if started.elapsed() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to [`super::DEADLINE`]) until a session of `pool`'s database waits for a
/// lock: a race test's sign that the statement it started is blocked on the row it holds.
pub async fn await_lock_wait(pool: &crate::db::PgPool) {
    #[derive(diesel::QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        waiting: bool,
    }
    eventually(super::DEADLINE, "a session waits for a lock", || async {
        let mut conn = pool.get().await.expect("connection");
        let row: Waiting = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                                WHERE datname = current_database() AND wait_event_type = 'Lock') \
                 AS waiting",
            ),
            &mut conn,
        )
        .await
        .expect("pg_stat_activity");
        row.waiting.then_some(())
    })
    .await
}
