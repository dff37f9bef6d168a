//! The numbers operators watch, straight from PostgreSQL: jobs by type and status, the
//! outbox by status and its lag, the oldest queued job. `quire-admin stats` and the
//! dashboard read them here. The queue-state gauges (`crate::queue_state`) read only the
//! bounded ones below "Bounded": exact counts of the active states over their partial
//! indexes, and estimates from the planner's statistics for the finished states, never
//! a count over every retained row.

use diesel::sql_types::{BigInt, Double, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::DbError;

/// The oldest due `PENDING` event's `next_attempt_at`, `NULL` with none: the first due
/// entry of each queue, class and tenant along `outbox_events_fair_idx`, the tenants found
/// by the skip scan the scheduler's round uses (`pending_heads!`). A minimum over the whole index would
/// read every pending event (the index leads with the queue, not the due time).
macro_rules! oldest_due_pending {
    () => {
        concat!(
            "(WITH RECURSIVE ",
            pending_heads!(),
            " \
          SELECT min(d.next_attempt_at) FROM heads AS h CROSS JOIN LATERAL ( \
              SELECT e.next_attempt_at FROM outbox_events AS e \
              WHERE e.status = 'PENDING' AND e.queue = h.queue AND e.priority = h.priority \
                AND e.tenant_id = h.tenant_id AND e.next_attempt_at <= now() \
              ORDER BY e.next_attempt_at LIMIT 1) AS d)"
        )
    };
}

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct JobCount {
    #[diesel(sql_type = Text)]
    pub job_type: String,
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct EventCount {
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ages {
    /// Age of the oldest due `PENDING` event: how far publishing is behind.
    pub outbox_lag_seconds: f64,
    /// Age of the oldest `QUEUED` job.
    pub oldest_queued_seconds: f64,
}

pub async fn jobs_by_type_and_status(
    conn: &mut AsyncPgConnection,
) -> Result<Vec<JobCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT job_type, status, count(*) AS count FROM processing_jobs \
         GROUP BY job_type, status ORDER BY job_type, status",
    )
    .load(conn)
    .await?)
}

pub async fn events_by_status(conn: &mut AsyncPgConnection) -> Result<Vec<EventCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT status, count(*) AS count FROM outbox_events GROUP BY status ORDER BY status",
    )
    .load(conn)
    .await?)
}

/// The outbox lag and the oldest queued job, for the dashboard and `quire-admin stats`:
/// the lag is the one [`active_events`] read (they both need it, and it costs a skip
/// scan), so only the oldest queued job is read here.
pub async fn ages(conn: &mut AsyncPgConnection, events: &ActiveEvents) -> Result<Ages, DbError> {
    #[derive(diesel::QueryableByName)]
    struct Oldest {
        #[diesel(sql_type = Double)]
        seconds: f64,
    }
    let oldest: Oldest = diesel::sql_query(
        "SELECT coalesce(extract(epoch FROM now() - min(queued_at))::float8, 0) AS seconds \
         FROM processing_jobs WHERE status = 'QUEUED'",
    )
    .get_result(conn)
    .await?;
    Ok(Ages {
        outbox_lag_seconds: events.lag_seconds,
        oldest_queued_seconds: oldest.seconds,
    })
}

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct MinuteCount {
    /// Minutes ago, 0 (this minute) to 59.
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub minutes_ago: i32,
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
}

/// Jobs finished per minute over the last hour, by final status (the dashboard's chart).
pub async fn finished_per_minute(
    conn: &mut AsyncPgConnection,
) -> Result<Vec<MinuteCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT (extract(epoch FROM date_trunc('minute', now()) - date_trunc('minute', finished_at)) / 60)::int \
                AS minutes_ago, status, count(*) AS count \
         FROM processing_jobs \
         WHERE finished_at > date_trunc('minute', now()) - interval '59 minutes' \
         GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .load(conn)
    .await?)
}

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct QueueRow {
    #[diesel(sql_type = Text)]
    pub job_type: String,
    #[diesel(sql_type = BigInt)]
    pub queued: i64,
    #[diesel(sql_type = BigInt)]
    pub running: i64,
    /// Finished in the last hour: the queue's throughput.
    #[diesel(sql_type = BigInt)]
    pub succeeded_last_hour: i64,
    #[diesel(sql_type = BigInt)]
    pub failed_last_hour: i64,
}

