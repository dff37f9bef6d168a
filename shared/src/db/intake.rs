//! New documents with their first version and the job that processes each, recorded in
//! ONE statement: document, version, job, outbox event and the dispatcher's NOTIFY.
//!
//! An upload used to write these as four statements and read the job back: six round
//! trips inside its transaction. One statement is atomic on its own, so a caller with
//! nothing else to do in the transaction needs no BEGIN and COMMIT either; and a batch
//! of documents costs the same one round trip and one WAL flush as a single one.
//!
//! The same statement re-checks the tenant: it locks the tenant row `FOR SHARE` and
//! writes nothing unless the tenant takes the write (`TenantWrite::admits`), so an
//! upload let in before a reset or a deletion never commits after it. It also reads what
//! holds the new jobs (the tenant's pause, the paused queues): an upload answers with its
//! job's `held` without another round trip.

use diesel::prelude::*;
use diesel::sql_types::{
    Array, Bool, Int4, Int8, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid,
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::documents::{Document, DocumentVersion, NewDocument};
use super::jobs::{Job, NewJob, enqueue_ctes};
use super::outbox::ClaimedEvent;
use super::pauses::{Holds, paused_queues_sql};
use super::prepared::Prepared;
use super::tenants::{Refused, TenantWrite};
use crate::jobs::BackgroundJob;
use crate::states::{DocumentStatus, JobStatus, TenantStatus};

/// One new document and the job that processes its first version.
#[derive(Debug, Clone)]
pub struct NewIntake<J: BackgroundJob> {
    pub document: NewDocument,
    /// Must name `document` (its id and tenant).
    pub job: NewJob<J>,
}

/// The rows an intake wrote, as stored.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub document: Document,
    pub version: DocumentVersion,
    pub job: Job,
    /// What holds the tenant's queued jobs, read by the same statement (as
    /// `pauses::holds` would have read it at that instant).
    pub holds: Holds,
    /// The job's event, when the statement claimed it for the express path: the caller
    /// publishes it once the intake has committed (`publishing::Express::publish`).
    pub announce: Option<ClaimedEvent>,
}

/// What an intake needs to claim its own event for the express path
/// (`publishing::Express`, docs/decisions.md "The express path"): the claiming process
/// and the scheduler's bounds it must stay within.
#[derive(Debug, Clone, Copy)]
pub struct ExpressClaim<'a> {
    /// `claimed_by` of the event: the process that publishes it after the commit.
    pub claimer: &'a str,
    /// `scheduling.in_flight_per_queue`.
    pub in_flight_per_queue: i64,
    /// `scheduling.max_running_per_tenant`: a tenant's cap unless it sets its own.
    pub default_cap: i64,
}

#[derive(QueryableByName)]
struct RecordedAt {
    #[diesel(sql_type = Timestamptz)]
    recorded_at: OffsetDateTime,
    #[diesel(sql_type = Int8)]
    enqueued: i64,
    /// The tenant row as the statement locked it (`None`: no such tenant).
    #[diesel(sql_type = Nullable<Text>)]
    tenant_status: Option<TenantStatus>,
    #[diesel(sql_type = Nullable<Int8>)]
    tenant_generation: Option<i64>,
    /// The live document with the same bytes, under the duplicate rule.
    #[diesel(sql_type = Nullable<SqlUuid>)]
    same_content: Option<Uuid>,
    #[diesel(sql_type = Bool)]
    tenant_paused: bool,
    #[diesel(sql_type = Array<Text>)]
    paused_queues: Vec<String>,
    /// The event was born `PUBLISHING`, claimed for the express path.
    #[diesel(sql_type = Bool)]
    announcing: bool,
}

/// Why an intake under the duplicate rule wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRecorded {
    /// The tenant does not take the write.
    Refused(Refused),
    /// This live document of the tenant has the same bytes as its current version.
    SameContent(Uuid),
}

