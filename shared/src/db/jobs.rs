//! Every SQL statement that moves a processing job. Each transition is ONE guarded
//! statement (`… WHERE id = $id AND status = $from …`); zero rows is an answer — someone
//! else moved the job first — not an error. A worker's write-back is fenced by status,
//! worker and attempt, so a stale worker can never overwrite a newer claim.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Int4, Int8, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::documents::DocumentVersion;
use super::moved::again_in_savepoint_if_moved;
use super::prepared::Prepared;
use super::schema::processing_jobs;
use crate::broker::EventMessage;
use crate::jobs::BackgroundJob;
pub use crate::scheduling::Priority;
use crate::states::JobStatus;

/// Longest `error_message` kept on a job (the column's CHECK constraint).
pub const MAX_ERROR_MESSAGE_CHARS: usize = 500;

#[derive(Debug, Clone, PartialEq, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = processing_jobs, check_for_backend(diesel::pg::Pg))]
pub struct Job {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub document_id: Option<Uuid>,
    pub job_type: String,
    pub payload: serde_json::Value,
    pub status: JobStatus,
    pub attempts: i32,
    pub max_attempts: i32,
    pub current_event_id: Option<Uuid>,
    pub worker_id: Option<String>,
    pub last_task_id: Option<Uuid>,
    pub lease_expires_at: Option<OffsetDateTime>,
    pub heartbeat_at: Option<OffsetDateTime>,
    pub queued_at: OffsetDateTime,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Job {
    /// The fence a worker holds after claiming this job.
    pub fn fence(&self) -> Option<Fence> {
        Some(Fence {
            job_id: self.id,
            worker_id: self.worker_id.clone()?,
            attempt: self.attempts,
            task_id: self.last_task_id?,
        })
    }
}

/// What a claim gives a worker: every later write of that worker must match it. The
/// broker task of the message that claimed is part of it: each publication carries a
/// new one, so even a claim a database crash undid and the same worker made again
/// (same attempt) is told apart from the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub job_id: Uuid,
    pub worker_id: String,
    pub attempt: i32,
    pub task_id: Uuid,
}

/// A job to enqueue in the caller's transaction. Built by [`NewJob::new`] only, so its
/// document and attempts always come from its type.
#[derive(Debug, Clone)]
pub struct NewJob<J: BackgroundJob> {
    tenant_id: Uuid,
    payload: J,
    max_attempts: i32,
    /// The request that enqueues the job, carried in every message announcing it.
    request_id: Option<String>,
    /// Its priority class (the dispatcher publishes interactive work first).
    priority: Priority,
}

impl<J: BackgroundJob> NewJob<J> {
    /// A job of type `J` for `tenant_id`, with the attempts its retry class gives out of
    /// `configured_attempts` (`jobs.max_attempts`).
    pub fn new(
        tenant_id: Uuid,
        payload: J,
        configured_attempts: i32,
        request_id: Option<String>,
    ) -> Self {
        Self {
            tenant_id,
            payload,
            max_attempts: J::RETRY.max_attempts(configured_attempts),
            request_id,
            priority: Priority::Interactive,
        }
    }

    /// The same job in the bulk class: work nobody waits for (a bulk re-analyze or
    /// verify, a scheduled scrub). Interactive is the default.
    pub fn bulk(mut self) -> Self {
        self.priority = Priority::Bulk;
        self
    }

    /// The same job in `priority`'s class.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The same job with another attempt budget (the benchmark and the fault suite).
    pub fn with_max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    pub fn document_id(&self) -> Option<Uuid> {
        self.payload.document_id()
    }

    pub fn payload(&self) -> &J {
        &self.payload
    }

    pub fn max_attempts(&self) -> i32 {
        self.max_attempts
    }

    /// The job's payload and the message of the outbox event `event_id` announcing it.
    pub(crate) fn to_json(
        &self,
        job_id: Uuid,
        event_id: Uuid,
    ) -> Result<(serde_json::Value, serde_json::Value), DbError> {
        let payload = serde_json::to_value(&self.payload)
            .map_err(|error| DbError::Build(format!("payload does not serialize: {error}")))?;
        let mut message = EventMessage::new(event_id, job_id, self.tenant_id, J::JOB_TYPE);
        message.request_id = self.request_id.clone();
        let message = serde_json::to_value(&message)
            .map_err(|error| DbError::Build(format!("message does not serialize: {error}")))?;
        Ok((payload, message))
    }
}

/// Ids of an enqueued job and of the outbox event that will announce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    pub job_id: Uuid,
    pub event_id: Uuid,
}

/// Writes a `QUEUED` job, its `PENDING` outbox event due now, and a NOTIFY delivered at
/// commit — in one statement, inside the caller's transaction or on its own (one
/// statement is atomic by itself: nothing else to write needs no BEGIN and COMMIT).
/// Never touches Redis.
/// `None` when an equivalent job is already active (at most one active analyze job per
/// document version: the partial unique index decides, race-free).
pub async fn enqueue<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    job: &NewJob<J>,
) -> Result<Option<Enqueued>, DbError> {
    let enqueued = enqueue_many(conn, std::slice::from_ref(job)).await?;
    Ok(enqueued.into_iter().next().flatten())
}

