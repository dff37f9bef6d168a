//! Publication-claim recovery: a dispatcher that died mid-batch leaves its events
//! `PUBLISHING`; past `claim_timeout` they are `PENDING` again.

use std::time::Duration;

use quire_dispatcher::maintenance::{ClaimRecovery, Task};
use quire_shared::db::outbox;
use quire_shared::states::EventStatus;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_older_than_the_timeout_returns_to_pending_and_a_fresh_one_stays() {
    let world = World::new().await;
    let (abandoned, fresh) = (world.enqueue().await, world.enqueue().await);
    {
        let mut conn = world.pool.get().await.expect("connection");
        let claimed = outbox::claim_due_events(&mut conn, "dispatcher-dead", 10)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 2);
    }
    world
        .execute(
            "UPDATE outbox_events SET claimed_at = now() - interval '1 hour' WHERE id = $1",
            abandoned.event_id,
        )
        .await;
    let recovery = ClaimRecovery::new(world.pool.clone(), Duration::from_secs(30));

    let released = recovery.run_once().await.expect("claim recovery");

    assert_eq!(released, 1);
    let abandoned = world.events(abandoned.job_id).await.remove(0);
    assert_eq!(abandoned.status, EventStatus::Pending);
    assert_eq!(
        abandoned.publish_attempts, 0,
        "an abandoned claim is not a failed publish"
    );
    assert_eq!(
        world.events(fresh.job_id).await.remove(0).status,
        EventStatus::Publishing,
        "a claim within its timeout belongs to a live dispatcher"
    );
}
