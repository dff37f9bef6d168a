//! Single-use nonces of signed administrative payloads.

use diesel::prelude::*;
use diesel::sql_types::{Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::schema::used_nonces;

/// Binds `nonce` to `job_id`. True when the nonce is now bound to this job — newly, or
/// already by an earlier attempt of the same job (a retry after a crash); false when
/// another job used it (a replay).
pub async fn consume(
    conn: &mut AsyncPgConnection,
    nonce: &str,
    purpose: &str,
    tenant_id: Uuid,
    job_id: Uuid,
) -> Result<bool, DbError> {
    diesel::sql_query(
        "INSERT INTO used_nonces (nonce, purpose, tenant_id, job_id) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (nonce) DO NOTHING",
    )
    .bind::<Text, _>(nonce)
    .bind::<Text, _>(purpose)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(job_id)
    .execute(conn)
    .await?;
    let owner: Uuid = used_nonces::table
        .find(nonce)
        .select(used_nonces::job_id)
        .first(conn)
        .await?;
    Ok(owner == job_id)
}