/// The part of an enqueue statement that writes the jobs and their outbox events, from
/// a CTE `i` with the columns `job_id, tenant_id, document_id, job_type, payload,
/// max_attempts, event_id, message, priority`, and a CTE `express` of at most one row
/// with the column `claimer`: a row means the events are born `PUBLISHING`, claimed by
/// that process for the express path (`db::intake::ExpressClaim`), no row `PENDING`;
/// `event` returns the `job_id` of each job written.
/// A macro so that each statement stays one constant string (prepared once).
macro_rules! enqueue_ctes {
    () => {
        "job AS ( \
             INSERT INTO processing_jobs \
                 (id, tenant_id, document_id, job_type, payload, status, max_attempts, current_event_id) \
             SELECT job_id, tenant_id, document_id, job_type, payload, 'QUEUED', max_attempts, \
                 event_id FROM i \
             ON CONFLICT DO NOTHING \
             RETURNING id), \
         event AS ( \
             INSERT INTO outbox_events \
                 (id, job_id, tenant_id, queue, message, status, next_attempt_at, priority, \
                  claimed_at, claimed_by) \
             SELECT i.event_id, i.job_id, i.tenant_id, i.job_type, i.message, \
                 CASE WHEN x.claimer IS NULL THEN 'PENDING' ELSE 'PUBLISHING' END, now(), \
                 i.priority, CASE WHEN x.claimer IS NULL THEN NULL ELSE now() END, x.claimer \
             FROM i JOIN job ON job.id = i.job_id LEFT JOIN express AS x ON true \
             RETURNING job_id)"
    };
}
pub(crate) use enqueue_ctes;

/// The CTE `event` that gives each row of a CTE `job` (columns `id, tenant_id,
/// job_type` and the previous event's id) its NEXT outbox event: a retry, a rescue, a
/// re-announcement. Its message is built in SQL by `quire_event_message`, which carries
/// the previous event's request id over (the `message_shape` test holds it to the Rust
/// shape). Arguments: the new event's id, the previous event's id, when it is due, and
/// optionally its priority class (by default the previous event's: a transient retry,
/// a rescue or a re-announcement stays in the class its job was enqueued in).
macro_rules! next_event_cte {
    ($event:literal, $previous:literal, $due:expr) => {
        concat!(
            "event AS ( \
                 INSERT INTO outbox_events (id, job_id, tenant_id, queue, message, status, next_attempt_at, priority) \
                 SELECT ", $event, ", job.id, job.tenant_id, job.job_type, \
                        quire_event_message(", $event, ", job.id, job.tenant_id, job.job_type, ", $previous, "), \
                        'PENDING', ", $due, ", \
                        COALESCE((SELECT p.priority FROM outbox_events AS p WHERE p.id = ", $previous, "), \
                                 'interactive') \
                 FROM job RETURNING id)"
        )
    };
    ($event:literal, $previous:literal, $due:expr, $priority:literal) => {
        concat!(
            "event AS ( \
                 INSERT INTO outbox_events (id, job_id, tenant_id, queue, message, status, next_attempt_at, priority) \
                 SELECT ", $event, ", job.id, job.tenant_id, job.job_type, \
                        quire_event_message(", $event, ", job.id, job.tenant_id, job.job_type, ", $previous, "), \
                        'PENDING', ", $due, ", ", $priority, " \
                 FROM job RETURNING id)"
        )
    };
}
pub(crate) use next_event_cte;

/// The due time of a job's new event when the job goes back to the queue after it had
/// been announced (a rescue, a lost message, a pause's resume): its previous event's,
/// so it keeps its place at the head of its tenant's queue instead of waiting behind
/// everything enqueued since; `now()` if that event is gone. The fair index orders a
/// tenant's events by due time, and this one was due first.
macro_rules! requeued_due {
    ($previous:literal) => {
        concat!(
            "LEAST(now(), COALESCE((SELECT d.next_attempt_at FROM outbox_events AS d \
                                    WHERE d.id = ",
            $previous,
            "), now()))"
        )
    };
}
pub(crate) use requeued_due;

#[derive(QueryableByName)]
struct EnqueuedRow {
    #[diesel(sql_type = SqlUuid)]
    job_id: Uuid,
}

