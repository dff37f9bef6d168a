//! Intake and batch enqueue write many rows in one statement: what they return must be
//! what is stored, every job must be announced by its own outbox event, and the unique
//! indexes keep deciding which job is a duplicate, inside a batch too. Under the
//! duplicate rule, identical uploads racing each other record exactly one document.

use diesel::sql_types::{BigInt, Uuid as SqlUuid};
use std::sync::Arc;

use diesel_async::{AsyncConnection, RunQueryDsl};
use quire_shared::db::documents::{self, NewDocument};
use quire_shared::db::intake::{self, NewIntake, NotRecorded};
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::db::pauses::{self, Holds};
use quire_shared::db::tenants::TenantWrite;
use quire_shared::jobs::{AnalyzeDocument, VerifyDocument};
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::TestApp;

fn tenant(app: &TestApp) -> TenantWrite {
    TenantWrite {
        tenant_id: app.tenant_id,
        generation: None,
    }
}

fn new_intake(tenant_id: Uuid, index: usize) -> NewIntake<AnalyzeDocument> {
    let (id, version_id) = (Uuid::now_v7(), Uuid::now_v7());
    NewIntake {
        document: NewDocument {
            id,
            tenant_id,
            title: format!("intake {index}"),
            version_id,
            storage_key: format!("tenants/{tenant_id}/sources/00/{version_id}"),
            size_bytes: 100 + index as i64,
            sha256: format!("{index:064x}"),
            content_type: "text/plain".to_owned(),
            original_filename: index.is_multiple_of(2).then(|| format!("file-{index}.txt")),
        },
        job: NewJob::new(
            tenant_id,
            AnalyzeDocument {
                document_id: id,
                document_version_id: version_id,
                force: false,
            },
            3,
            Some(format!("req-{index}")),
        ),
    }
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

async fn pending_events_of(conn: &mut diesel_async::AsyncPgConnection, job_id: Uuid) -> i64 {
    diesel::sql_query(
        "SELECT count(*) AS count FROM outbox_events e JOIN processing_jobs j ON j.id = e.job_id \
         WHERE e.job_id = $1 AND e.status = 'PENDING' AND e.id = j.current_event_id \
           AND e.queue = j.job_type AND (e.message ->> 'job_id')::uuid = $1",
    )
    .bind::<SqlUuid, _>(job_id)
    .get_result::<Count>(conn)
    .await
    .expect("count events")
    .count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intake_batch_returns_exactly_the_rows_it_stored() {
    let app = TestApp::spawn().await;
    let intakes: Vec<_> = (0..3).map(|i| new_intake(app.tenant_id, i)).collect();
    let mut conn = app.pool.get().await.expect("connection");

    let recorded = intake::record(&mut conn, &tenant(&app), &intakes, None)
        .await
        .expect("record")
        .expect("the tenant takes it");

    assert_eq!(recorded.len(), 3);
    for (recorded, intake) in recorded.iter().zip(&intakes) {
        assert_eq!(recorded.document.id, intake.document.id, "input order kept");
        let (document, version) =
            documents::find_document_with_version(&mut conn, app.tenant_id, intake.document.id)
                .await
                .expect("query")
                .expect("document stored");
        assert_eq!(recorded.document, document);
        assert_eq!(Some(&recorded.version), version.as_ref());
        assert_eq!(recorded.job, app.job(recorded.job.id).await);
        assert_eq!(
            recorded.job.payload["document_version_id"],
            intake.document.version_id.to_string()
        );
        assert_eq!(pending_events_of(&mut conn, recorded.job.id).await, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intake_whose_job_names_another_document_writes_nothing() {
    let app = TestApp::spawn().await;
    let mut stray = new_intake(app.tenant_id, 7);
    let analyze = AnalyzeDocument {
        document_id: Uuid::now_v7(),
        ..*stray.job.payload()
    };
    stray.job = NewJob::new(app.tenant_id, analyze, 3, None);
    let intakes = [new_intake(app.tenant_id, 6), stray];
    let mut conn = app.pool.get().await.expect("connection");

    assert!(
        intake::record(&mut conn, &tenant(&app), &intakes, None)
            .await
            .is_err()
    );

    for intake in &intakes {
        let found = documents::find_document(&mut conn, app.tenant_id, intake.document.id)
            .await
            .expect("query");
        assert!(found.is_none(), "no document of a refused batch is stored");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_enqueue_skips_jobs_whose_equivalent_is_active() {
    let app = TestApp::spawn().await;
    let mut conn = app.pool.get().await.expect("connection");
    let recorded = intake::record(
        &mut conn,
        &tenant(&app),
        &[new_intake(app.tenant_id, 0)],
        None,
    )
    .await
    .expect("record")
    .expect("the tenant takes it");
    let document = &recorded[0].document;
    let stored_version = recorded[0].version.id;
    let other_version = Uuid::now_v7();
    let analyze = |version| {
        let payload = AnalyzeDocument {
            document_id: document.id,
            document_version_id: version,
            force: true,
        };
        NewJob::new(app.tenant_id, payload, 3, None)
    };
    // The stored version's analysis is active already; the other version's appears twice
    // in the batch; a verification of that version is not an analysis at all.
    let batch = [
        analyze(stored_version),
        analyze(other_version),
        analyze(other_version),
    ];
    let verify = NewJob::new(
        app.tenant_id,
        VerifyDocument {
            document_id: document.id,
            document_version_id: other_version,
        },
        1,
        None,
    );

    let mut enqueued = jobs::enqueue_many(&mut conn, &batch)
        .await
        .expect("enqueue");
    enqueued.extend(
        jobs::enqueue_many(&mut conn, &[verify])
            .await
            .expect("enqueue the verification"),
    );

    let written: Vec<bool> = enqueued.iter().map(Option::is_some).collect();
    assert_eq!(written, [false, true, false, true]);
    for job in enqueued.iter().flatten() {
        assert_eq!(
            app.job(job.job_id).await.current_event_id,
            Some(job.event_id)
        );
        assert_eq!(pending_events_of(&mut conn, job.job_id).await, 1);
    }
}

/// One racer's outcome: the document it recorded, or the one it was told has its bytes.
#[derive(Debug, PartialEq, Eq)]
enum Raced {
    Recorded(Uuid),
    SameContent(Uuid),
}

/// Identical uploads at once, on connections of their own released by one barrier: half
/// through the one-statement intake (`record_new_content`), half as a transaction that
/// takes the rule's lock first and then records (the new version's path, and an API of
/// the release before during a deploy). Exactly one records; every other one is told
/// that document's id, and nothing else is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_uploads_at_once_record_exactly_one_document() {
    let app = TestApp::spawn().await;
    // Several rounds, each with bytes of its own: one round of a rule without its lock
    // records twice only sometimes; four almost always.
    for round in 0..4u8 {
        race_identical_uploads(&app, &format!("{round:02x}").repeat(32)).await;
    }
}

async fn race_identical_uploads(app: &TestApp, sha256: &str) {
    const RACERS: usize = 8;
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut racers = Vec::new();
    for index in 0..RACERS {
        let mut intake = new_intake(app.tenant_id, index);
        intake.document.sha256 = sha256.to_owned();
        let mut conn = app.pool.get().await.expect("connection");
        let (barrier, tenant) = (Arc::clone(&barrier), tenant(app));
        racers.push(tokio::spawn(async move {
            barrier.wait().await;
            if index.is_multiple_of(2) {
                return match intake::record_new_content(&mut conn, &tenant, &intake, None)
                    .await
                    .expect("record")
                {
                    Ok(recorded) => Raced::Recorded(recorded.document.id),
                    Err(NotRecorded::SameContent(existing)) => Raced::SameContent(existing),
                    Err(refused) => panic!("the tenant takes it: {refused:?}"),
                };
            }
            conn.transaction::<_, quire_shared::db::DbError, _>(async |conn| {
                let document = &intake.document;
                let found = documents::lock_and_find_same_content(
                    conn,
                    document.tenant_id,
                    &document.sha256,
                )
                .await?;
                if let Some(existing) = found {
                    return Ok(Raced::SameContent(existing));
                }
                let recorded = intake::record(conn, &tenant, std::slice::from_ref(&intake), None)
                    .await?
                    .expect("the tenant takes it");
                Ok(Raced::Recorded(recorded[0].document.id))
            })
            .await
            .expect("the transaction")
        }));
    }
    let mut outcomes = Vec::new();
    for racer in racers {
        outcomes.push(racer.await.expect("racer"));
    }

    let recorded: Vec<Uuid> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            Raced::Recorded(id) => Some(*id),
            Raced::SameContent(_) => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1, "exactly one records: {outcomes:?}");
    for outcome in &outcomes {
        if let Raced::SameContent(existing) = outcome {
            assert_eq!(
                *existing, recorded[0],
                "every other is told the one: {outcomes:?}"
            );
        }
    }
    let mut conn = app.pool.get().await.expect("connection");
    let stored = diesel::sql_query(
        "SELECT count(*) AS count FROM document_versions WHERE tenant_id = $1 AND sha256 = $2",
    )
    .bind::<SqlUuid, _>(app.tenant_id)
    .bind::<diesel::sql_types::Text, _>(sha256)
    .get_result::<Count>(&mut conn)
    .await
    .expect("count versions")
    .count;
    assert_eq!(stored, 1, "nothing of the refused uploads is stored");
}

/// The rule counts live documents only: once the one with these bytes is in the trash,
/// the same bytes record again, and a refused upload's own rows are never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duplicate_rule_of_one_statement_ignores_trashed_documents() {
    let app = TestApp::spawn().await;
    let mut conn = app.pool.get().await.expect("connection");
    let sha256 = "cd".repeat(32);
    let with_bytes = |index| {
        let mut intake = new_intake(app.tenant_id, index);
        intake.document.sha256 = sha256.clone();
        intake
    };
    let first = intake::record_new_content(&mut conn, &tenant(&app), &with_bytes(0), None)
        .await
        .expect("record")
        .expect("new bytes record");
    let refused = with_bytes(1);
    let answer = intake::record_new_content(&mut conn, &tenant(&app), &refused, None)
        .await
        .expect("record");
    assert_eq!(
        answer.err(),
        Some(NotRecorded::SameContent(first.document.id))
    );
    let found = documents::find_document(&mut conn, app.tenant_id, refused.document.id)
        .await
        .expect("query");
    assert!(found.is_none(), "the refused upload wrote nothing");

    diesel::sql_query("UPDATE documents SET trashed_at = now() WHERE id = $1")
        .bind::<SqlUuid, _>(first.document.id)
        .execute(&mut conn)
        .await
        .expect("trash");
    let again = intake::record_new_content(&mut conn, &tenant(&app), &with_bytes(2), None)
        .await
        .expect("record");
    assert!(
        again.is_ok(),
        "a trashed document holds no bytes: {again:?}"
    );
}

/// The intake's one statement answers with what holds the new jobs, as a separate read
/// (`pauses::holds`) would: the upload's answer shows `held` without that read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intake_answers_with_the_holds_a_separate_read_sees() {
    let app = TestApp::spawn().await;
    let mut conn = app.pool.get().await.expect("connection");
    let record = async |conn: &mut diesel_async::AsyncPgConnection, index, rule: bool| {
        let intake = new_intake(app.tenant_id, index);
        let recorded = if rule {
            intake::record_new_content(conn, &tenant(&app), &intake, None)
                .await
                .expect("record")
                .expect("new bytes record")
        } else {
            intake::record(conn, &tenant(&app), &[intake], None)
                .await
                .expect("record")
                .expect("the tenant takes it")
                .remove(0)
        };
        let read = pauses::holds(conn, app.tenant_id).await.expect("holds");
        assert_eq!(recorded.holds, read, "the statement saw what a read sees");
        recorded.holds
    };
    assert_eq!(record(&mut conn, 0, false).await, Holds::default());

    pauses::pause_tenant(&mut conn, app.tenant_id)
        .await
        .expect("pause the tenant");
    for queue in ["verify-document", "analyze-document"] {
        pauses::pause_queue(&mut conn, queue, "test")
            .await
            .expect("pause a queue");
    }
    let paused = Holds {
        tenant_paused: true,
        paused_queues: vec!["analyze-document".to_owned(), "verify-document".to_owned()],
    };
    assert_eq!(record(&mut conn, 1, false).await, paused);
    assert_eq!(record(&mut conn, 2, true).await, paused);

    pauses::resume_tenant(&mut conn, app.tenant_id)
        .await
        .expect("resume the tenant");
    let held = record(&mut conn, 3, true).await;
    assert!(!held.tenant_paused);
    assert_eq!(held.paused_queues, paused.paused_queues);
}
