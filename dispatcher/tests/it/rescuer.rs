//! The rescuer: a job whose lease expired (its worker died or hung) is queued again with
//! a new event, or fails `worker_lost` when its attempts are spent; a job that finishes
//! while the rescuer decides keeps exactly one outcome.

use std::sync::Arc;
use std::time::Duration;

use diesel_async::AsyncConnection;
use quire_dispatcher::maintenance::{Rescuer, Task};
use quire_shared::db::maintenance::{Rescued, locks};
use quire_shared::db::{DbError, jobs, scheduler};
use quire_shared::scheduling::Limits;
use quire_shared::states::{EventStatus, JobStatus};
use tokio::sync::Barrier;

use crate::support::World;

/// One rescuer pass, with no other dispatcher holding its lock.
async fn rescue(world: &World) -> Rescued {
    Rescuer::new(world.pool.clone(), 100)
        .run_once()
        .await
        .expect("rescuer")
        .expect("no other dispatcher holds the lock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_queued_again_with_a_new_event_and_a_spent_one_fails() {
    let world = World::new().await;
    let (retried, spent, alive) = (
        world.enqueue().await,
        world.enqueue().await,
        world.enqueue().await,
    );
    for enqueued in [retried, spent, alive] {
        world.claim(enqueued, Duration::from_secs(60)).await;
    }
    world
        .execute(
            "UPDATE processing_jobs SET max_attempts = attempts WHERE id = $1",
            spent.job_id,
        )
        .await;
    world.expire_lease(retried.job_id).await;
    world.expire_lease(spent.job_id).await;

    let rescued = rescue(&world).await;

    assert_eq!((rescued.requeued, rescued.failed), (1, 1));
    let job = world.job(retried.job_id).await;
    assert_eq!(job.status, JobStatus::Queued);
    assert_eq!(job.error_code.as_deref(), Some("worker_lost"));
    let events = world.events(retried.job_id).await;
    assert_eq!(events.len(), 2, "a rescue announces a new event");
    assert_eq!(job.current_event_id, Some(events[1].id));
    assert_eq!(events[1].status, EventStatus::Pending);

    let job = world.job(spent.job_id).await;
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.error_code.as_deref(), Some("worker_lost"));
    assert_eq!(world.events(spent.job_id).await.len(), 1);

    assert_eq!(
        world.job(alive.job_id).await.status,
        JobStatus::Running,
        "a job whose lease runs is left to its worker"
    );
}

/// A job whose worker died had reached the head of its tenant's queue once: queued again,
/// it keeps that place, ahead of what the tenant enqueued since, instead of waiting
/// behind the whole backlog a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescued_job_goes_ahead_of_the_backlog_queued_after_it() {
    let world = World::new().await;
    let lost = world.enqueue().await;
    world
        .execute(
            "UPDATE outbox_events SET status = 'PUBLISHED', published_at = now() WHERE id = $1",
            lost.event_id,
        )
        .await;
    world.claim(lost, Duration::from_secs(60)).await;
    for _ in 0..5 {
        world.enqueue().await;
    }
    world.expire_lease(lost.job_id).await;
    let rescued = rescue(&world).await;
    assert_eq!(rescued.requeued, 1);

    // A round that may publish one event publishes the rescued job's.
    let settings = &world.context.settings;
    let limits = Limits {
        batch_size: 1,
        ..Limits::from_settings(settings)
    };
    let mut conn = world.pool.get().await.expect("connection");
    let claimed = scheduler::open_round(
        &mut conn,
        "dispatcher-test",
        &limits,
        settings.scheduling.max_running_per_tenant,
    )
    .await
    .expect("a round");
    scheduler::commit_round(&mut conn).await.expect("commit");
    let picked: Vec<_> = claimed.events.iter().map(|event| event.job_id).collect();
    assert_eq!(picked, [lost.job_id], "the rescued job goes first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_another_dispatcher_holds_the_rescuer_lock_a_pass_rescues_nothing() {
    let world = World::new().await;
    let enqueued = world.enqueue().await;
    world.claim(enqueued, Duration::from_secs(60)).await;
    world.expire_lease(enqueued.job_id).await;
    let rescuer = Rescuer::new(world.pool.clone(), 100);

    let mut other = world.pool.get().await.expect("connection");
    let skipped = other
        .transaction::<_, DbError, _>(async |other| {
            diesel_async::RunQueryDsl::execute(
                diesel::sql_query("SELECT pg_advisory_xact_lock($1)")
                    .bind::<diesel::sql_types::Int8, _>(locks::RESCUER),
                other,
            )
            .await?;
            Ok(rescuer.run_once().await.expect("rescuer"))
        })
        .await
        .expect("hold the lock");

    assert_eq!(skipped, None);
    assert_eq!(world.job(enqueued.job_id).await.status, JobStatus::Running);
    let rescued = rescuer.run_once().await.expect("rescuer");
    assert_eq!(rescued.map(|rescued| rescued.requeued), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_finishing_while_the_rescuer_runs_has_exactly_one_outcome() {
    let world = World::new().await;
    let rounds = 40;
    let rescuer = Arc::new(Rescuer::new(world.pool.clone(), 100));
    let (mut completions_won, mut rescues_won) = (0, 0);
    for _ in 0..rounds {
        let enqueued = world.enqueue().await;
        let job = world.claim(enqueued, Duration::from_secs(60)).await;
        // The worker looks dead: its lease ran out, but it is about to report success.
        world.expire_lease(enqueued.job_id).await;
        let fence = job.fence().expect("fence");
        let barrier = Arc::new(Barrier::new(2));
        let pool = world.pool.clone();
        let (barrier_a, barrier_b) = (Arc::clone(&barrier), Arc::clone(&barrier));
        let completion = tokio::spawn(async move {
            let mut conn = pool.get().await.expect("connection");
            barrier_a.wait().await;
            jobs::mark_succeeded(&mut conn, &fence)
                .await
                .expect("complete")
        });
        let racing = Arc::clone(&rescuer);
        let rescue = tokio::spawn(async move {
            barrier_b.wait().await;
            racing
                .run_once()
                .await
                .expect("rescue")
                .expect("no other dispatcher holds the lock")
        });
        let completed = completion.await.expect("completion task");
        let rescued = rescue.await.expect("rescue task");

        let after = world.job(enqueued.job_id).await;
        if completed {
            completions_won += 1;
            assert_eq!(
                after.status,
                JobStatus::Succeeded,
                "a completed job must stay SUCCEEDED"
            );
            assert_eq!(rescued.requeued, 0);
        } else {
            rescues_won += 1;
            assert_eq!(rescued.requeued, 1);
            assert_eq!(after.status, JobStatus::Queued);
            assert_ne!(
                after.current_event_id,
                Some(enqueued.event_id),
                "a rescue announces a new event"
            );
        }
    }
    assert_eq!(completions_won + rescues_won, rounds);
}