/// [`enqueue`] for many jobs in ONE statement (one round trip, one WAL flush when it
/// commits on its own): the answer for each job, in input order. A job whose
/// equivalent is active — in the table or earlier in the same batch — is `None`.
pub async fn enqueue_many<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    jobs: &[NewJob<J>],
) -> Result<Vec<Option<Enqueued>>, DbError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let mut job_ids = Vec::with_capacity(jobs.len());
    let mut event_ids = Vec::with_capacity(jobs.len());
    let mut payloads = Vec::with_capacity(jobs.len());
    let mut messages = Vec::with_capacity(jobs.len());
    for job in jobs {
        let (job_id, event_id) = (Uuid::now_v7(), Uuid::now_v7());
        let (payload, message) = job.to_json(job_id, event_id)?;
        job_ids.push(job_id);
        event_ids.push(event_id);
        payloads.push(payload);
        messages.push(message);
    }
    let tenant_ids: Vec<Uuid> = jobs.iter().map(|job| job.tenant_id).collect();
    let document_ids: Vec<Option<Uuid>> = jobs.iter().map(NewJob::document_id).collect();
    let job_types: Vec<&str> = vec![J::JOB_TYPE; jobs.len()];
    let max_attempts: Vec<i32> = jobs.iter().map(|job| job.max_attempts).collect();
    let priorities: Vec<&str> = jobs.iter().map(|job| job.priority.as_str()).collect();
    let inserted = diesel::sql_query(concat!(
        "WITH i AS ( \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::jsonb[], \
                 $6::int4[], $7::uuid[], $8::jsonb[], $9::text[]) \
             AS i(job_id, tenant_id, document_id, job_type, payload, max_attempts, event_id, \
                 message, priority)), \
         express AS (SELECT NULL::text AS claimer WHERE false), ",
        enqueue_ctes!(),
        " SELECT job_id, pg_notify('quire_outbox', '') AS notified FROM event"
    ))
    .bind::<Array<SqlUuid>, _>(&job_ids)
    .bind::<Array<SqlUuid>, _>(tenant_ids)
    .bind::<Array<Nullable<SqlUuid>>, _>(document_ids)
    .bind::<Array<Text>, _>(job_types)
    .bind::<Array<Jsonb>, _>(payloads)
    .bind::<Array<Int4>, _>(max_attempts)
    .bind::<Array<SqlUuid>, _>(&event_ids)
    .bind::<Array<Jsonb>, _>(messages)
    .bind::<Array<Text>, _>(priorities)
    .prepared()
    .load::<EnqueuedRow>(conn)
    .await?;
    let inserted: std::collections::HashSet<Uuid> =
        inserted.into_iter().map(|row| row.job_id).collect();
    Ok(jobs
        .iter()
        .zip(job_ids.into_iter().zip(event_ids))
        .map(|(_, (job_id, event_id))| {
            inserted.contains(&job_id).then(|| {
                metrics::counter!(crate::metrics::JOBS_ENQUEUED, "type" => J::JOB_TYPE)
                    .increment(1);
                Enqueued { job_id, event_id }
            })
        })
        .collect())
}

/// Enqueues `job`, or — when the partial unique indexes say an equivalent job is
/// already `QUEUED` or `RUNNING` (one analysis per document version, one purge per
/// document) — returns that job instead. Race-free: the index decides, not a read first.
/// "Equivalent" is the type's [`BackgroundJob::identity`]: the active job's payload
/// contains it.
pub async fn enqueue_or_active<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    job: &NewJob<J>,
) -> Result<Option<Job>, DbError> {
    if let Some(enqueued) = enqueue(conn, job).await? {
        return find_job(conn, enqueued.job_id).await;
    }
    Ok(diesel::sql_query(
        "SELECT * FROM processing_jobs \
         WHERE tenant_id = $1 AND job_type = $2 AND document_id IS NOT DISTINCT FROM $3 \
           AND payload @> $4 AND status IN ('QUEUED', 'RUNNING') \
         LIMIT 1",
    )
    .bind::<SqlUuid, _>(job.tenant_id)
    .bind::<Text, _>(J::JOB_TYPE)
    .bind::<Nullable<SqlUuid>, _>(job.document_id())
    .bind::<Jsonb, _>(job.payload.identity())
    .get_result::<Job>(conn)
    .await
    .optional()?)
}

/// One popped message's claim on a job: the event it announces and the broker task that
/// carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest {
    pub job_id: Uuid,
    pub event_id: Uuid,
    pub task_id: Uuid,
}

/// A job a worker claimed, with what its run needs first read in the same statement: its
/// tenant's state (the catalogue's tenant guard needs it before the handler runs) and the
/// document version its payload names.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub job: Job,
    /// `None` when the tenant row is gone.
    pub tenant_status: Option<crate::states::TenantStatus>,
    /// The version named by the payload's `document_version_id`, of the job's document
    /// and tenant; `None` when the payload names none or the version is gone. Read here
    /// because every document job's run starts by reading it: a round trip less on the
    /// path of every such job (issue 19). A version's bytes and digest never change, so
    /// the claim's snapshot is as good as a later one.
    pub version: Option<DocumentVersion>,
}

#[derive(QueryableByName)]
struct ClaimedRow {
    #[diesel(embed)]
    job: Job,
    #[diesel(sql_type = Nullable<Text>)]
    tenant_status: Option<crate::states::TenantStatus>,
    #[diesel(embed)]
    version: Option<ClaimedVersion>,
}

/// The claimed job's version, under names of its own beside the job's columns.
#[derive(QueryableByName)]
struct ClaimedVersion {
    #[diesel(sql_type = SqlUuid, column_name = v_id)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid, column_name = v_document_id)]
    document_id: Uuid,
    #[diesel(sql_type = SqlUuid, column_name = v_tenant_id)]
    tenant_id: Uuid,
    #[diesel(sql_type = Text, column_name = v_storage_key)]
    storage_key: String,
    #[diesel(sql_type = Int8, column_name = v_size_bytes)]
    size_bytes: i64,
    #[diesel(sql_type = Text, column_name = v_sha256)]
    sha256: String,
    #[diesel(sql_type = Text, column_name = v_content_type)]
    content_type: String,
    #[diesel(sql_type = Nullable<Text>, column_name = v_original_filename)]
    original_filename: Option<String>,
    #[diesel(sql_type = Timestamptz, column_name = v_created_at)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Int4, column_name = v_number)]
    number: i32,
    #[diesel(sql_type = Text, column_name = v_status)]
    status: crate::states::DocumentStatus,
    #[diesel(sql_type = Nullable<Text>, column_name = v_processing_error)]
    processing_error: Option<String>,
}

