//! What the fleet's database says about the documents of its tenant.

use diesel::QueryableByName;
use diesel::sql_types::{Int4, Int8, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use quire_shared::storage::ObjectStore;
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
}

/// The jobs RUNNING under `worker_id`.
pub async fn running_on(pool: &PgPool, worker_id: &str) -> Vec<Held> {
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query("SELECT id FROM processing_jobs WHERE status = 'RUNNING' AND worker_id = $1")
        .bind::<Text, _>(worker_id)
        .load(&mut conn)
        .await
        .expect("running jobs")
}

/// Per document: its status, its analyze jobs, how many succeeded, and how many assets
/// its current version has (a thumbnail and a text).
#[derive(QueryableByName)]
struct PerDocument {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Int8)]
    jobs: i64,
    #[diesel(sql_type = Int8)]
    succeeded: i64,
    #[diesel(sql_type = Int8)]
    assets: i64,
}

/// The tenant's documents that are not READY with exactly one analyze job, succeeded,
/// and one thumbnail and one text, described: empty when every document ended READY
/// exactly once.
pub async fn not_ready_once(pool: &PgPool, tenant_id: Uuid) -> Vec<String> {
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
    .load::<PerDocument>(&mut conn)
    .await
    .expect("documents not ready once")
    .into_iter()
    .map(|d| {
        format!(
            "{}: {}, {} analyze jobs, {} succeeded, {} assets",
            d.id, d.status, d.jobs, d.succeeded, d.assets
        )
    })
    .collect()
}

#[derive(QueryableByName)]
struct Named {
    #[diesel(sql_type = Text)]
    key: String,
    #[diesel(sql_type = Int8)]
    size: i64,
}

#[derive(QueryableByName)]
struct Run {
    #[diesel(sql_type = Int4)]
    attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Nullable<SqlUuid>)]
    last_task_id: Option<Uuid>,
}

/// What the store holds against what the rows name.
#[derive(Debug, Default)]
pub struct Halves {
    /// Keys a row names whose object is missing or of another size: must never happen.
    pub rows_without_objects: Vec<String>,
    /// Uploaded bytes no version names (an upload that failed and could not delete what
    /// it stored, storage being gone): storage GC's to collect.
    pub unnamed_sources: Vec<String>,
    /// Assets of a run that lost its job (a later attempt or claim made its own): GC's.
    pub superseded_assets: Vec<String>,
    /// Objects no row names that are neither: must never happen.
    pub unexplained: Vec<String>,
}

/// Pages through every object of `store` and sets it against the version and asset
/// rows of the database.
pub async fn halves(pool: &PgPool, store: &dyn ObjectStore) -> Halves {
    let mut conn = pool.get().await.expect("connection");
    let named: Vec<Named> = diesel::sql_query(
        "SELECT storage_key AS key, size_bytes AS size FROM document_versions \
         UNION ALL SELECT storage_key, size_bytes FROM assets",
    )
    .load(&mut conn)
    .await
    .expect("named keys");
    let mut objects = std::collections::BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .list_after(after.as_deref(), 500)
            .await
            .expect("list the store");
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        objects.extend(
            page.into_iter()
                .map(|object| (object.key, object.size_bytes)),
        );
    }
    let mut halves = Halves::default();
    for row in &named {
        if objects.remove(&row.key) != Some(row.size as u64) {
            halves.rows_without_objects.push(row.key.clone());
        }
    }
    for key in objects.into_keys() {
        if key.contains("/sources/") {
            halves.unnamed_sources.push(key);
        } else if superseded(&mut conn, &key).await {
            halves.superseded_assets.push(key);
        } else {
            halves.unexplained.push(key);
        }
    }
    halves
}

/// Whether `key` is an asset written by a run of a job other than the job's last run
/// (`…/{kind}-{job}-{attempt}-{task}`, DESIGN's per-run keys).
async fn superseded(conn: &mut diesel_async::AsyncPgConnection, key: &str) -> bool {
    let Some(name) = key.rsplit('/').next() else {
        return false;
    };
    let parts: Vec<&str> = name.split('-').collect();
    let [_kind, job, attempt, task] = parts[..] else {
        return false;
    };
    let (Ok(job), Ok(attempt), Ok(task)) = (
        Uuid::parse_str(job),
        attempt.parse::<i32>(),
        Uuid::parse_str(task),
    ) else {
        return false;
    };
    let run: Option<Run> =
        diesel::sql_query("SELECT attempts, last_task_id FROM processing_jobs WHERE id = $1")
            .bind::<SqlUuid, _>(job)
            .get_result(conn)
            .await
            .ok();
    run.is_some_and(|run| run.attempts != attempt || run.last_task_id != Some(task))
}
