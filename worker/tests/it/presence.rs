//! The `workers` registry is read on the database clock that stamped it, never on the
//! clock of the process asking (the API, `quire-admin`, another host).

use diesel_async::RunQueryDsl;
use quire_shared::db::workers::{self, WorkerReport};

use crate::support::World;

/// Gives the session a database clock `offset` away from the real one (and so from this
/// process's): an unqualified `now()` resolves to `skewed.now()` once `skewed` comes
/// before `pg_catalog` in the search path. Tables stay in `public`.
async fn skew_database_clock(conn: &mut diesel_async::AsyncPgConnection, offset: &str) {
    for statement in [
        "CREATE SCHEMA IF NOT EXISTS skewed".to_owned(),
        format!(
            "CREATE OR REPLACE FUNCTION skewed.now() RETURNS timestamptz LANGUAGE sql STABLE \
             AS $$ SELECT pg_catalog.now() + interval '{offset}' $$"
        ),
        "SET search_path = skewed, pg_catalog, public".to_owned(),
    ] {
        diesel::sql_query(statement)
            .execute(conn)
            .await
            .expect("skew the database clock");
    }
}

async fn stamp(conn: &mut diesel_async::AsyncPgConnection, id: &str, ago: &str) {
    diesel::sql_query(format!(
        "UPDATE workers SET last_seen_at = now() - interval '{ago}' WHERE id = '{id}'"
    ))
    .execute(conn)
    .await
    .expect("stamp the worker on the database clock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_workers_are_judged_on_the_database_clock_whatever_the_process_clock_says() {
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    let queues = vec!["bench-noop".to_owned()];
    for id in ["worker-fresh", "worker-stale"] {
        let report = WorkerReport {
            id,
            host: "test-host",
            pid: 1,
            slots: 4,
            busy: 0,
            queues: &queues,
            analysis_slots: 4,
        };
        workers::report(&mut conn, &report).await.expect("report");
    }

    // The database runs ten minutes behind this process: a worker it stamped a second
    // ago is live, although by this process's clock it was last seen ten minutes ago.
    skew_database_clock(&mut conn, "-10 minutes").await;
    stamp(&mut conn, "worker-fresh", "1 second").await;
    stamp(&mut conn, "worker-stale", "5 minutes").await;
    let live: Vec<String> = workers::live(&mut conn)
        .await
        .expect("live workers")
        .into_iter()
        .map(|worker| worker.id)
        .collect();
    assert_eq!(
        live,
        ["worker-fresh"],
        "behind: only the fresh worker is live"
    );

    // Ten minutes ahead: a worker last seen five minutes ago on the database clock is
    // gone, although by this process's clock it was seen in the future.
    skew_database_clock(&mut conn, "10 minutes").await;
    stamp(&mut conn, "worker-fresh", "1 second").await;
    stamp(&mut conn, "worker-stale", "5 minutes").await;
    let live: Vec<String> = workers::live(&mut conn)
        .await
        .expect("live workers")
        .into_iter()
        .map(|worker| worker.id)
        .collect();
    assert_eq!(
        live,
        ["worker-fresh"],
        "ahead: only the fresh worker is live"
    );
}