impl From<ClaimedVersion> for DocumentVersion {
    fn from(v: ClaimedVersion) -> Self {
        Self {
            id: v.id,
            document_id: v.document_id,
            tenant_id: v.tenant_id,
            storage_key: v.storage_key,
            size_bytes: v.size_bytes,
            sha256: v.sha256,
            content_type: v.content_type,
            original_filename: v.original_filename,
            created_at: v.created_at,
            number: v.number,
            status: v.status,
            processing_error: v.processing_error,
        }
    }
}

/// `QUEUED → RUNNING` for the holder of the job's CURRENT event only: a duplicate or an
/// older event's message claims nothing. Attempts are counted here, so a crash counts.
pub async fn claim_job(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
    event_id: Uuid,
    worker_id: &str,
    task_id: Uuid,
    lease: Duration,
) -> Result<Option<Job>, DbError> {
    let request = ClaimRequest {
        job_id,
        event_id,
        task_id,
    };
    let claimed = claim_jobs(conn, &[request], worker_id, lease).await?;
    Ok(claimed.into_iter().next().map(|claimed| claimed.job))
}

/// [`claim_job`] for a batch of popped messages in ONE statement: each row keeps its own
/// guard (`QUEUED` and the message's event is the job's current one), so the batch claims
/// exactly what the messages one by one would have. Two messages for one job claim it
/// once. Rows are locked in job id order, so two batches that share jobs (copies of
/// one message popped by two workers) wait for each other instead of deadlocking. The claim commits asynchronously (`synchronous_commit = off` for this statement
/// only): a database crash that undoes it leaves the job `QUEUED` with its event
/// published, which lost-message recovery announces again with a new broker task. The
/// first run's fence names the old task, so its heartbeat stops it and its writes change
/// nothing; and any durable commit of the first run (an effect, the finish) flushes the
/// claim before it, so no effect can outlive an undone claim.
///
/// A job a pause holds (its tenant's `processing_paused_at`, its queue in
/// `queue_pauses`) claims nothing and stays `QUEUED`, even when its message was in Redis
/// before the pause: the message is spent like a duplicate's, and the resume gives the
/// job a new event (`pauses::reannounce_released`).
///
/// The rows are found by key whatever the statistics say: the guard is written
/// `IS NOT DISTINCT FROM` ([lookups by key](super#lookups-by-key)). Each claimed job's
/// document version comes with it, looked up by its key after the claim
/// ([`ClaimedJob::version`]).
pub async fn claim_jobs(
    conn: &mut AsyncPgConnection,
    requests: &[ClaimRequest],
    worker_id: &str,
    lease: Duration,
) -> Result<Vec<ClaimedJob>, DbError> {
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let job_ids: Vec<Uuid> = requests.iter().map(|r| r.job_id).collect();
    let event_ids: Vec<Uuid> = requests.iter().map(|r| r.event_id).collect();
    let task_ids: Vec<Uuid> = requests.iter().map(|r| r.task_id).collect();
    Ok(diesel::sql_query(
        "WITH relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)), \
         m AS (SELECT * FROM unnest($3::uuid[], $4::uuid[], $5::uuid[]) AS m(job_id, event_id, task_id)), \
         locked AS ( \
             SELECT q.id FROM processing_jobs AS q JOIN m ON q.id = m.job_id \
             WHERE q.status IS NOT DISTINCT FROM 'QUEUED' AND q.current_event_id = m.event_id \
               AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = q.job_type) \
               AND NOT EXISTS (SELECT 1 FROM tenants AS t \
                               WHERE t.id = q.tenant_id AND t.processing_paused_at IS NOT NULL) \
             ORDER BY q.id FOR UPDATE OF q), \
         claimed AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'RUNNING', attempts = j.attempts + 1, worker_id = $1, \
                 last_task_id = m.task_id, started_at = now(), heartbeat_at = now(), \
                 lease_expires_at = now() + $2 * interval '1 millisecond', \
                 error_code = NULL, error_message = NULL, updated_at = now() \
             FROM m, relaxed \
             WHERE j.id = m.job_id AND j.id IN (SELECT id FROM locked) \
               AND j.status IS NOT DISTINCT FROM 'QUEUED' AND j.current_event_id = m.event_id \
             RETURNING j.id, j.tenant_id, j.document_id, j.job_type, j.payload, j.status, \
                 j.attempts, j.max_attempts, j.current_event_id, j.worker_id, j.last_task_id, \
                 j.lease_expires_at, j.heartbeat_at, j.queued_at, j.started_at, j.finished_at, \
                 j.error_code, j.error_message, j.created_at, j.updated_at, \
                 (SELECT t.status FROM tenants AS t WHERE t.id = j.tenant_id) AS tenant_status) \
         SELECT c.*, v.id AS v_id, v.document_id AS v_document_id, v.tenant_id AS v_tenant_id, \
             v.storage_key AS v_storage_key, v.size_bytes AS v_size_bytes, v.sha256 AS v_sha256, \
             v.content_type AS v_content_type, v.original_filename AS v_original_filename, \
             v.created_at AS v_created_at, v.number AS v_number, v.status AS v_status, \
             v.processing_error AS v_processing_error \
         FROM claimed AS c \
         LEFT JOIN document_versions AS v \
           ON v.id = CASE WHEN c.payload ->> 'document_version_id' ~ $6 \
                          THEN (c.payload ->> 'document_version_id')::uuid END \
          AND v.document_id = c.document_id AND v.tenant_id = c.tenant_id",
    )
    .bind::<Text, _>(worker_id)
    .bind::<Int8, _>(duration_millis(lease))
    .bind::<Array<SqlUuid>, _>(job_ids)
    .bind::<Array<SqlUuid>, _>(event_ids)
    .bind::<Array<SqlUuid>, _>(task_ids)
    .bind::<Text, _>(UUID_PATTERN)
    .prepared()
    .load::<ClaimedRow>(conn)
    .await?
    .into_iter()
    .map(|row| ClaimedJob {
        job: row.job,
        tenant_status: row.tenant_status,
        version: row.version.map(DocumentVersion::from),
    })
    .collect())
}