/// Per job type: waiting, running, and the last hour's throughput.
pub async fn queues(conn: &mut AsyncPgConnection) -> Result<Vec<QueueRow>, DbError> {
    Ok(diesel::sql_query(
        "SELECT job_type, \
                count(*) FILTER (WHERE status = 'QUEUED') AS queued, \
                count(*) FILTER (WHERE status = 'RUNNING') AS running, \
                count(*) FILTER (WHERE status = 'SUCCEEDED' AND finished_at > now() - interval '1 hour') \
                  AS succeeded_last_hour, \
                count(*) FILTER (WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour') \
                  AS failed_last_hour \
         FROM processing_jobs \
         WHERE status IN ('QUEUED', 'RUNNING') OR finished_at > now() - interval '1 hour' \
         GROUP BY job_type ORDER BY job_type",
    )
    .load(conn)
    .await?)
}

// Bounded: what the queue-state refresh reads (`crate::queue_state`), whatever the size
// of the retained history.

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct ActiveJobs {
    #[diesel(sql_type = Text)]
    pub job_type: String,
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
    /// Age of the type's oldest queued job (0 for the running).
    #[diesel(sql_type = Double)]
    pub oldest_seconds: f64,
}

/// `QUEUED` and `RUNNING` jobs by type, exact: each state is read over its own partial
/// index (`processing_jobs_queued_idx`, `processing_jobs_running_lease_idx`), so the cost
/// follows the backlog and the running jobs, never the retained history.
pub async fn active_jobs(conn: &mut AsyncPgConnection) -> Result<Vec<ActiveJobs>, DbError> {
    Ok(diesel::sql_query(
        "SELECT job_type, 'QUEUED' AS status, count(*) AS count, \
                extract(epoch FROM now() - min(queued_at))::float8 AS oldest_seconds \
         FROM processing_jobs WHERE status = 'QUEUED' GROUP BY job_type \
         UNION ALL \
         SELECT job_type, 'RUNNING', count(*), 0::float8 \
         FROM processing_jobs WHERE status = 'RUNNING' GROUP BY job_type \
         ORDER BY 1, 2",
    )
    .load(conn)
    .await?)
}

#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct QueuedGroup {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    pub tenant_id: uuid::Uuid,
    #[diesel(sql_type = Text)]
    pub job_type: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
    /// Age of the group's oldest queued job.
    #[diesel(sql_type = Double)]
    pub oldest_seconds: f64,
}

/// `QUEUED` jobs by tenant and type, exact, in one index-only scan of
/// `processing_jobs_queued_tenant_idx` (in its order: no sort). The per-tenant and the
/// per-type gauges both come from these groups, so the backlog is read once. At most
/// tenants × types rows; the cost follows the backlog (about 20 ms for 100,000 queued
/// jobs of 1,000 tenants on the bench machine), never the retained history.
pub async fn queued_by_tenant_and_type(
    conn: &mut AsyncPgConnection,
) -> Result<Vec<QueuedGroup>, DbError> {
    Ok(diesel::sql_query(
        "SELECT tenant_id, job_type, count(*) AS count, \
                extract(epoch FROM now() - min(queued_at))::float8 AS oldest_seconds \
         FROM processing_jobs WHERE status = 'QUEUED' GROUP BY tenant_id, job_type",
    )
    .load(conn)
    .await?)
}

/// `RUNNING` jobs by type, exact, over `processing_jobs_running_lease_idx` (its rows are
/// bounded by the fleet's slots).
pub async fn running_by_type(conn: &mut AsyncPgConnection) -> Result<Vec<JobCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT job_type, 'RUNNING' AS status, count(*) AS count \
         FROM processing_jobs WHERE status = 'RUNNING' GROUP BY job_type ORDER BY job_type",
    )
    .load(conn)
    .await?)
}

/// Finished jobs (`SUCCEEDED`, `FAILED`, `CANCELLED`) by type, estimated from the
/// multivariate MCV statistics over (job_type, status) that ANALYZE keeps
/// (`processing_jobs_type_status_stats`) times the table's row estimate: a catalog read.
/// Empty until the table was first analyzed; a combination too rare for the MCV list is
/// left out.
pub async fn finished_jobs_estimate(
    conn: &mut AsyncPgConnection,
) -> Result<Vec<JobCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT job_type, status, count FROM ( \
           SELECT s.most_common_vals[i][array_position(s.attnames, 'job_type'::name)] AS job_type, \
                  s.most_common_vals[i][array_position(s.attnames, 'status'::name)] AS status, \
                  round(s.most_common_freqs[i] * greatest(c.reltuples, 0))::int8 AS count \
           FROM pg_stats_ext s \
           JOIN pg_namespace n ON n.nspname = s.schemaname \
           JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename \
           CROSS JOIN LATERAL generate_subscripts(s.most_common_vals, 1) AS i \
           WHERE s.schemaname = current_schema() AND s.tablename = 'processing_jobs' \
             AND s.statistics_name = 'processing_jobs_type_status_stats' AND NOT s.inherited \
         ) estimates \
         WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') \
         ORDER BY job_type, status",
    )
    .load(conn)
    .await?)
}