/// Column-wise binds of a batch: `unnest` turns them back into rows.
#[derive(Default)]
struct Columns<'a> {
    document_ids: Vec<Uuid>,
    tenant_ids: Vec<Uuid>,
    titles: Vec<&'a str>,
    version_ids: Vec<Uuid>,
    storage_keys: Vec<&'a str>,
    sizes: Vec<i64>,
    sha256s: Vec<&'a str>,
    content_types: Vec<&'a str>,
    filenames: Vec<Option<&'a str>>,
    job_ids: Vec<Uuid>,
    job_types: Vec<&'static str>,
    payloads: Vec<serde_json::Value>,
    max_attempts: Vec<i32>,
    event_ids: Vec<Uuid>,
    messages: Vec<serde_json::Value>,
    priorities: Vec<&'static str>,
}

/// Writes every intake's `PENDING` document, its first version, its `QUEUED` job and the
/// job's `PENDING` outbox event due now, with one NOTIFY at commit: one statement, in
/// the caller's transaction or on its own, holding the tenant row `FOR SHARE` to the end
/// of that transaction. Every intake must be of `tenant`; when the tenant does not take
/// the write (`TenantWrite::admits`, state `active`) nothing is written and the answer is
/// `Refused`. Returns the rows as stored, in input order. Never touches Redis.
///
/// With `express`, a lone interactive intake whose queue has no backlog is born claimed
/// by that process instead (`Recorded::announce`), and no NOTIFY is sent for it.
pub async fn record<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    intakes: &[NewIntake<J>],
    express: Option<ExpressClaim<'_>>,
) -> Result<Result<Vec<Recorded>, Refused>, DbError> {
    match write(conn, tenant, intakes, None, express).await? {
        Ok(recorded) => Ok(Ok(recorded)),
        Err(NotRecorded::Refused(refused)) => Ok(Err(refused)),
        Err(NotRecorded::SameContent(_)) => Err(DbError::Build(
            "an intake without the duplicate rule found a duplicate".to_owned(),
        )),
    }
}

/// [`record`] of one upload under the duplicate rule, still ONE statement: the same
/// bytes as the current version of a live document of the tenant write nothing and
/// answer `SameContent` with that document. The rule is the database's
/// `quire_same_content`, which takes the lock that serialises uploads of the same bytes
/// in the tenant (held to the end of the statement's transaction) before it looks, so two
/// identical uploads at once cannot both pass; the statement takes that lock before the
/// tenant row's, in the order of every other upload's transaction.
pub async fn record_new_content<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    intake: &NewIntake<J>,
    express: Option<ExpressClaim<'_>>,
) -> Result<Result<Recorded, NotRecorded>, DbError> {
    let same_content = Some(intake.document.sha256.as_str());
    match write(
        conn,
        tenant,
        std::slice::from_ref(intake),
        same_content,
        express,
    )
    .await?
    {
        Ok(recorded) => recorded
            .into_iter()
            .next()
            .map(Ok)
            .ok_or_else(|| DbError::Build("an admitted intake returned no rows".to_owned())),
        Err(not_recorded) => Ok(Err(not_recorded)),
    }
}