/// A UUID's text as serde writes it: only such a payload value is cast in the claim,
/// so a malformed one reads no version instead of failing the whole batch's claim.
const UUID_PATTERN: &str = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/// Fenced `RUNNING → SUCCEEDED`. False when the fence no longer holds.
pub async fn mark_succeeded(conn: &mut AsyncPgConnection, fence: &Fence) -> Result<bool, DbError> {
    let done = mark_succeeded_many(conn, std::slice::from_ref(fence)).await?;
    Ok(done.len() == 1)
}

#[derive(QueryableByName)]
struct JobId {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// [`mark_succeeded`] for many jobs in one statement (one commit, one WAL flush): each
/// row keeps its own fence. Returns the ids of the jobs whose fence held.
pub async fn mark_succeeded_many(
    conn: &mut AsyncPgConnection,
    fences: &[Fence],
) -> Result<Vec<Uuid>, DbError> {
    let ids: Vec<Uuid> = fences.iter().map(|f| f.job_id).collect();
    let workers: Vec<&str> = fences.iter().map(|f| f.worker_id.as_str()).collect();
    let attempts: Vec<i32> = fences.iter().map(|f| f.attempt).collect();
    let tasks: Vec<Uuid> = fences.iter().map(|f| f.task_id).collect();
    // The NOTIFY (at commit) wakes the dispatchers: a slot and a share of the tenant's
    // running cap are free, so the next event can be published at once.
    let done = diesel::sql_query(
        "WITH done AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'SUCCEEDED', finished_at = now(), lease_expires_at = NULL, updated_at = now() \
             FROM unnest($1::uuid[], $2::text[], $3::int4[], $4::uuid[]) \
                 AS f(id, worker_id, attempt, task_id) \
             WHERE j.id = f.id AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = f.worker_id \
               AND j.attempts = f.attempt AND j.last_task_id = f.task_id \
             RETURNING j.id) \
         SELECT id, pg_notify('quire_outbox', '') IS NULL AS notified FROM done",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Array<Text>, _>(workers)
    .bind::<Array<Int4>, _>(attempts)
    .bind::<Array<SqlUuid>, _>(tasks)
    .prepared()
    .load::<JobId>(conn)
    .await?;
    Ok(done.into_iter().map(|row| row.id).collect())
}

/// Fenced `RUNNING → FAILED` with a stable code and a safe, bounded message.
pub async fn mark_failed(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    error_code: &str,
    safe_message: &str,
) -> Result<bool, DbError> {
    // The NOTIFY wakes the dispatchers (see `mark_succeeded_many`).
    let updated = diesel::sql_query(
        "WITH failed AS ( \
             UPDATE processing_jobs \
             SET status = 'FAILED', finished_at = now(), lease_expires_at = NULL, \
                 error_code = $4, error_message = $5, updated_at = now() \
             WHERE id = $1 AND status IS NOT DISTINCT FROM 'RUNNING' AND worker_id = $2 AND attempts = $3 \
               AND last_task_id = $6 \
             RETURNING id) \
         SELECT count(pg_notify('quire_outbox', '')) AS count FROM failed",
    )
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<Text, _>(error_code)
    .bind::<Text, _>(bounded(safe_message))
    .bind::<SqlUuid, _>(fence.task_id)
    .prepared()
    .get_result::<Count>(conn)
    .await?
    .count;
    Ok(updated == 1)
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// Fenced `RUNNING → QUEUED` after a transient failure, with a NEW outbox event due after
/// `delay`: the outbox is the scheduler, and a stale copy of the old event's message can
/// no longer claim the job (the claim matches `current_event_id`).
pub async fn requeue_for_retry(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    delay: Duration,
    error_code: &str,
    safe_message: &str,
) -> Result<bool, DbError> {
    let event_id = Uuid::now_v7();
    let requeued = diesel::sql_query(concat!(
        "WITH job AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'QUEUED', current_event_id = $4, worker_id = NULL, \
                 lease_expires_at = NULL, heartbeat_at = NULL, \
                 error_code = $6, error_message = $7, updated_at = now() \
             FROM (SELECT current_event_id AS previous FROM processing_jobs WHERE id = $1) AS prev \
             WHERE j.id = $1 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $2 AND j.attempts = $3 \
               AND j.last_task_id = $8 \
             RETURNING j.id, j.tenant_id, j.job_type, prev.previous), ",
        next_event_cte!(
            "$4",
            "job.previous",
            "now() + $5 * interval '1 millisecond'"
        ),
        // The NOTIFY wakes the dispatchers: the slot is free (the retry is due later).
        " SELECT count(pg_notify('quire_outbox', '')) AS count FROM event"
    ))
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(event_id)
    .bind::<Int8, _>(duration_millis(delay))
    .bind::<Text, _>(error_code)
    .bind::<Text, _>(bounded(safe_message))
    .bind::<SqlUuid, _>(fence.task_id)
    .prepared()
    .get_result::<Count>(conn)
    .await?;
    Ok(requeued.count == 1)
}

/// What [`stop_at_shutdown`] did to a job the drain deadline stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Attempts were left: `QUEUED` again with a new event due now.
    Requeued,
    /// That was its last attempt: `FAILED`, and the version its payload names too if the
    /// job owns its status. `document_failed`: the document itself failed (that version
    /// is its current one, or the payload names none) — what `document.failed` announces.
    Failed { document_failed: bool },
    /// The fence no longer held: nothing changed.
    Stale,
}

#[derive(QueryableByName)]
struct StoppedRow {
    #[diesel(sql_type = Int8)]
    requeued: i64,
    #[diesel(sql_type = Int8)]
    failed: i64,
    #[diesel(sql_type = Int8)]
    document_failed: i64,
}

/// Fenced end of a run the worker's drain deadline stopped, in ONE statement that reads
/// the budget on the row itself: with attempts left, `RUNNING → QUEUED` with a new event
/// due now (as [`requeue_for_retry`]); on its last attempt, `RUNNING → FAILED` and the
/// document of a job that owns its status `FAILED` — the rescuer's rule for a spent
/// lease, so frequent deploys cannot loop a job longer than the drain deadline for ever.
/// The two branches exclude each other, so exactly one applies or, stale, neither.
pub async fn stop_at_shutdown(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    error_code: &str,
    safe_message: &str,
) -> Result<Stopped, DbError> {
    let event_id = Uuid::now_v7();
    let row = diesel::sql_query(concat!(
        "WITH job AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'QUEUED', current_event_id = $4, worker_id = NULL, \
                 lease_expires_at = NULL, heartbeat_at = NULL, \
                 error_code = $5, error_message = $6, updated_at = now() \
             FROM (SELECT current_event_id AS previous FROM processing_jobs WHERE id = $1) AS prev \
             WHERE j.id = $1 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $2 AND j.attempts = $3 \
               AND j.last_task_id = $7 AND j.attempts < j.max_attempts \
             RETURNING j.id, j.tenant_id, j.job_type, prev.previous), ",
        next_event_cte!("$4", "job.previous", "now()"),
        ", failed AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'FAILED', finished_at = now(), lease_expires_at = NULL, \
                 error_code = $5, error_message = $6, updated_at = now() \
             WHERE j.id = $1 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $2 AND j.attempts = $3 \
               AND j.last_task_id = $7 AND j.attempts >= j.max_attempts \
             RETURNING j.id, j.tenant_id, j.document_id, j.job_type, j.payload), ",
        super::analysis::failed_analysis_ctes!("failed", "$6", "failed.job_type = ANY($8)"),
        " SELECT (SELECT count(*) FROM event) AS requeued, (SELECT count(*) FROM failed) AS failed, \
             (SELECT count(*) FROM document) AS document_failed, \
             pg_notify('quire_outbox', '') IS NULL AS notified"
    ))
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(event_id)
    .bind::<Text, _>(error_code)
    .bind::<Text, _>(bounded(safe_message))
    .bind::<SqlUuid, _>(fence.task_id)
    .bind::<Array<Text>, _>(crate::jobs::document_status_owners())
    .prepared()
    .get_result::<StoppedRow>(conn)
    .await?;
    Ok(match (row.requeued, row.failed) {
        (1, _) => Stopped::Requeued,
        (_, 1) => Stopped::Failed {
            document_failed: row.document_failed == 1,
        },
        _ => Stopped::Stale,
    })
}

#[derive(QueryableByName)]
struct Holds {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    holds: bool,
}

/// True while the run's fence holds: the job is still `RUNNING` for this worker, attempt
/// and task. One indexed read, made before each write a run does outside the database (an
/// object), so a cancelled or taken-over run stops before it writes.
pub async fn fence_holds(conn: &mut AsyncPgConnection, fence: &Fence) -> Result<bool, DbError> {
    let row = diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM processing_jobs \
                        WHERE id = $1 AND status IS NOT DISTINCT FROM 'RUNNING' AND worker_id = $2 \
                          AND attempts = $3 AND last_task_id = $4) AS holds",
    )
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .prepared()
    .get_result::<Holds>(conn)
    .await?;
    Ok(row.holds)
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// The fence holds; the lease was extended.
    Extended,
    /// The job moved on without this worker (cancelled, rescued, gone): stop working on it.
    Lost(Option<JobStatus>),
}