/// `PENDING` events are counted up to this many, one more telling "more": above it the
/// count is estimated ([`ActiveEvents::pending`]). An exact count reads every pending
/// event's row (the visibility map of a fresh backlog is unset): 2.8 s a refresh beside a
/// backlog of a million jobs (docs/benchmarks.md, "Cost at scale").
pub const PENDING_COUNTED_UP_TO: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, diesel::QueryableByName)]
pub struct ActiveEvents {
    /// `PENDING` events, counted up to [`PENDING_COUNTED_UP_TO`] + 1.
    #[diesel(sql_type = BigInt)]
    pub pending_counted: i64,
    #[diesel(sql_type = BigInt)]
    pub publishing: i64,
    /// Queued jobs whose current event was published and is not yet claimed
    /// (`processing_jobs_in_flight_idx`, bounded by the scheduler).
    #[diesel(sql_type = BigInt)]
    pub in_flight: i64,
    /// Age of the oldest due `PENDING` event: how far publishing is behind.
    #[diesel(sql_type = Double)]
    pub lag_seconds: f64,
}

impl ActiveEvents {
    /// The `PENDING` events and whether the figure is an estimate. Up to
    /// [`PENDING_COUNTED_UP_TO`], counted. Above it, derived from `queued_jobs` (the
    /// caller's exact count of `QUEUED` jobs): a queued job's current event is pending,
    /// publishing or in flight. Off by the few events a worker claimed before their mark
    /// (publishing, the job already running) and the published jobs the mark could not
    /// record as announced (it skips locked rows), never below the count itself.
    pub fn pending(&self, queued_jobs: i64) -> (i64, bool) {
        if self.pending_counted <= PENDING_COUNTED_UP_TO {
            (self.pending_counted, false)
        } else {
            let derived = queued_jobs - self.in_flight - self.publishing;
            (derived.max(self.pending_counted), true)
        }
    }
}

/// The undelivered events over their partial indexes (`outbox_events_fair_idx`,
/// `outbox_events_publishing_idx`, `processing_jobs_in_flight_idx`) and the outbox lag,
/// each read bounded however long the backlog: the pending events counted up to
/// [`PENDING_COUNTED_UP_TO`] + 1, the lag from each tenant's first due event.
pub async fn active_events(conn: &mut AsyncPgConnection) -> Result<ActiveEvents, DbError> {
    Ok(diesel::sql_query(concat!(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox_events WHERE status = 'PENDING' \
                 LIMIT $1) AS p) AS pending_counted, \
                (SELECT count(*) FROM outbox_events WHERE status = 'PUBLISHING') AS publishing, \
                (SELECT count(*) FROM processing_jobs \
                 WHERE status = 'QUEUED' AND announced_event_id = current_event_id) AS in_flight, \
                coalesce(extract(epoch FROM now() - ",
        oldest_due_pending!(),
        ")::float8, 0) AS lag_seconds"
    ))
    .bind::<BigInt, _>(PENDING_COUNTED_UP_TO + 1)
    .get_result(conn)
    .await?)
}

/// Delivered and cancelled events (`PUBLISHED`, `CANCELLED`), estimated from the
/// status column's most common values that ANALYZE keeps for the partition that holds
/// them (`outbox_events_delivered`), times its row estimate: a catalog read. Empty until
/// the partition was first analyzed.
pub async fn finished_events_estimate(
    conn: &mut AsyncPgConnection,
) -> Result<Vec<EventCount>, DbError> {
    Ok(diesel::sql_query(
        "SELECT v.status, round(v.frequency * greatest(c.reltuples, 0))::int8 AS count \
         FROM pg_stats s \
         JOIN pg_namespace n ON n.nspname = s.schemaname \
         JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename \
         CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) \
           AS v(status, frequency) \
         WHERE s.schemaname = current_schema() AND s.tablename = 'outbox_events_delivered' \
           AND s.attname = 'status' AND NOT s.inherited AND v.status IN ('PUBLISHED', 'CANCELLED') \
         ORDER BY v.status",
    )
    .load(conn)
    .await?)
}
