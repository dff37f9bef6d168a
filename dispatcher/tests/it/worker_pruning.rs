//! Worker-registry pruning: rows of workers that died without removing their own are
//! forgotten after an hour; live workers stay.

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use quire_dispatcher::maintenance::{Task, WorkerPruning};
use quire_shared::db::workers::{self, WorkerReport};

use crate::support::World;

#[derive(diesel::QueryableByName)]
struct Id {
    #[diesel(sql_type = Text)]
    id: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_not_seen_for_an_hour_is_forgotten_and_a_live_one_stays() {
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    let queues = vec!["bench-noop".to_owned()];
    for id in ["worker-gone", "worker-live"] {
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
    diesel::sql_query(
        "UPDATE workers SET last_seen_at = now() - interval '61 minutes' WHERE id = 'worker-gone'",
    )
    .execute(&mut conn)
    .await
    .expect("age the gone worker");

    let pruned = WorkerPruning::new(world.pool.clone())
        .run_once()
        .await
        .expect("worker pruning");

    assert_eq!(pruned, 1);
    let left: Vec<String> = diesel::sql_query("SELECT id FROM workers ORDER BY id")
        .load::<Id>(&mut conn)
        .await
        .expect("workers")
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(left, ["worker-live"]);
}