#[derive(QueryableByName)]
struct BeatRow {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    extended: bool,
    #[diesel(sql_type = Nullable<Text>)]
    status: Option<JobStatus>,
}

/// Fenced lease extension that also reads the job's status, in one statement.
pub async fn heartbeat(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    lease: Duration,
) -> Result<Beat, DbError> {
    let row = diesel::sql_query(
        "WITH beat AS ( \
             UPDATE processing_jobs \
             SET heartbeat_at = now(), lease_expires_at = now() + $4 * interval '1 millisecond' \
             WHERE id = $1 AND status IS NOT DISTINCT FROM 'RUNNING' AND worker_id = $2 AND attempts = $3 \
               AND last_task_id = $5 \
             RETURNING status) \
         SELECT EXISTS (SELECT 1 FROM beat) AS extended, \
                (SELECT status FROM processing_jobs WHERE id = $1) AS status",
    )
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<Int8, _>(duration_millis(lease))
    .bind::<SqlUuid, _>(fence.task_id)
    .prepared()
    .get_result::<BeatRow>(conn)
    .await?;
    Ok(if row.extended {
        Beat::Extended
    } else {
        Beat::Lost(row.status)
    })
}

/// `FAILED → QUEUED` by an authorized retry, for this tenant's document only: a new
/// outbox event due now and a fresh budget of `fresh_attempts` automatic attempts.
/// False when the job is not (or no longer) `FAILED`.
pub async fn retry_failed_job(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Option<Uuid>,
    job_id: Uuid,
    fresh_attempts: i32,
) -> Result<bool, DbError> {
    let event_id = Uuid::now_v7();
    let retried = diesel::sql_query(concat!(
        "WITH job AS ( \
             UPDATE processing_jobs AS j \
             SET status = 'QUEUED', current_event_id = $4, max_attempts = j.attempts + $5, \
                 worker_id = NULL, lease_expires_at = NULL, heartbeat_at = NULL, \
                 started_at = NULL, finished_at = NULL, error_code = NULL, error_message = NULL, \
                 queued_at = now(), updated_at = now() \
             FROM (SELECT current_event_id AS previous FROM processing_jobs WHERE id = $1) AS prev \
             WHERE j.id = $1 AND j.tenant_id = $2 AND j.document_id IS NOT DISTINCT FROM $3 \
               AND j.status = 'FAILED' \
             RETURNING j.id, j.tenant_id, j.job_type, prev.previous), ",
        // An operator's or member's retry is interactive, whatever the job's origin.
        next_event_cte!("$4", "job.previous", "now()", "'interactive'"),
        " SELECT count(pg_notify('quire_outbox', '')) AS count FROM event"
    ))
    .bind::<SqlUuid, _>(job_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Nullable<SqlUuid>, _>(document_id)
    .bind::<SqlUuid, _>(event_id)
    .bind::<Int4, _>(fresh_attempts)
    .get_result::<Count>(conn)
    .await?;
    Ok(retried.count == 1)
}

/// The end of every cancellation statement, after a CTE `jobs` of the cancelled job ids:
/// their undelivered events are cancelled too, in the same statement (so no dispatcher
/// publishes a cancelled job), and the statement answers how many jobs it cancelled.
/// The event rows are locked in id order first, the order every statement that writes
/// several events takes them (`outbox::mark_published`, `outbox::release_for_retry`): a
/// cancel of 220 jobs against a dispatcher marking its batch published took the same
/// events in opposite orders and deadlocked (`faults::cancel`).
macro_rules! cancel_events_cte {
    () => {
        "held_events AS ( \
             SELECT id FROM outbox_events \
             WHERE job_id IN (SELECT id FROM jobs) AND status IN ('PENDING', 'PUBLISHING') \
             ORDER BY id FOR UPDATE), \
         events AS ( \
             UPDATE outbox_events SET status = 'CANCELLED', claimed_at = NULL, claimed_by = NULL \
             WHERE id IN (SELECT id FROM held_events) AND status IN ('PENDING', 'PUBLISHING') \
             RETURNING id) \
         SELECT count(*) AS count FROM jobs"
    };
}
pub(crate) use cancel_events_cte;

/// A cancellation statement's count, also counted in the metrics.
fn counted_cancellations(cancelled: Count) -> usize {
    let cancelled = usize::try_from(cancelled.count).unwrap_or(0);
    metrics::counter!(crate::metrics::JOBS_CANCELLED).increment(cancelled as u64);
    cancelled
}

/// Locks every active job of a document, in id order: the first step of a trash, which
/// takes a document's job rows before the document row, the order every finish and
/// cancel takes them (job, then document, then versions); see docs/decisions.md, "Lock
/// order". A job finishing meanwhile is waited for, then skipped (no longer active).
pub async fn lock_document_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<(), DbError> {
    diesel::sql_query(
        "SELECT id FROM processing_jobs \
         WHERE tenant_id = $1 AND document_id = $2 AND status IN ('QUEUED', 'RUNNING') \
         ORDER BY id FOR UPDATE",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// `QUEUED | RUNNING → CANCELLED` for every active job of a document, and
/// `PENDING | PUBLISHING → CANCELLED` for their events, in one statement (call in the
/// trash transaction). A running handler notices at its next heartbeat.
pub async fn cancel_document_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<usize, DbError> {
    let cancelled = again_in_savepoint_if_moved!(conn, {
        diesel::sql_query(concat!(
            "WITH jobs AS ( \
             UPDATE processing_jobs \
             SET status = 'CANCELLED', finished_at = now(), lease_expires_at = NULL, \
                 error_code = 'cancelled', error_message = 'the document was trashed', \
                 updated_at = now() \
             WHERE tenant_id = $1 AND document_id = $2 AND status IN ('QUEUED', 'RUNNING') \
             RETURNING id), ",
            cancel_events_cte!()
        ))
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(document_id)
        .get_result::<Count>(conn)
        .await
    })?;
    Ok(counted_cancellations(cancelled))
}

/// `QUEUED | RUNNING → CANCELLED` for the given jobs and their undelivered events
/// (operators and tests; the API cancels through documents).
pub async fn cancel_jobs(
    conn: &mut AsyncPgConnection,
    job_ids: &[Uuid],
    safe_message: &str,
) -> Result<usize, DbError> {
    let cancelled = again_in_savepoint_if_moved!(conn, {
        diesel::sql_query(concat!(
            "WITH jobs AS ( \
             UPDATE processing_jobs \
             SET status = 'CANCELLED', finished_at = now(), lease_expires_at = NULL, \
                 error_code = 'cancelled', error_message = $2, updated_at = now() \
             WHERE id = ANY($1) AND status IN ('QUEUED', 'RUNNING') \
             RETURNING id), ",
            cancel_events_cte!()
        ))
        .bind::<Array<SqlUuid>, _>(job_ids)
        .bind::<Text, _>(bounded(safe_message))
        .get_result::<Count>(conn)
        .await
    })?;
    Ok(counted_cancellations(cancelled))
}

/// `QUEUED → CANCELLED` for a document's queued jobs of one type, and their undelivered
/// events (a restore withdraws a purge that has not started).
pub async fn cancel_queued_document_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    job_type: &str,
    safe_message: &str,
) -> Result<usize, DbError> {
    let cancelled = again_in_savepoint_if_moved!(conn, {
        diesel::sql_query(concat!(
            "WITH jobs AS ( \
             UPDATE processing_jobs \
             SET status = 'CANCELLED', finished_at = now(), error_code = 'cancelled', \
                 error_message = $4, updated_at = now() \
             WHERE tenant_id = $1 AND document_id = $2 AND job_type = $3 AND status = 'QUEUED' \
             RETURNING id), ",
            cancel_events_cte!()
        ))
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(document_id)
        .bind::<Text, _>(job_type)
        .bind::<Text, _>(bounded(safe_message))
        .get_result::<Count>(conn)
        .await
    })?;
    Ok(counted_cancellations(cancelled))
}

/// The jobs of one of this tenant's documents, oldest first.
pub async fn list_document_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<Vec<Job>, DbError> {
    Ok(processing_jobs::table
        .filter(processing_jobs::tenant_id.eq(tenant_id))
        .filter(processing_jobs::document_id.eq(document_id))
        .order((processing_jobs::queued_at.asc(), processing_jobs::id.asc()))
        .select(Job::as_select())
        .load(conn)
        .await?)
}

/// One job, only if it belongs to this tenant's document.
pub async fn find_document_job(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    job_id: Uuid,
) -> Result<Option<Job>, DbError> {
    Ok(processing_jobs::table
        .filter(processing_jobs::id.eq(job_id))
        .filter(processing_jobs::tenant_id.eq(tenant_id))
        .filter(processing_jobs::document_id.eq(document_id))
        .select(Job::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// Any job by id, for operators and tests (no tenant scope: never call from the API).
pub async fn find_job(conn: &mut AsyncPgConnection, job_id: Uuid) -> Result<Option<Job>, DbError> {
    Ok(processing_jobs::table
        .find(job_id)
        .select(Job::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// A tenant's own lifecycle jobs (provisioning, deletion: no document), oldest first.
pub async fn list_tenant_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Vec<Job>, DbError> {
    Ok(processing_jobs::table
        .filter(processing_jobs::tenant_id.eq(tenant_id))
        .filter(processing_jobs::document_id.is_null())
        .order((processing_jobs::queued_at.asc(), processing_jobs::id.asc()))
        .select(Job::as_select())
        .load(conn)
        .await?)
}

/// What an operator filters jobs by.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Any of these (all when empty).
    pub statuses: Vec<JobStatus>,
    /// Oldest queued first instead of newest first.
    pub oldest_first: bool,
    pub job_type: Option<String>,
    pub tenant_id: Option<Uuid>,
    pub limit: i64,
}

/// Jobs matching `filter`, newest first (operators: the admin CLI and the dashboard).
pub async fn list_jobs(
    conn: &mut AsyncPgConnection,
    filter: &JobFilter,
) -> Result<Vec<Job>, DbError> {
    let mut query = processing_jobs::table.into_boxed();
    if !filter.statuses.is_empty() {
        query = query.filter(processing_jobs::status.eq_any(filter.statuses.clone()));
    }
    if let Some(job_type) = &filter.job_type {
        query = query.filter(processing_jobs::job_type.eq(job_type.clone()));
    }
    if let Some(tenant_id) = filter.tenant_id {
        query = query.filter(processing_jobs::tenant_id.eq(tenant_id));
    }
    query = if filter.oldest_first {
        query.order((processing_jobs::queued_at.asc(), processing_jobs::id.asc()))
    } else {
        query.order((
            processing_jobs::queued_at.desc(),
            processing_jobs::id.desc(),
        ))
    };
    Ok(query
        .limit(filter.limit)
        .select(Job::as_select())
        .load(conn)
        .await?)
}

/// Jobs by id, for batch inspection.
pub async fn find_jobs(
    conn: &mut AsyncPgConnection,
    job_ids: &[Uuid],
) -> Result<Vec<Job>, DbError> {
    Ok(
        diesel::sql_query("SELECT * FROM processing_jobs WHERE id = ANY($1)")
            .bind::<Array<SqlUuid>, _>(job_ids)
            .load::<Job>(conn)
            .await?,
    )
}

/// Cuts a message to the column's bound on a character boundary.
pub fn bounded(message: &str) -> &str {
    match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        Some((end, _)) => &message[..end],
        None => message,
    }
}

pub(crate) fn duration_millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_messages_keep_whole_characters() {
        let long = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 10);
        assert_eq!(bounded(&long).chars().count(), MAX_ERROR_MESSAGE_CHARS);
        assert_eq!(bounded("short"), "short");
    }
}
