//! Idempotency keys (`idempotency_keys`): a request's key and the digest of the request,
//! claimed by the request's own transaction before it writes anything, and completed
//! with its answer before it commits. Nobody else ever sees a row without its answer.

use diesel::prelude::*;
use diesel::sql_types::{Bytea, Int2, Int8, Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;

/// Whose keys these are: a tenant's members share one namespace, each operator has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Tenant(Uuid),
    Operator(String),
}

impl Scope {
    fn as_text(&self) -> String {
        match self {
            Self::Tenant(tenant_id) => format!("tenant:{tenant_id}"),
            Self::Operator(name) => format!("operator:{name}"),
        }
    }

    fn tenant_id(&self) -> Option<Uuid> {
        match self {
            Self::Tenant(tenant_id) => Some(*tenant_id),
            Self::Operator(_) => None,
        }
    }
}

/// A key as a request claims it.
#[derive(Debug, Clone)]
pub struct NewKey<'a> {
    pub scope: &'a Scope,
    pub key: &'a str,
    pub request_digest: &'a [u8],
    /// How long the answer is kept (`server.idempotency_ttl_seconds`).
    pub ttl_seconds: i64,
}

/// A committed key: the request it was first used for, and that request's answer.
#[derive(Debug, Clone, QueryableByName)]
pub struct StoredKey {
    #[diesel(sql_type = Bytea)]
    pub request_digest: Vec<u8>,
    #[diesel(sql_type = Nullable<Int2>)]
    pub status: Option<i16>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub headers: Option<serde_json::Value>,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub body: Option<Vec<u8>>,
}

/// What a claim found.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The key is this transaction's now (new, or taken over from an expired answer).
    Claimed,
    /// Another request committed the key first, within its lifetime.
    Taken(StoredKey),
}

#[derive(QueryableByName)]
struct Claimed {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    claimed: bool,
}

/// Claims the key for this transaction, or answers the committed key another request
/// holds. The INSERT waits while another transaction holds an uncommitted row of the same
/// key (the primary key's uniqueness check), so a concurrent duplicate returns only once
/// the first committed (`Taken`, with its answer) or rolled back (`Claimed`). An expired
/// row (not pruned yet) is taken over in the same statement.
pub async fn claim(conn: &mut AsyncPgConnection, new: &NewKey<'_>) -> Result<Claim, DbError> {
    let scope = new.scope.as_text();
    // A row can vanish between the INSERT that saw it and the read (pruned, or its
    // owner's wipe): then the claim is tried again.
    for _ in 0..3 {
        let claimed = diesel::sql_query(
            "INSERT INTO idempotency_keys (scope, key, tenant_id, request_digest, expires_at) \
             VALUES ($1, $2, $3, $4, now() + $5 * interval '1 second') \
             ON CONFLICT (scope, key) DO UPDATE SET \
                 tenant_id = EXCLUDED.tenant_id, request_digest = EXCLUDED.request_digest, \
                 status = NULL, headers = NULL, body = NULL, created_at = now(), \
                 expires_at = EXCLUDED.expires_at \
             WHERE idempotency_keys.expires_at <= now() \
             RETURNING true AS claimed",
        )
        .bind::<Text, _>(&scope)
        .bind::<Text, _>(new.key)
        .bind::<Nullable<SqlUuid>, _>(new.scope.tenant_id())
        .bind::<Bytea, _>(new.request_digest)
        .bind::<Int8, _>(new.ttl_seconds)
        .get_result::<Claimed>(conn)
        .await
        .optional()?;
        if claimed.is_some_and(|row| row.claimed) {
            return Ok(Claim::Claimed);
        }
        let stored = diesel::sql_query(
            "SELECT request_digest, status, headers, body FROM idempotency_keys \
             WHERE scope = $1 AND key = $2",
        )
        .bind::<Text, _>(&scope)
        .bind::<Text, _>(new.key)
        .get_result::<StoredKey>(conn)
        .await
        .optional()?;
        if let Some(stored) = stored {
            return Ok(Claim::Taken(stored));
        }
    }
    Err(DbError::Query(diesel::result::Error::NotFound))
}

/// Records the answer of the key this transaction claimed.
pub async fn complete(
    conn: &mut AsyncPgConnection,
    scope: &Scope,
    key: &str,
    status: i16,
    headers: serde_json::Value,
    body: &[u8],
) -> Result<(), DbError> {
    diesel::sql_query(
        "UPDATE idempotency_keys SET status = $3, headers = $4, body = $5 \
         WHERE scope = $1 AND key = $2",
    )
    .bind::<Text, _>(scope.as_text())
    .bind::<Text, _>(key)
    .bind::<Int2, _>(status)
    .bind::<Jsonb, _>(headers)
    .bind::<Bytea, _>(body)
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// Deletes up to `batch` expired keys (retention; an expired key is taken over by its
/// next use anyway, this only frees rows).
pub async fn prune_expired(conn: &mut AsyncPgConnection, batch: i64) -> Result<usize, DbError> {
    let count = diesel::sql_query(
        "WITH doomed AS ( \
             SELECT scope, key FROM idempotency_keys WHERE expires_at <= now() \
             LIMIT $1 FOR UPDATE SKIP LOCKED), \
         gone AS (DELETE FROM idempotency_keys AS k USING doomed \
                  WHERE k.scope = doomed.scope AND k.key = doomed.key RETURNING k.key) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<Int8, _>(batch)
    .get_result::<Count>(conn)
    .await?
    .count;
    Ok(usize::try_from(count).unwrap_or(0))
}
