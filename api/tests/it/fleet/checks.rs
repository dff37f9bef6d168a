//! What the fleet's database says about the documents of its tenant.

use diesel::QueryableByName;
use diesel::sql_types::{Array, Int4, Int8, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use uuid::Uuid;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// How many of the tenant's documents are READY.
pub async fn ready(pool: &PgPool, tenant_id: Uuid) -> i64 {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT count(*) AS count FROM documents WHERE tenant_id = $1 AND status = 'READY'",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .get_result::<Count>(&mut conn)
    .await
    .expect("count ready documents")
    .count
}

/// How many documents the tenant has.
pub async fn documents(pool: &PgPool, tenant_id: Uuid) -> i64 {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query("SELECT count(*) AS count FROM documents WHERE tenant_id = $1")
        .bind::<SqlUuid, _>(tenant_id)
        .get_result::<Count>(&mut conn)
        .await
        .expect("count documents")
        .count
}

#[derive(QueryableByName, Debug, Clone, Copy)]
pub struct Held {
    #[diesel(sql_type = SqlUuid)]
    pub id: Uuid,
    #[diesel(sql_type = Int4)]
    pub attempts: i32,
}

/// The jobs RUNNING under `worker_id`, with their attempt.
pub async fn running_on(pool: &PgPool, worker_id: &str) -> Vec<Held> {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT id, attempts FROM processing_jobs WHERE status = 'RUNNING' AND worker_id = $1",
    )
    .bind::<Text, _>(worker_id)
    .load(&mut conn)
    .await
    .expect("running jobs")
}

/// The attempt each of `ids` is at now.
pub async fn attempts(pool: &PgPool, ids: &[Uuid]) -> Vec<Held> {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query("SELECT id, attempts FROM processing_jobs WHERE id = ANY($1)")
        .bind::<Array<SqlUuid>, _>(ids)
        .load(&mut conn)
        .await
        .expect("job attempts")
}

/// Per document, whatever is not "READY once": its status, its analyze jobs, how many
/// succeeded, and how many assets its current version has (a thumbnail and a text).
#[derive(QueryableByName, Debug)]
pub struct NotOnce {
    #[diesel(sql_type = SqlUuid)]
    pub id: Uuid,
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = Int8)]
    pub jobs: i64,
    #[diesel(sql_type = Int8)]
    pub succeeded: i64,
    #[diesel(sql_type = Int8)]
    pub assets: i64,
}

/// The tenant's documents that are not READY with exactly one analyze job, succeeded,
/// and one thumbnail and one text: empty when every document ended READY exactly once.
pub async fn not_ready_once(pool: &PgPool, tenant_id: Uuid) -> Vec<NotOnce> {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT * FROM ( \
           SELECT d.id, d.status, \
             (SELECT count(*) FROM processing_jobs j \
               WHERE j.document_id = d.id AND j.job_type = 'analyze-document') AS jobs, \
             (SELECT count(*) FROM processing_jobs j WHERE j.document_id = d.id \
               AND j.job_type = 'analyze-document' AND j.status = 'SUCCEEDED') AS succeeded, \
             (SELECT count(*) FROM assets a WHERE a.version_id = d.current_version_id) AS assets \
           FROM documents d WHERE d.tenant_id = $1 \
         ) per_document \
         WHERE status <> 'READY' OR jobs <> 1 OR succeeded <> 1 OR assets <> 2",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .load(&mut conn)
    .await
    .expect("documents not ready once")
}
