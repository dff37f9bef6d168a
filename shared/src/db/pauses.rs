//! Paused queues (`queue_pauses`) and paused tenants (`tenants.processing_paused_at`):
//! their queued jobs are held, not failed. The dispatcher does not publish them, the
//! worker's claim (`jobs::claim_jobs`) refuses them and leaves them `QUEUED`, and a
//! resume announces again, in its own transaction, every job whose message was spent
//! on a refused claim (see [`reannounce_released`]).

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Int8, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::jobs::Job;
use super::prepared::Prepared;
use super::schema::{queue_pauses, tenants};
use crate::states::JobStatus;

/// A paused queue.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = queue_pauses, check_for_backend(diesel::pg::Pg))]
pub struct QueuePause {
    pub queue: String,
    pub paused_at: OffsetDateTime,
    pub paused_by: String,
}

/// Why a queued job does not run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Its tenant's processing is paused.
    TenantPaused,
    /// Its queue (its job type) is paused.
    QueuePaused,
}

impl Held {
    /// The name the API and the dashboard show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TenantPaused => "tenant_paused",
            Self::QueuePaused => "queue_paused",
        }
    }
}

/// What holds a tenant's queued jobs: read once, applied to each of its jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    pub tenant_paused: bool,
    pub paused_queues: Vec<String>,
}

impl Holds {
    /// Why `job` is held, if it is: only a `QUEUED` job is; the tenant's pause first.
    pub fn of(&self, job: &Job) -> Option<Held> {
        if job.status != JobStatus::Queued {
            None
        } else if self.tenant_paused {
            Some(Held::TenantPaused)
        } else if self.paused_queues.contains(&job.job_type) {
            Some(Held::QueuePaused)
        } else {
            None
        }
    }
}

/// The paused queues, as one SQL expression of type `text[]`: [`holds`] reads it, and so
/// does the upload's one statement (`intake::record`), which returns its holds with it.
macro_rules! paused_queues_sql {
    () => {
        "ARRAY(SELECT queue FROM queue_pauses ORDER BY queue)"
    };
}
pub(crate) use paused_queues_sql;

#[derive(QueryableByName)]
struct HoldsRow {
    #[diesel(sql_type = Bool)]
    tenant_paused: bool,
    #[diesel(sql_type = Array<Text>)]
    paused_queues: Vec<String>,
}