/// The statement of [`record`] and [`record_new_content`]: with `same_content`, nothing
/// is written when a live document of the tenant has those bytes; with `express`, the
/// event of a lone interactive intake is born claimed when its queue has no backlog.
async fn write<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    intakes: &[NewIntake<J>],
    same_content: Option<&str>,
    express: Option<ExpressClaim<'_>>,
) -> Result<Result<Vec<Recorded>, NotRecorded>, DbError> {
    if intakes.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    let mut columns = Columns::default();
    for NewIntake { document, job } in intakes {
        if job.document_id() != Some(document.id)
            || job.tenant_id() != document.tenant_id
            || document.tenant_id != tenant.tenant_id
        {
            return Err(DbError::Build(
                "an intake's job must name its own document and the write's tenant".to_owned(),
            ));
        }
        let (job_id, event_id) = (Uuid::now_v7(), Uuid::now_v7());
        let (payload, message) = job.to_json(job_id, event_id)?;
        columns.document_ids.push(document.id);
        columns.tenant_ids.push(document.tenant_id);
        columns.titles.push(&document.title);
        columns.version_ids.push(document.version_id);
        columns.storage_keys.push(&document.storage_key);
        columns.sizes.push(document.size_bytes);
        columns.sha256s.push(&document.sha256);
        columns.content_types.push(&document.content_type);
        columns
            .filenames
            .push(document.original_filename.as_deref());
        columns.job_ids.push(job_id);
        columns.job_types.push(J::JOB_TYPE);
        columns.payloads.push(payload);
        columns.max_attempts.push(job.max_attempts());
        columns.event_ids.push(event_id);
        columns.messages.push(message);
        columns.priorities.push(job.priority().as_str());
    }
    // The deferred foreign key from a document to its current version is checked at
    // commit, the others at the end of this statement, when every row is in. `held`
    // locks the tenant row (a state change waits for this write to commit, or this
    // write waits for it and reads its result); its condition is `TenantWrite::admits`
    // with the state `active`, and without it `i` is empty and nothing is written.
    // `same` applies the duplicate rule when `$19` names the bytes; `held` reads it in a
    // one-time filter, so its advisory lock is taken before the tenant row's lock.
    // `express` (only when `$20` names a claimer) is the scheduler's rule for one event,
    // read as a round would read it (`db::scheduler::read_state`, `scheduling::plan`):
    // an interactive job alone in its statement, nothing paused, no due event waiting in
    // its queue (else the fair scheduler decides), the queue's in-flight messages below
    // `in_flight_per_queue` and the tenant's running plus in-flight jobs below its cap.
    // Each of the three partial indexes (publishing, in flight, running: each bounded by
    // the slots and the per-queue bounds) is read once, whole, for the queue's and the
    // tenant's counts together; never a tenant's history.
    let row = diesel::sql_query(concat!(
        "WITH same AS MATERIALIZED ( \
             SELECT CASE WHEN $19::text IS NULL THEN NULL \
                         ELSE quire_same_content($16, $19::text) END AS existing), \
         held AS ( \
             SELECT status, generation, processing_paused_at IS NOT NULL AS paused, \
                 max_running_jobs \
             FROM tenants \
             WHERE id = $16 AND (SELECT true FROM same) FOR SHARE), \
         i AS ( \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], \
                 $6::int8[], $7::text[], $8::text[], $9::text[], $10::uuid[], $11::text[], \
                 $12::jsonb[], $13::int4[], $14::uuid[], $15::jsonb[], $18::text[]) \
             AS i(document_id, tenant_id, title, version_id, storage_key, size_bytes, sha256, \
                 content_type, original_filename, job_id, job_type, payload, max_attempts, \
                 event_id, message, priority) \
             WHERE EXISTS (SELECT 1 FROM held WHERE status = 'active' \
                 AND ($17::int8 IS NULL OR generation = $17::int8)) \
               AND NOT EXISTS (SELECT 1 FROM same WHERE existing IS NOT NULL)), \
         express AS MATERIALIZED ( \
             SELECT $20::text AS claimer \
             WHERE $20::text IS NOT NULL AND cardinality($10::uuid[]) = 1 \
               AND ($18::text[])[1] = 'interactive' \
               AND EXISTS (SELECT 1 FROM i) \
               AND NOT EXISTS (SELECT 1 FROM held WHERE paused) \
               AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = ($11::text[])[1]) \
               AND NOT EXISTS (SELECT 1 FROM outbox_events AS e \
                               WHERE e.status = 'PENDING' AND e.queue = ($11::text[])[1] \
                                 AND e.next_attempt_at <= now()) \
               AND (SELECT p.queue + a.queue < $21::int8 \
                           AND p.tenant + a.tenant + r.tenant \
                               < COALESCE((SELECT max_running_jobs::int8 FROM held), $22::int8) \
                    FROM (SELECT count(*) FILTER (WHERE e.queue = ($11::text[])[1]) AS queue, \
                                 count(*) FILTER (WHERE e.tenant_id = $16) AS tenant \
                          FROM ",
        publishing_in_flight!(),
        " AS e) AS p, \
                         (SELECT count(*) FILTER (WHERE j.job_type = ($11::text[])[1]) AS queue, \
                                 count(*) FILTER (WHERE j.tenant_id = $16) AS tenant \
                          FROM processing_jobs AS j \
                          WHERE j.status = 'QUEUED' \
                            AND j.announced_event_id = j.current_event_id) AS a, \
                         (SELECT count(*) FILTER (WHERE j.tenant_id = $16) AS tenant \
                          FROM processing_jobs AS j WHERE j.status = 'RUNNING') AS r)), \
         document AS ( \
             INSERT INTO documents (id, tenant_id, title, status, current_version_id) \
             SELECT document_id, tenant_id, title, 'PENDING', version_id FROM i), \
         version AS ( \
             INSERT INTO document_versions (id, document_id, tenant_id, storage_key, size_bytes, \
                 sha256, content_type, original_filename) \
             SELECT version_id, document_id, tenant_id, storage_key, size_bytes, sha256, \
                 content_type, original_filename FROM i), ",
        enqueue_ctes!(),
        " SELECT now() AS recorded_at, (SELECT count(*) FROM event) AS enqueued, \
             (SELECT status FROM held) AS tenant_status, \
             (SELECT generation FROM held) AS tenant_generation, \
             (SELECT existing FROM same) AS same_content, \
             COALESCE((SELECT paused FROM held), false) AS tenant_paused, ",
        paused_queues_sql!(),
        " AS paused_queues, \
             EXISTS (SELECT 1 FROM express) AS announcing, \
             (SELECT count(pg_notify('quire_outbox', '')) FROM (SELECT 1) AS one \
              WHERE NOT EXISTS (SELECT 1 FROM express)) AS notified"
    ))
    .bind::<Array<SqlUuid>, _>(&columns.document_ids)
    .bind::<Array<SqlUuid>, _>(&columns.tenant_ids)
    .bind::<Array<Text>, _>(&columns.titles)
    .bind::<Array<SqlUuid>, _>(&columns.version_ids)
    .bind::<Array<Text>, _>(&columns.storage_keys)
    .bind::<Array<Int8>, _>(&columns.sizes)
    .bind::<Array<Text>, _>(&columns.sha256s)
    .bind::<Array<Text>, _>(&columns.content_types)
    .bind::<Array<Nullable<Text>>, _>(&columns.filenames)
    .bind::<Array<SqlUuid>, _>(&columns.job_ids)
    .bind::<Array<Text>, _>(&columns.job_types)
    .bind::<Array<Jsonb>, _>(&columns.payloads)
    .bind::<Array<Int4>, _>(&columns.max_attempts)
    .bind::<Array<SqlUuid>, _>(&columns.event_ids)
    .bind::<Array<Jsonb>, _>(&columns.messages)
    .bind::<SqlUuid, _>(tenant.tenant_id)
    .bind::<Nullable<Int8>, _>(tenant.generation)
    .bind::<Array<Text>, _>(&columns.priorities)
    .bind::<Nullable<Text>, _>(same_content)
    .bind::<Nullable<Text>, _>(express.map(|express| express.claimer))
    .bind::<Int8, _>(express.map_or(0, |express| express.in_flight_per_queue))
    .bind::<Int8, _>(express.map_or(0, |express| express.default_cap))
    .prepared()
    .get_result::<RecordedAt>(conn)
    .await?;
    if let Some(existing) = row.same_content {
        if row.enqueued != 0 {
            return Err(DbError::Build(
                "an intake was written beside a document with the same bytes".to_owned(),
            ));
        }
        return Ok(Err(NotRecorded::SameContent(existing)));
    }
    let admitted = match (row.tenant_status, row.tenant_generation) {
        (Some(status), Some(generation)) => tenant.admits(status, generation, TenantStatus::Active),
        _ => false,
    };
    if !admitted {
        if row.enqueued != 0 {
            return Err(DbError::Build(
                "an intake was written for a tenant that does not take it".to_owned(),
            ));
        }
        return Ok(Err(NotRecorded::Refused(Refused(row.tenant_status))));
    }
    // A brand-new version has no active job, so each intake enqueues; anything else is a
    // bug that must not pass as an upload whose job does not exist.
    if usize::try_from(row.enqueued).ok() != Some(intakes.len()) {
        return Err(DbError::Build(format!(
            "{} of {} intake jobs were enqueued",
            row.enqueued,
            intakes.len()
        )));
    }
    let at = row.recorded_at;
    let holds = Holds {
        tenant_paused: row.tenant_paused,
        paused_queues: row.paused_queues,
    };

    let mut recorded = Vec::with_capacity(intakes.len());
    for (index, NewIntake { document, job }) in intakes.iter().enumerate() {
        metrics::counter!(crate::metrics::JOBS_ENQUEUED, "type" => J::JOB_TYPE).increment(1);
        recorded.push(Recorded {
            document: stored_document(document, at),
            version: stored_version(document, at),
            job: stored_job(
                job,
                columns.job_ids[index],
                columns.event_ids[index],
                columns.payloads[index].clone(),
                at,
            ),
            holds: holds.clone(),
            announce: row.announcing.then(|| ClaimedEvent {
                id: columns.event_ids[index],
                job_id: columns.job_ids[index],
                queue: J::JOB_TYPE.to_owned(),
                message: columns.messages[index].clone(),
                publish_attempts: 0,
                claimed_at: at,
            }),
        });
    }
    Ok(Ok(recorded))
}

