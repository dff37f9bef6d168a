//! The worker claims a popped batch in one statement: each row keeps its own guard, so
//! the batch claims exactly what its messages would have one by one, and racing
//! batches never claim a job twice. Hot statements stay prepared on their connection.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::db::intake;
use quire_shared::db::jobs::{self, ClaimRequest, Fence, NewJob};
use quire_shared::db::tenants::TenantWrite;
use quire_shared::jobs::{FaultTest, VerifyDocument};
use quire_shared::states::{JobStatus, TenantStatus};
use quire_shared::storage::StorageKey;
use quire_shared::test_support;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::support::World;

const LEASE: Duration = Duration::from_secs(60);

async fn requests_for(world: &World, ids: &[Uuid]) -> Vec<ClaimRequest> {
    let mut requests = Vec::with_capacity(ids.len());
    for &job_id in ids {
        requests.push(ClaimRequest {
            job_id,
            event_id: world.job(job_id).await.current_event_id.expect("event"),
            task_id: Uuid::now_v7(),
        });
    }
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_claims_each_current_message_once_and_nothing_else() {
    let world = World::new().await;
    let ids = world.enqueue_fault_jobs(3, FaultTest::default()).await;
    let mut requests = requests_for(&world, &ids).await;
    // A second copy of the first message, and a message of an event that is not current.
    requests.push(ClaimRequest {
        task_id: Uuid::now_v7(),
        ..requests[0]
    });
    requests.push(ClaimRequest {
        event_id: Uuid::now_v7(),
        task_id: Uuid::now_v7(),
        ..requests[1]
    });

    let mut conn = world.pool.get().await.expect("connection");
    let claimed = jobs::claim_jobs(&mut conn, &requests, "worker-batch", LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3, "one claim per job");
    for claimed in &claimed {
        assert_eq!(claimed.job.status, JobStatus::Running);
        assert_eq!(claimed.job.attempts, 1);
        assert_eq!(claimed.job.worker_id.as_deref(), Some("worker-batch"));
        assert_eq!(claimed.tenant_status, Some(TenantStatus::Active));
        let task = claimed.job.last_task_id.expect("task id");
        assert!(
            requests
                .iter()
                .any(|r| r.job_id == claimed.job.id && r.task_id == task),
            "the claim records the task of a message for that job"
        );
    }
    let again = jobs::claim_jobs(&mut conn, &requests, "worker-other", LEASE)
        .await
        .expect("claim again");
    assert!(again.is_empty(), "running jobs are not claimed again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_batches_claim_every_job_exactly_once() {
    let world = World::new().await;
    let ids = world.enqueue_fault_jobs(40, FaultTest::default()).await;
    let requests = Arc::new(requests_for(&world, &ids).await);
    let racers = 6;
    let barrier = Arc::new(Barrier::new(racers));
    let mut tasks = Vec::new();
    for racer in 0..racers {
        let (pool, barrier, requests) = (world.pool.clone(), barrier.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get().await.expect("connection");
            // Each racer holds the same messages in its own order.
            let mut mine = requests.to_vec();
            let turn = racer * 7 % mine.len();
            mine.rotate_left(turn);
            barrier.wait().await;
            jobs::claim_jobs(&mut conn, &mine, &format!("worker-{racer}"), LEASE)
                .await
                .expect("claim")
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for claimed in task.await.expect("racer") {
            assert!(seen.insert(claimed.job.id), "a job was claimed twice");
        }
    }
    assert_eq!(seen.len(), ids.len(), "every job was claimed");
    for id in ids {
        let job = world.job(id).await;
        assert_eq!((job.status, job.attempts), (JobStatus::Running, 1));
    }
}

/// The claim commits asynchronously, so a database crash may undo it; lost-message
/// recovery then announces the job again with a new broker task, and the same worker may
/// claim it again at the same attempt. The first run's fence must no longer hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_made_again_after_an_undone_one_fences_out_the_first_run() {
    let world = World::new().await;
    let ids = world.enqueue_fault_jobs(1, FaultTest::default()).await;
    let first = requests_for(&world, &ids).await;
    let mut conn = world.pool.get().await.expect("connection");
    let claimed = jobs::claim_jobs(&mut conn, &first, "worker-same", LEASE)
        .await
        .expect("claim");
    let first_fence = claimed[0].job.fence().expect("fence");
    // What a crash that lost the claim's commit leaves behind.
    diesel::sql_query(
        "UPDATE processing_jobs SET status = 'QUEUED', attempts = 0, worker_id = NULL, \
             started_at = NULL, heartbeat_at = NULL, lease_expires_at = NULL WHERE id = $1",
    )
    .bind::<diesel::sql_types::Uuid, _>(ids[0])
    .execute(&mut conn)
    .await
    .expect("undo the claim");
    let again = requests_for(&world, &ids).await;
    let reclaimed = jobs::claim_jobs(&mut conn, &again, "worker-same", LEASE)
        .await
        .expect("claim again");
    let second_fence = reclaimed[0].job.fence().expect("fence");
    assert_eq!(
        (&first_fence.worker_id, first_fence.attempt),
        (&second_fence.worker_id, second_fence.attempt),
        "same worker, same attempt: only the task tells the runs apart"
    );

    let beat = jobs::heartbeat(&mut conn, &first_fence, LEASE)
        .await
        .expect("heartbeat");
    assert_eq!(beat, jobs::Beat::Lost(Some(JobStatus::Running)));
    assert!(
        !jobs::mark_succeeded(&mut conn, &first_fence)
            .await
            .expect("finish")
    );
    assert!(
        !jobs::mark_failed(&mut conn, &first_fence, "x", "x")
            .await
            .expect("fail")
    );
    assert!(
        jobs::mark_succeeded(&mut conn, &second_fence)
            .await
            .expect("finish")
    );
    assert_eq!(world.job(ids[0]).await.status, JobStatus::Succeeded);
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_statements_are_prepared_once_per_connection() {
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    let fence = Fence {
        job_id: Uuid::now_v7(),
        worker_id: "worker-nobody".to_owned(),
        attempt: 1,
        task_id: Uuid::now_v7(),
    };
    for _ in 0..3 {
        let applied = jobs::mark_succeeded(&mut conn, &fence)
            .await
            .expect("finish");
        assert!(!applied, "no such job");
    }
    let prepared: Count = diesel::sql_query(
        "SELECT count(*) AS count FROM pg_prepared_statements \
         WHERE statement LIKE '%SET status = ''SUCCEEDED''%'",
    )
    .get_result(&mut conn)
    .await
    .expect("prepared statements");
    assert_eq!(prepared.count, 1, "prepared once, run three times");
}

#[derive(diesel::QueryableByName)]
struct Plans {
    #[diesel(sql_type = BigInt)]
    generic_plans: i64,
    #[diesel(sql_type = BigInt)]
    custom_plans: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_session_plans_the_batch_claim_once() {
    let world = World::new().await;
    let pool = quire_shared::db::build_pool_with(
        &world.context.settings.database,
        quire_shared::db::SessionKind::Worker,
    )
    .expect("worker pool");
    let mut conn = pool.get().await.expect("connection");
    // Batches of different sizes: with default planning each gets a custom plan.
    for size in 1..=8 {
        let requests: Vec<ClaimRequest> = (0..size)
            .map(|_| ClaimRequest {
                job_id: Uuid::now_v7(),
                event_id: Uuid::now_v7(),
                task_id: Uuid::now_v7(),
            })
            .collect();
        let claimed = jobs::claim_jobs(&mut conn, &requests, "worker-plans", LEASE)
            .await
            .expect("claim");
        assert!(claimed.is_empty(), "no such jobs");
    }
    let plans: Plans = diesel::sql_query(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
         WHERE statement LIKE '%SET status = ''RUNNING''%'",
    )
    .get_result(&mut conn)
    .await
    .expect("prepared statements");
    assert_eq!(plans.custom_plans, 0, "never planned for one call's values");
    assert_eq!(
        plans.generic_plans, 8,
        "one generic plan, used by every call"
    );
}

/// Records a document as an upload does, with its analysis job; returns the job, the
/// document and the version.
async fn uploaded_document(world: &World, conn: &mut AsyncPgConnection) -> (Uuid, Uuid, Uuid) {
    let version_id = Uuid::now_v7();
    let key = StorageKey::document_source(world.tenant_id, version_id);
    let intake = test_support::analysis_intake(world.tenant_id, version_id, &key, 20, 3);
    let document_id = intake.document.id;
    let tenant = TenantWrite {
        tenant_id: world.tenant_id,
        generation: None,
    };
    let recorded = intake::record(conn, &tenant, &[intake], None)
        .await
        .expect("record")
        .expect("the tenant takes the write")
        .pop()
        .expect("one document");
    (recorded.job.id, document_id, version_id)
}

/// The claim reads the document version a job's payload names, so the run does not read
/// it again: for a job of that document and tenant only; a job naming another
/// document's version, and a job without one, get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_reads_the_version_its_payload_names_and_no_other() {
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    let (analyze, document, version) = uploaded_document(&world, &mut conn).await;
    let (_, other_document, other_version) = uploaded_document(&world, &mut conn).await;
    let mismatched = jobs::enqueue(
        &mut conn,
        &NewJob::new(
            world.tenant_id,
            VerifyDocument {
                document_id: document,
                document_version_id: other_version,
            },
            3,
            None,
        ),
    )
    .await
    .expect("enqueue")
    .expect("enqueued")
    .job_id;
    let fault = world.enqueue_fault_jobs(1, FaultTest::default()).await[0];
    let requests = requests_for(&world, &[analyze, mismatched, fault]).await;

    let claimed = jobs::claim_jobs(&mut conn, &requests, "worker-batch", LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3, "one claim per job");
    let version_of = |job_id: Uuid| {
        claimed
            .iter()
            .find(|c| c.job.id == job_id)
            .expect("claimed")
            .version
            .clone()
    };
    let read = version_of(analyze).expect("the analysis job's version");
    assert_eq!(
        (read.id, read.document_id, read.tenant_id),
        (version, document, world.tenant_id)
    );
    assert_eq!(
        read.storage_key,
        StorageKey::document_source(world.tenant_id, version).as_str()
    );
    assert_eq!(read.size_bytes, 20);
    assert_ne!(other_document, document);
    assert_eq!(
        version_of(mismatched),
        None,
        "another document's version is not read for this one"
    );
    assert_eq!(
        version_of(fault),
        None,
        "a job without a version reads none"
    );
}
