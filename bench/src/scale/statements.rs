//! What PostgreSQL's own counters say of each phase of the `scale` scenario: the mean
//! execution time of every statement the stack ran, with its rows, the blocks it read
//! from outside shared buffers, dirtied and wrote, and the WAL it made
//! (`pg_stat_statements`, when the server loads it: `scripts/bench scale`), and the
//! plans of every statement over a short window (`auto_explain`, into the server's log).

use anyhow::{Context, ensure};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Double, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::db::DbError;
use serde_json::{Value, json};

/// Statements run fewer times than this in a phase are the bench's own (its seeding, its
/// waits, its reports), not the stack's.
const MIN_CALLS: i64 = 100;

#[derive(Debug, Clone, QueryableByName)]
pub struct Statement {
    #[diesel(sql_type = BigInt)]
    pub queryid: i64,
    #[diesel(sql_type = BigInt)]
    pub calls: i64,
    #[diesel(sql_type = Double)]
    pub mean_ms: f64,
    #[diesel(sql_type = Double)]
    pub total_ms: f64,
    /// Rows returned or changed: a batch statement's mean per call grows with its batch,
    /// its mean per row does not.
    #[diesel(sql_type = BigInt)]
    pub rows: i64,
    /// Blocks read from outside shared buffers (the OS cache or the disk).
    #[diesel(sql_type = BigInt)]
    pub blocks_read: i64,
    #[diesel(sql_type = BigInt)]
    pub blocks_dirtied: i64,
    /// Blocks the statement's own backend wrote out to make room (not the checkpointer's).
    #[diesel(sql_type = BigInt)]
    pub blocks_written: i64,
    /// Full-page images: a page's first change after a checkpoint writes it whole.
    #[diesel(sql_type = BigInt)]
    pub wal_fpi: i64,
    #[diesel(sql_type = BigInt)]
    pub wal_bytes: i64,
    #[diesel(sql_type = Text)]
    pub query: String,
}

impl Statement {
    /// A counter per row changed or returned (per call for a statement of fewer rows than
    /// calls).
    pub fn per_row(&self, counter: f64) -> f64 {
        counter / self.rows.max(self.calls).max(1) as f64
    }

    /// A counter per call.
    pub fn per_call(&self, counter: i64) -> f64 {
        counter as f64 / self.calls.max(1) as f64
    }
}

#[derive(QueryableByName)]
struct Available {
    #[diesel(sql_type = Bool)]
    available: bool,
}

/// Whether this database has the `pg_stat_statements` view (and its server the library).
pub async fn available(conn: &mut AsyncPgConnection) -> Result<bool, DbError> {
    Ok(diesel::sql_query(
        "SELECT to_regclass('pg_stat_statements') IS NOT NULL \
                AND current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%' \
                AS available",
    )
    .get_result::<Available>(conn)
    .await?
    .available)
}

/// Forgets what was counted: the next snapshot holds one phase.
pub async fn reset(conn: &mut AsyncPgConnection) -> Result<(), DbError> {
    diesel::sql_query("SELECT pg_stat_statements_reset()")
        .execute(conn)
        .await?;
    Ok(())
}

/// The statements of this database run at least [`MIN_CALLS`] times since the last reset,
/// by total execution time.
pub async fn snapshot(conn: &mut AsyncPgConnection) -> Result<Vec<Statement>, DbError> {
    Ok(diesel::sql_query(
        "SELECT queryid, calls, mean_exec_time AS mean_ms, total_exec_time AS total_ms, rows, \
                shared_blks_read AS blocks_read, shared_blks_dirtied AS blocks_dirtied, \
                shared_blks_written AS blocks_written, wal_fpi, wal_bytes::bigint AS wal_bytes, \
                left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query \
         FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND calls >= $1 \
         ORDER BY total_exec_time DESC LIMIT 30",
    )
    .bind::<BigInt, _>(MIN_CALLS)
    .load(conn)
    .await?)
}

pub fn to_json(statements: &[Statement]) -> Value {
    Value::Array(
        statements
            .iter()
            .map(|statement| {
                json!({
                    "queryid": statement.queryid,
                    "calls": statement.calls,
                    "mean_ms": statement.mean_ms,
                    "total_ms": statement.total_ms,
                    "rows": statement.rows,
                    "blocks_read": statement.blocks_read,
                    "blocks_dirtied": statement.blocks_dirtied,
                    "blocks_written": statement.blocks_written,
                    "wal_fpi": statement.wal_fpi,
                    "wal_bytes": statement.wal_bytes,
                    "query": statement.query,
                })
            })
            .collect(),
    )
}

/// Sets every session of the server to log the plan of each statement it runs, with its
/// row counts, timings and buffers (`on`), or back to logging none (`off`). The library
/// must be loaded by the server (`scripts/bench scale` starts it so); the settings reach
/// every session at its next statement (`pg_reload_conf`).
pub async fn log_plans(conn: &mut AsyncPgConnection, on: bool) -> anyhow::Result<()> {
    #[derive(QueryableByName)]
    struct Loaded {
        #[diesel(sql_type = Bool)]
        loaded: bool,
    }
    let loaded = diesel::sql_query(
        "SELECT current_setting('shared_preload_libraries') LIKE '%auto_explain%' AS loaded",
    )
    .get_result::<Loaded>(conn)
    .await?
    .loaded;
    ensure!(
        loaded,
        "--plans-seconds needs a server that loads auto_explain (scripts/bench scale starts one)"
    );
    let settings: &[&str] = if on {
        &[
            "ALTER SYSTEM SET auto_explain.log_min_duration = 0",
            "ALTER SYSTEM SET auto_explain.log_analyze = on",
            "ALTER SYSTEM SET auto_explain.log_buffers = on",
            "ALTER SYSTEM SET auto_explain.log_format = 'text'",
        ]
    } else {
        &[
            "ALTER SYSTEM RESET auto_explain.log_min_duration",
            "ALTER SYSTEM RESET auto_explain.log_analyze",
            "ALTER SYSTEM RESET auto_explain.log_buffers",
            "ALTER SYSTEM RESET auto_explain.log_format",
        ]
    };
    for setting in settings {
        diesel::sql_query(*setting)
            .execute(conn)
            .await
            .with_context(|| format!("failed to run {setting}"))?;
    }
    diesel::sql_query("SELECT pg_reload_conf()")
        .execute(conn)
        .await?;
    Ok(())
}
