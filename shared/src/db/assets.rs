//! Assets of a document version: its thumbnail, its extracted text and, for a scan, its
//! searchable archive copy (a PDF with a text layer). Keyed by version
//! and kind, so a re-run of the pipeline replaces a row instead of adding one. Each run
//! stores its objects under keys of its own attempt; the row names the current one.

use diesel::prelude::*;
use diesel::sql_types::{Int4, Int8, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::jobs::Fence;
use super::schema::assets;
use crate::states::text_state;

text_state!(
    /// What an asset is.
    AssetKind {
        Thumbnail => "thumbnail",
        Text => "text",
        Archive => "archive",
    }
);

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = assets, check_for_backend(diesel::pg::Pg))]
pub struct Asset {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub document_id: Uuid,
    pub version_id: Uuid,
    pub kind: AssetKind,
    pub storage_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// An asset whose object is stored already.
#[derive(Debug, Clone)]
pub struct NewAsset<'a> {
    pub tenant_id: Uuid,
    pub document_id: Uuid,
    pub version_id: Uuid,
    pub kind: AssetKind,
    pub storage_key: &'a str,
    pub size_bytes: i64,
    pub sha256: &'a str,
    pub content_type: &'a str,
}

/// What [`upsert`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upserted {
    /// The row names the new object now; `superseded` is the key it named before, if
    /// another (its object is no longer current).
    Current { superseded: Option<String> },
    /// The fence no longer held: nothing changed.
    Stale,
}

#[derive(QueryableByName)]
struct UpsertRow {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    applied: bool,
    #[diesel(sql_type = Nullable<Text>)]
    previous: Option<String>,
}

/// Makes `asset` the current one of its version and kind — inserted, or the row of the
/// same version and kind updated to name the new object — only while the analysis's
/// fence holds, in the statement itself. Returns the key the row named before.
pub async fn upsert(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    asset: &NewAsset<'_>,
) -> Result<Upserted, DbError> {
    let row = diesel::sql_query(
        "WITH previous AS ( \
             SELECT storage_key FROM assets WHERE version_id = $4 AND kind = $5), \
         upserted AS ( \
             INSERT INTO assets (id, tenant_id, document_id, version_id, kind, storage_key, \
                                 size_bytes, sha256, content_type) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 \
             WHERE EXISTS (SELECT 1 FROM processing_jobs j \
                           WHERE j.id = $10 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $11 \
                             AND j.attempts = $12 AND j.last_task_id = $13) \
             ON CONFLICT (version_id, kind) DO UPDATE \
             SET storage_key = EXCLUDED.storage_key, size_bytes = EXCLUDED.size_bytes, \
                 sha256 = EXCLUDED.sha256, content_type = EXCLUDED.content_type, \
                 updated_at = now() \
             RETURNING 1) \
         SELECT EXISTS (SELECT 1 FROM upserted) AS applied, \
                (SELECT storage_key FROM previous) AS previous",
    )
    .bind::<SqlUuid, _>(Uuid::now_v7())
    .bind::<SqlUuid, _>(asset.tenant_id)
    .bind::<SqlUuid, _>(asset.document_id)
    .bind::<SqlUuid, _>(asset.version_id)
    .bind::<Text, _>(asset.kind.as_str())
    .bind::<Text, _>(asset.storage_key)
    .bind::<Int8, _>(asset.size_bytes)
    .bind::<Text, _>(asset.sha256)
    .bind::<Text, _>(asset.content_type)
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .get_result::<UpsertRow>(conn)
    .await?;
    Ok(if row.applied {
        Upserted::Current {
            superseded: row.previous.filter(|key| key != asset.storage_key),
        }
    } else {
        Upserted::Stale
    })
}

/// The asset of this kind of a version of this tenant, if the pipeline made one.
pub async fn find(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    version_id: Uuid,
    kind: AssetKind,
) -> Result<Option<Asset>, DbError> {
    Ok(assets::table
        .filter(assets::tenant_id.eq(tenant_id))
        .filter(assets::version_id.eq(version_id))
        .filter(assets::kind.eq(kind))
        .select(Asset::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// Storage keys of every asset of a document (purge).
pub async fn document_keys(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<Vec<String>, DbError> {
    Ok(assets::table
        .filter(assets::tenant_id.eq(tenant_id))
        .filter(assets::document_id.eq(document_id))
        .select(assets::storage_key)
        .load(conn)
        .await?)
}

/// Deletes every asset row of a document (purge, after its objects).
pub async fn delete_document_assets(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<usize, DbError> {
    Ok(diesel::delete(
        assets::table
            .filter(assets::tenant_id.eq(tenant_id))
            .filter(assets::document_id.eq(document_id)),
    )
    .execute(conn)
    .await?)
}