/// The holds on `tenant_id`'s jobs, in one read (a tenant's row and the small
/// `queue_pauses` table).
pub async fn holds(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<Holds, DbError> {
    let row = diesel::sql_query(concat!(
        "SELECT COALESCE((SELECT processing_paused_at IS NOT NULL FROM tenants WHERE id = $1), \
                             false) AS tenant_paused, ",
        paused_queues_sql!(),
        " AS paused_queues"
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .prepared()
    .get_result::<HoldsRow>(conn)
    .await?;
    Ok(Holds {
        tenant_paused: row.tenant_paused,
        paused_queues: row.paused_queues,
    })
}

/// Pauses `queue` in one guarded statement; `None` when it was paused already.
pub async fn pause_queue(
    conn: &mut AsyncPgConnection,
    queue: &str,
    paused_by: &str,
) -> Result<Option<QueuePause>, DbError> {
    Ok(diesel::insert_into(queue_pauses::table)
        .values((
            queue_pauses::queue.eq(queue),
            queue_pauses::paused_by.eq(paused_by),
        ))
        .on_conflict_do_nothing()
        .returning(QueuePause::as_returning())
        .get_result(conn)
        .await
        .optional()?)
}

/// Resumes `queue` in one guarded statement; false when it was not paused.
pub async fn resume_queue(conn: &mut AsyncPgConnection, queue: &str) -> Result<bool, DbError> {
    Ok(
        diesel::delete(queue_pauses::table.filter(queue_pauses::queue.eq(queue)))
            .execute(conn)
            .await?
            == 1,
    )
}

/// Every paused queue, by name.
pub async fn paused_queues(conn: &mut AsyncPgConnection) -> Result<Vec<QueuePause>, DbError> {
    Ok(queue_pauses::table
        .order(queue_pauses::queue.asc())
        .select(QueuePause::as_select())
        .load(conn)
        .await?)
}

/// `processing_paused_at = now()` in one guarded statement; false when the tenant was
/// paused already or does not exist.
pub async fn pause_tenant(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<bool, DbError> {
    Ok(diesel::update(
        tenants::table
            .find(tenant_id)
            .filter(tenants::processing_paused_at.is_null()),
    )
    .set((
        tenants::processing_paused_at.eq(diesel::dsl::now),
        tenants::updated_at.eq(diesel::dsl::now),
    ))
    .execute(conn)
    .await?
        == 1)
}

/// `processing_paused_at = NULL` in one guarded statement; false when the tenant was not
/// paused or does not exist.
pub async fn resume_tenant(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<bool, DbError> {
    Ok(diesel::update(
        tenants::table
            .find(tenant_id)
            .filter(tenants::processing_paused_at.is_not_null()),
    )
    .set((
        tenants::processing_paused_at.eq(None::<OffsetDateTime>),
        tenants::updated_at.eq(diesel::dsl::now),
    ))
    .execute(conn)
    .await?
        == 1)
}

/// How many tenants are paused (over a partial index).
pub async fn paused_tenant_count(conn: &mut AsyncPgConnection) -> Result<i64, DbError> {
    Ok(tenants::table
        .filter(tenants::processing_paused_at.is_not_null())
        .count()
        .get_result(conn)
        .await?)
}

/// Whose held jobs a resume releases.
#[derive(Debug, Clone, Copy)]
pub enum Released<'a> {
    Queue(&'a str),
    Tenant(Uuid),
}

#[derive(QueryableByName)]
struct Spent {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    current_event_id: Uuid,
}

/// Jobs announced again per statement of a resume.
const REANNOUNCE_BATCH: i64 = 5_000;

/// Call in the resume's transaction, after its guarded statement: every `QUEUED` job of
/// the scope that nothing holds any more and whose current event was published (or is
/// being published) gets a NEW event due now — its message may have been spent on a
/// claim the pause refused, and nothing else would announce it again before the
/// lost-message grace. The old message, if still in Redis, claims nothing (the claim
/// matches the current event); the update re-checks status and event (the rescuer's
/// fence). Events still `PENDING` are left to the dispatcher, woken by the NOTIFY at
/// commit. Returns how many jobs were announced again.
pub async fn reannounce_released(
    conn: &mut AsyncPgConnection,
    scope: Released<'_>,
) -> Result<usize, DbError> {
    let (queue, tenant_id) = match scope {
        Released::Queue(queue) => (Some(queue), None),
        Released::Tenant(tenant_id) => (None, Some(tenant_id)),
    };
    let mut total = 0;
    loop {
        // Each pass takes jobs whose event is published: once announced again their
        // event is PENDING, so the loop ends.
        let spent: Vec<Spent> = diesel::sql_query(
            "SELECT j.id, j.current_event_id \
             FROM processing_jobs AS j JOIN outbox_events AS e ON e.id = j.current_event_id \
             WHERE j.status = 'QUEUED' AND e.status IN ('PUBLISHED', 'PUBLISHING') \
               AND ($1::text IS NULL OR j.job_type = $1) \
               AND ($2::uuid IS NULL OR j.tenant_id = $2) \
               AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = j.job_type) \
               AND NOT EXISTS (SELECT 1 FROM tenants AS t \
                               WHERE t.id = j.tenant_id AND t.processing_paused_at IS NOT NULL) \
             ORDER BY j.id LIMIT $3 FOR UPDATE OF j",
        )
        .bind::<diesel::sql_types::Nullable<Text>, _>(queue)
        .bind::<diesel::sql_types::Nullable<SqlUuid>, _>(tenant_id)
        .bind::<Int8, _>(REANNOUNCE_BATCH)
        .load(conn)
        .await?;
        if spent.is_empty() {
            break;
        }
        let batch = spent.len();
        let jobs: Vec<(Uuid, Uuid)> = spent
            .iter()
            .map(|job| (job.id, job.current_event_id))
            .collect();
        total += super::maintenance::announce_again(conn, &jobs).await?;
        if (batch as i64) < REANNOUNCE_BATCH {
            break;
        }
    }
    // Wake the dispatchers at commit: the released events (new or still PENDING) are due.
    diesel::sql_query("SELECT pg_notify('quire_outbox', '')")
        .execute(conn)
        .await?;
    Ok(total)
}