// The rows as the statement above stored them: every column it did not set takes its
// default, and every `now()` of one statement is the same instant. A test compares
// these with the rows read back, so a new column default cannot drift unnoticed.

fn stored_document(new: &NewDocument, at: OffsetDateTime) -> Document {
    Document {
        id: new.id,
        tenant_id: new.tenant_id,
        title: new.title.clone(),
        status: DocumentStatus::Pending,
        processing_error: None,
        current_version_id: Some(new.version_id),
        issued_at: None,
        trashed_at: None,
        created_at: at,
        updated_at: at,
        issued_at_set_by_user: false,
        correspondent_id: None,
        row_version: 1,
    }
}

fn stored_version(new: &NewDocument, at: OffsetDateTime) -> DocumentVersion {
    DocumentVersion {
        id: new.version_id,
        document_id: new.id,
        tenant_id: new.tenant_id,
        storage_key: new.storage_key.clone(),
        size_bytes: new.size_bytes,
        sha256: new.sha256.clone(),
        content_type: new.content_type.clone(),
        original_filename: new.original_filename.clone(),
        created_at: at,
        number: 1,
        status: DocumentStatus::Pending,
        processing_error: None,
    }
}

fn stored_job<J: BackgroundJob>(
    new: &NewJob<J>,
    job_id: Uuid,
    event_id: Uuid,
    payload: serde_json::Value,
    at: OffsetDateTime,
) -> Job {
    Job {
        id: job_id,
        tenant_id: new.tenant_id(),
        document_id: new.document_id(),
        job_type: J::JOB_TYPE.to_owned(),
        payload,
        status: JobStatus::Queued,
        attempts: 0,
        max_attempts: new.max_attempts(),
        current_event_id: Some(event_id),
        worker_id: None,
        last_task_id: None,
        lease_expires_at: None,
        heartbeat_at: None,
        queued_at: at,
        started_at: None,
        finished_at: None,
        error_code: None,
        error_message: None,
        created_at: at,
        updated_at: at,
    }
}
