//! A document's versions after its first (the intake writes the first, number 1): the
//! guarded statement that numbers and records a new one, and the listing.

use diesel::prelude::*;
use diesel::sql_types::{Int8, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::documents::DocumentVersion;
use super::schema::document_versions;

/// A new version's bytes, already stored under `storage_key`.
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub id: Uuid,
    pub document_id: Uuid,
    pub tenant_id: Uuid,
    pub storage_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub original_filename: Option<String>,
}

/// Gives a live document of this tenant its next version number and records the version
/// `PENDING` under it, in ONE statement. The number comes from a guarded `UPDATE` of the
/// document row (`last_version_number + 1 … WHERE trashed_at IS NULL`): concurrent
/// uploads to one document queue on that row and each reads the number the one before it
/// committed, so every version gets its own. The document's current version, status and
/// search text are untouched: the version becomes current with its analysis's success.
/// `None`: no live document (missing, or trashed by the time the row was ours).
pub async fn record(
    conn: &mut AsyncPgConnection,
    new: &NewVersion,
) -> Result<Option<DocumentVersion>, DbError> {
    Ok(diesel::sql_query(
        "WITH bumped AS ( \
             UPDATE documents SET last_version_number = last_version_number + 1 \
             WHERE id = $1 AND tenant_id = $2 AND trashed_at IS NULL \
             RETURNING id, tenant_id, last_version_number) \
         INSERT INTO document_versions (id, document_id, tenant_id, storage_key, size_bytes, \
             sha256, content_type, original_filename, number, status) \
         SELECT $3, id, tenant_id, $4, $5, $6, $7, $8, last_version_number, 'PENDING' \
         FROM bumped \
         RETURNING id, document_id, tenant_id, storage_key, size_bytes, sha256, content_type, \
             original_filename, created_at, number, status, processing_error",
    )
    .bind::<SqlUuid, _>(new.document_id)
    .bind::<SqlUuid, _>(new.tenant_id)
    .bind::<SqlUuid, _>(new.id)
    .bind::<Text, _>(&new.storage_key)
    .bind::<Int8, _>(new.size_bytes)
    .bind::<Text, _>(&new.sha256)
    .bind::<Text, _>(&new.content_type)
    .bind::<Nullable<Text>, _>(new.original_filename.as_deref())
    .get_result::<DocumentVersion>(conn)
    .await
    .optional()?)
}

/// Most versions one listing page holds.
pub const MAX_PAGE: i64 = 100;

/// One page of a document's versions, newest (highest number) first, numbered below
/// `before` when given. The caller checked the document is the tenant's.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    before: Option<i32>,
    limit: i64,
) -> Result<Vec<DocumentVersion>, DbError> {
    let mut query = document_versions::table
        .filter(document_versions::tenant_id.eq(tenant_id))
        .filter(document_versions::document_id.eq(document_id))
        .into_boxed();
    if let Some(before) = before {
        query = query.filter(document_versions::number.lt(before));
    }
    Ok(query
        .order(document_versions::number.desc())
        .limit(limit.clamp(1, MAX_PAGE))
        .select(DocumentVersion::as_select())
        .load(conn)
        .await?)
}
