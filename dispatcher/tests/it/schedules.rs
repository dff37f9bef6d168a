//! Periodic jobs: a schedule's slot is claimed in PostgreSQL once across any number of
//! dispatchers, a missed slot runs once on catch-up, the trash is emptied after
//! `trash_days` (fairly, skipping documents being purged) and the scrub walks every
//! version in bounded slots.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::{Int8, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_dispatcher::maintenance::schedules::Ran;
use quire_dispatcher::maintenance::{Schedules, Task};
use quire_shared::actions::documents::{self as document_actions, DocumentCaller};
use quire_shared::actions::trash;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::schedules::{self, Outcome};
use quire_shared::schedules::ScheduleName;
use time::OffsetDateTime;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::support::World;

const DAY_SECONDS: i64 = 24 * 3600;

/// The test's settings with only `on` enabled, every slot an hour apart.
fn settings_with_only(world: &World, on: ScheduleName, max_per_slot: i64) -> Settings {
    let mut settings = world.context.settings.clone();
    let schedules = &mut settings.schedules;
    schedules.empty_trash.enabled = on == ScheduleName::EmptyTrash;
    schedules.empty_trash.every_seconds = 3600;
    schedules.empty_trash.trash_days = 30;
    schedules.empty_trash.max_per_slot = max_per_slot;
    schedules.integrity_scrub.enabled = on == ScheduleName::IntegrityScrub;
    schedules.integrity_scrub.every_seconds = 3600;
    schedules.integrity_scrub.scrub_days = 30;
    schedules.integrity_scrub.max_per_slot = max_per_slot;
    schedules.storage_gc.enabled = false;
    settings
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

#[derive(diesel::QueryableByName)]
struct Now {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

async fn db_now(pool: &PgPool) -> OffsetDateTime {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query("SELECT now() AS now")
        .get_result::<Now>(&mut conn)
        .await
        .expect("now")
        .now
}

async fn count(pool: &PgPool, sql: &str, id: Uuid) -> i64 {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query(sql)
        .bind::<SqlUuid, _>(id)
        .get_result::<Count>(&mut conn)
        .await
        .expect("count")
        .count
}

/// Runs `sql` with `$1` bound to a schedule's name.
async fn on_schedule(pool: &PgPool, sql: &str, name: ScheduleName) {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query(sql)
        .bind::<Text, _>(name.as_str())
        .execute(&mut conn)
        .await
        .expect("statement");
}

/// Makes the schedule's next slot due now, as if its interval had gone by.
async fn make_due(pool: &PgPool, name: ScheduleName) {
    on_schedule(
        pool,
        "UPDATE schedules SET next_run_at = now() WHERE name = $1",
        name,
    )
    .await;
}

async fn purge_jobs(pool: &PgPool, document_id: Uuid) -> i64 {
    count(
        pool,
        "SELECT count(*) AS count FROM processing_jobs \
         WHERE job_type = 'purge-document' AND document_id = $1",
        document_id,
    )
    .await
}

/// A document of `tenant_id` with `versions` stored versions (the last is current),
/// trashed `trashed_days_ago` days ago or live; its id and its versions' ids.
async fn document(
    world: &World,
    tenant_id: Uuid,
    versions: usize,
    trashed_days_ago: Option<i64>,
) -> (Uuid, Vec<Uuid>) {
    let document_id = Uuid::now_v7();
    let version_ids: Vec<Uuid> = (0..versions).map(|_| Uuid::now_v7()).collect();
    let mut conn = world.pool.get().await.expect("connection");
    diesel::sql_query(
        "INSERT INTO documents (id, tenant_id, title, status, trashed_at) \
         VALUES ($1, $2, 'scheduled', 'READY', \
                 CASE WHEN $3 < 0 THEN NULL ELSE now() - make_interval(secs => $3) END)",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Int8, _>(trashed_days_ago.map_or(-1, |days| days * DAY_SECONDS))
    .execute(&mut conn)
    .await
    .expect("document");
    for (number, version_id) in (1..).zip(&version_ids) {
        diesel::sql_query(
            "INSERT INTO document_versions \
                 (id, document_id, tenant_id, storage_key, size_bytes, sha256, content_type, number) \
             VALUES ($1, $2, $3, 'tenants/' || $3 || '/documents/' || $1, 1, repeat('0', 64), \
                     'text/plain', $4)",
        )
        .bind::<SqlUuid, _>(*version_id)
        .bind::<SqlUuid, _>(document_id)
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<diesel::sql_types::Int4, _>(number)
        .execute(&mut conn)
        .await
        .expect("version");
    }
    diesel::sql_query("UPDATE documents SET current_version_id = $2 WHERE id = $1")
        .bind::<SqlUuid, _>(document_id)
        .bind::<SqlUuid, _>(*version_ids.last().expect("a version"))
        .execute(&mut conn)
        .await
        .expect("current version");
    (document_id, version_ids)
}

async fn run(schedules: &Schedules) -> Vec<Ran> {
    schedules.run_once().await.expect("a schedules pass")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_dispatchers_claiming_the_same_due_slot_run_it_exactly_once() {
    let world = World::new().await;
    let (expired, _) = document(&world, world.tenant_id, 1, Some(31)).await;
    let settings = settings_with_only(&world, ScheduleName::EmptyTrash, 100);
    // Eight dispatchers, each with a pool of its own, as eight processes would have.
    let dispatchers: Vec<Arc<Schedules>> = (0..8)
        .map(|_| {
            Arc::new(Schedules::new(
                world.context.pool(),
                &settings,
                &world.context.store(),
            ))
        })
        .collect();
    for round in 1..=10 {
        let barrier = Arc::new(Barrier::new(dispatchers.len()));
        let passes: Vec<_> = dispatchers
            .iter()
            .map(|dispatcher| {
                let (dispatcher, barrier) = (Arc::clone(dispatcher), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    run(&dispatcher).await
                })
            })
            .collect();
        let mut ran = Vec::new();
        for pass in passes {
            ran.extend(pass.await.expect("pass"));
        }
        assert_eq!(
            ran.len(),
            1,
            "round {round}: exactly one dispatcher ran the slot"
        );
        assert_eq!(
            ran[0].slot.runs, round,
            "round {round}: one slot claimed per round"
        );
        assert_eq!(ran[0].outcome, Outcome::Succeeded, "{}", ran[0].detail);
        make_due(&world.pool, ScheduleName::EmptyTrash).await;
    }
    assert_eq!(
        purge_jobs(&world.pool, expired).await,
        1,
        "the expired document has one purge"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_missed_for_ten_intervals_runs_once_on_catch_up_and_the_next_lands_in_the_future() {
    let world = World::new().await;
    let every = Duration::from_secs(60);
    let name = "catch-up-test";
    let mut conn = world.pool.get().await.expect("connection");
    let first = schedules::claim(&mut conn, name, every)
        .await
        .expect("claim")
        .expect("the first claim of a schedule runs at once");
    assert_eq!(first.runs, 1);
    assert!(
        schedules::claim(&mut conn, name, every)
            .await
            .expect("claim")
            .is_none(),
        "the next slot is not due yet"
    );
    // The fleet was down: the slot due ten and a half intervals ago was never claimed.
    diesel::sql_query(
        "UPDATE schedules SET next_run_at = now() - interval '630 seconds' WHERE name = $1",
    )
    .bind::<Text, _>(name)
    .execute(&mut conn)
    .await
    .expect("move the clock");
    let missed_at = schedules::list(&mut conn)
        .await
        .expect("list")
        .into_iter()
        .find(|row| row.name == name)
        .expect("row")
        .next_run_at;
    let mut claimed = Vec::new();
    for _ in 0..12 {
        claimed.extend(
            schedules::claim(&mut conn, name, every)
                .await
                .expect("claim"),
        );
    }
    assert_eq!(claimed.len(), 1, "ten missed slots run once, not ten times");
    let slot = &claimed[0];
    assert_eq!(slot.runs, 2);
    let now = db_now(&world.pool).await;
    assert!(
        slot.next_run_at > now,
        "the next slot is in the future: {} <= {now}",
        slot.next_run_at
    );
    assert!(
        slot.next_run_at <= now + every,
        "the next slot is at most one interval away: {}",
        slot.next_run_at
    );
    let since_missed = (slot.next_run_at - missed_at).whole_milliseconds();
    assert_eq!(
        since_missed % 60_000,
        0,
        "the schedule keeps its phase: {since_missed} ms after the missed slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_back_after_ten_missed_slots_empties_the_trash_once() {
    let world = World::new().await;
    let settings = settings_with_only(&world, ScheduleName::EmptyTrash, 100);
    let dispatcher = Schedules::new(world.pool.clone(), &settings, &world.context.store());
    assert_eq!(
        run(&dispatcher).await.len(),
        1,
        "the first slot runs at once"
    );
    on_schedule(
        &world.pool,
        "UPDATE schedules SET next_run_at = now() - interval '10 hours' WHERE name = $1",
        ScheduleName::EmptyTrash,
    )
    .await;
    let ran: usize = {
        let mut ran = 0;
        for _ in 0..5 {
            ran += run(&dispatcher).await.len();
        }
        ran
    };
    assert_eq!(ran, 1, "the missed slots run once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trash_older_than_trash_days_gets_purge_jobs_and_younger_trash_and_live_documents_do_not() {
    let world = World::new().await;
    let (expired, _) = document(&world, world.tenant_id, 2, Some(31)).await;
    let (young, _) = document(&world, world.tenant_id, 1, Some(29)).await;
    let (live, _) = document(&world, world.tenant_id, 1, None).await;
    let settings = settings_with_only(&world, ScheduleName::EmptyTrash, 100);
    let ran = run(&Schedules::new(
        world.pool.clone(),
        &settings,
        &world.context.store(),
    ))
    .await;
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].outcome, Outcome::Succeeded);
    assert_eq!(
        ran[0].detail,
        "1 purge jobs queued for 1 tenants; 0 documents skipped"
    );
    assert_eq!(purge_jobs(&world.pool, expired).await, 1);
    assert_eq!(
        purge_jobs(&world.pool, young).await,
        0,
        "29 days in the trash"
    );
    assert_eq!(purge_jobs(&world.pool, live).await, 0, "not in the trash");
    let job_request = count(
        &world.pool,
        "SELECT count(*) AS count FROM outbox_events e JOIN processing_jobs j ON j.id = e.job_id \
         WHERE j.document_id = $1 AND e.status = 'PENDING' \
           AND e.message ->> 'request_id' = 'schedule-empty-trash-1'",
        expired,
    )
    .await;
    assert_eq!(job_request, 1, "the purge is announced, naming its slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_already_being_purged_are_skipped() {
    let world = World::new().await;
    let (being_purged, _) = document(&world, world.tenant_id, 1, Some(40)).await;
    let (expired, _) = document(&world, world.tenant_id, 1, Some(35)).await;
    // An owner purged one by hand already (DELETE of a trashed document).
    let generation = count(
        &world.pool,
        "SELECT generation AS count FROM tenants WHERE id = $1",
        world.tenant_id,
    )
    .await;
    let caller = DocumentCaller {
        tenant_id: world.tenant_id,
        tenant_generation: generation,
        user_id: Uuid::now_v7(),
        configured_attempts: 5,
        request_id: None,
    };
    let mut conn = world.pool.get().await.expect("connection");
    let deleted = document_actions::delete(&mut conn, &caller, being_purged)
        .await
        .expect("purge by hand");
    assert!(matches!(deleted, document_actions::Deleted::PurgeQueued(_)));
    let plan = trash::EmptyTrash {
        trash_days: 30,
        max_per_slot: 100,
        configured_attempts: 5,
    };
    let emptied = trash::empty(&mut conn, &plan, None).await.expect("empty");
    assert_eq!(
        emptied,
        trash::Emptied {
            queued: 1,
            tenants: 1,
            skipped: 0
        },
        "only the document not being purged is queued"
    );
    assert_eq!(purge_jobs(&world.pool, being_purged).await, 1);
    assert_eq!(purge_jobs(&world.pool, expired).await, 1);
    // A second slot finds both being purged.
    let again = trash::empty(&mut conn, &plan, None).await.expect("empty");
    assert_eq!(again.queued, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emptying_the_trash_takes_tenants_in_turns() {
    let world = World::new().await;
    let (tenant_b, _) = world
        .context
        .provisioned_tenant("tenant-b", Uuid::now_v7())
        .await;
    let mut a = Vec::new();
    for days in 31..37 {
        a.push(
            document(&world, world.tenant_id, 1, Some(days + 10))
                .await
                .0,
        );
    }
    // Tenant B's trash is younger than all of A's: oldest-first alone would skip it.
    let mut b = Vec::new();
    for days in 31..33 {
        b.push(document(&world, tenant_b, 1, Some(days)).await.0);
    }
    let mut conn = world.pool.get().await.expect("connection");
    let plan = trash::EmptyTrash {
        trash_days: 30,
        max_per_slot: 4,
        configured_attempts: 5,
    };
    let first = trash::empty(&mut conn, &plan, None).await.expect("empty");
    assert_eq!((first.queued, first.tenants), (4, 2));
    let mut purged_b = 0;
    for document_id in &b {
        purged_b += purge_jobs(&world.pool, *document_id).await;
    }
    assert_eq!(purged_b, 2, "tenant B's trash is in the first slot");
    let mut purged_a = 0;
    for document_id in &a {
        purged_a += purge_jobs(&world.pool, *document_id).await;
    }
    assert_eq!(purged_a, 2, "tenant A gets the other half of the slot");
    // A's two oldest went first.
    for document_id in &a[4..] {
        assert_eq!(purge_jobs(&world.pool, *document_id).await, 1);
    }
    let second = trash::empty(&mut conn, &plan, None).await.expect("empty");
    assert_eq!((second.queued, second.tenants), (4, 1), "the rest of A's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrub_enqueues_bounded_verify_jobs_per_slot_and_covers_every_version_over_slots() {
    let world = World::new().await;
    let mut versions = BTreeSet::new();
    for count in [1, 3, 1, 2] {
        versions.extend(document(&world, world.tenant_id, count, None).await.1);
    }
    let (_, trashed) = document(&world, world.tenant_id, 1, Some(1)).await;
    assert_eq!(versions.len(), 7);
    let settings = settings_with_only(&world, ScheduleName::IntegrityScrub, 3);
    let dispatcher = Schedules::new(world.pool.clone(), &settings, &world.context.store());
    let verify_jobs = || async {
        let mut conn = world.pool.get().await.expect("connection");
        #[derive(diesel::QueryableByName)]
        struct Verified {
            #[diesel(sql_type = Text)]
            version: String,
        }
        diesel::sql_query(
            "SELECT payload ->> 'document_version_id' AS version FROM processing_jobs \
             WHERE job_type = 'verify-document'",
        )
        .load::<Verified>(&mut conn)
        .await
        .expect("verify jobs")
        .into_iter()
        .map(|row| Uuid::parse_str(&row.version).expect("uuid"))
        .collect::<Vec<Uuid>>()
    };
    let mut details = Vec::new();
    let mut per_slot = Vec::new();
    for _ in 0..3 {
        let before = verify_jobs().await.len();
        let ran = run(&dispatcher).await;
        assert_eq!(ran.len(), 1);
        details.push(ran[0].detail.clone());
        per_slot.push(verify_jobs().await.len() - before);
        make_due(&world.pool, ScheduleName::IntegrityScrub).await;
    }
    assert_eq!(
        details,
        [
            "3 versions walked, 3 verify jobs queued",
            "3 versions walked, 3 verify jobs queued",
            "2 versions walked, 1 verify jobs queued; the pass is complete",
        ]
    );
    assert!(per_slot.iter().all(|&queued| queued <= 3), "{per_slot:?}");
    let verified = verify_jobs().await;
    assert_eq!(verified.len(), 7, "each version once: {verified:?}");
    assert_eq!(
        verified.iter().copied().collect::<BTreeSet<Uuid>>(),
        versions,
        "every stored version of a live document is verified"
    );
    assert!(!verified.contains(&trashed[0]), "a trashed document is not");
    // The pass is complete: nothing more until scrub_days after it started.
    let idle = run(&dispatcher).await;
    assert!(
        idle[0].detail.starts_with("the last pass is complete"),
        "{}",
        idle[0].detail
    );
    assert_eq!(verify_jobs().await.len(), 7);
    // Thirty days later the next pass starts from the first version again.
    on_schedule(
        &world.pool,
        "UPDATE schedules SET next_run_at = now(), \
             pass_started_at = pass_started_at - interval '30 days' WHERE name = $1",
        ScheduleName::IntegrityScrub,
    )
    .await;
    let next_pass = run(&dispatcher).await;
    assert!(
        next_pass[0].detail.starts_with("3 versions walked"),
        "{}",
        next_pass[0].detail
    );
}
