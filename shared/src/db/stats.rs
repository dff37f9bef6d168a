//! The numbers operators watch, straight from PostgreSQL: jobs by type and status, the
//! outbox by status and its lag, the oldest queued job. `/metrics`, `quire-admin stats`
//! and the dashboard all read them here, so they always agree.

use diesel::sql_types::{BigInt, Double, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::DbError;

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

#[derive(Debug, Clone, Copy, PartialEq, diesel::QueryableByName)]
pub struct Ages {
    /// Age of the oldest due `PENDING` event: how far publishing is behind.
    #[diesel(sql_type = Double)]
    pub outbox_lag_seconds: f64,
    /// Age of the oldest `QUEUED` job.
    #[diesel(sql_type = Double)]
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

pub async fn ages(conn: &mut AsyncPgConnection) -> Result<Ages, DbError> {
    Ok(diesel::sql_query(
        "SELECT \
           coalesce((SELECT extract(epoch FROM now() - min(next_attempt_at))::float8 \
                     FROM outbox_events WHERE status = 'PENDING' AND next_attempt_at <= now()), 0) \
             AS outbox_lag_seconds, \
           coalesce((SELECT extract(epoch FROM now() - min(queued_at))::float8 \
                     FROM processing_jobs WHERE status = 'QUEUED'), 0) \
             AS oldest_queued_seconds",
    )
    .get_result(conn)
    .await?)
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
