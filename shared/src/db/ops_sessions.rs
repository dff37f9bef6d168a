//! Dashboard sessions (`ops_sessions`): rows found by the SHA-256 of the cookie's secret,
//! alive while `expires_at` is in the future on the database clock.

use diesel::prelude::*;
use diesel::sql_types::{Bytea, Int8, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::ops_sessions;

/// A session as operators see it (never its secret, which is not stored).
#[derive(Debug, Clone, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = ops_sessions, check_for_backend(diesel::pg::Pg))]
pub struct SessionRow {
    pub id: Uuid,
    pub operator: String,
    pub token_id: Option<String>,
    pub token_expires_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// What a new session records of the token that opens it.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub secret_sha256: &'a [u8],
    pub operator: &'a str,
    pub token_id: Option<&'a str>,
    pub token_expires_at: OffsetDateTime,
    /// The longest a session lives, however long its token does.
    pub lifetime_seconds: i64,
}

/// Inserts a session that ends at its token's expiry or after its lifetime, whichever
/// comes first; `None` (nothing inserted) when that moment has passed already.
pub async fn insert(
    conn: &mut AsyncPgConnection,
    session: &NewSession<'_>,
) -> Result<Option<SessionRow>, DbError> {
    Ok(diesel::sql_query(
        "INSERT INTO ops_sessions \
             (id, secret_sha256, operator, token_id, token_expires_at, expires_at) \
         SELECT $1, $2, $3, $4, $5, least($5, now() + $6 * interval '1 second') \
         WHERE least($5, now() + $6 * interval '1 second') > now() \
         RETURNING id, operator, token_id, token_expires_at, created_at, expires_at",
    )
    .bind::<SqlUuid, _>(Uuid::now_v7())
    .bind::<Bytea, _>(session.secret_sha256)
    .bind::<Text, _>(session.operator)
    .bind::<Nullable<Text>, _>(session.token_id)
    .bind::<Timestamptz, _>(session.token_expires_at)
    .bind::<Int8, _>(session.lifetime_seconds)
    .get_result::<SessionRow>(conn)
    .await
    .optional()?)
}

/// The live session whose secret hashes to `secret_sha256`.
pub async fn find_live(
    conn: &mut AsyncPgConnection,
    secret_sha256: &[u8],
) -> Result<Option<SessionRow>, DbError> {
    Ok(ops_sessions::table
        .filter(ops_sessions::secret_sha256.eq(secret_sha256))
        .filter(ops_sessions::expires_at.gt(diesel::dsl::now))
        .select(SessionRow::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// Live sessions, oldest first.
pub async fn list_live(conn: &mut AsyncPgConnection) -> Result<Vec<SessionRow>, DbError> {
    Ok(ops_sessions::table
        .filter(ops_sessions::expires_at.gt(diesel::dsl::now))
        .order((ops_sessions::created_at.asc(), ops_sessions::id.asc()))
        .select(SessionRow::as_select())
        .load(conn)
        .await?)
}

/// Deletes the session whose secret hashes to `secret_sha256` (a logout); whether one
/// was live.
pub async fn delete_by_secret(
    conn: &mut AsyncPgConnection,
    secret_sha256: &[u8],
) -> Result<bool, DbError> {
    let deleted =
        diesel::delete(ops_sessions::table.filter(ops_sessions::secret_sha256.eq(secret_sha256)))
            .execute(conn)
            .await?;
    Ok(deleted > 0)
}

/// Deletes one session by its id; sessions deleted (0 or 1).
pub async fn delete_by_id(conn: &mut AsyncPgConnection, id: Uuid) -> Result<usize, DbError> {
    Ok(diesel::delete(ops_sessions::table.find(id))
        .execute(conn)
        .await?)
}

/// Deletes every session of `operator`; how many.
pub async fn delete_by_operator(
    conn: &mut AsyncPgConnection,
    operator: &str,
) -> Result<usize, DbError> {
    Ok(
        diesel::delete(ops_sessions::table.filter(ops_sessions::operator.eq(operator)))
            .execute(conn)
            .await?,
    )
}

/// Deletes every session; how many.
pub async fn delete_all(conn: &mut AsyncPgConnection) -> Result<usize, DbError> {
    Ok(diesel::delete(ops_sessions::table).execute(conn).await?)
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// Deletes at most `batch` expired sessions (retention); how many.
pub async fn prune_expired(conn: &mut AsyncPgConnection, batch: i64) -> Result<usize, DbError> {
    let count = diesel::sql_query(
        "WITH doomed AS (SELECT id FROM ops_sessions WHERE expires_at <= now() LIMIT $1), \
         gone AS (DELETE FROM ops_sessions WHERE id IN (SELECT id FROM doomed) RETURNING id) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<Int8, _>(batch)
    .get_result::<Count>(conn)
    .await?
    .count;
    Ok(usize::try_from(count).unwrap_or(0))
}
