//! Assets of a document version: its thumbnail and its extracted text. Keyed by version
//! and kind, so a re-run of the pipeline replaces a row instead of adding one.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::assets;
use crate::states::text_state;

text_state!(
    /// What an asset is.
    AssetKind {
        Thumbnail => "thumbnail",
        Text => "text",
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

/// Inserts the asset, or updates the one of the same version and kind.
pub async fn upsert(conn: &mut AsyncPgConnection, asset: &NewAsset<'_>) -> Result<(), DbError> {
    diesel::insert_into(assets::table)
        .values((
            assets::id.eq(Uuid::now_v7()),
            assets::tenant_id.eq(asset.tenant_id),
            assets::document_id.eq(asset.document_id),
            assets::version_id.eq(asset.version_id),
            assets::kind.eq(asset.kind),
            assets::storage_key.eq(asset.storage_key),
            assets::size_bytes.eq(asset.size_bytes),
            assets::sha256.eq(asset.sha256),
            assets::content_type.eq(asset.content_type),
        ))
        .on_conflict((assets::version_id, assets::kind))
        .do_update()
        .set((
            assets::storage_key.eq(asset.storage_key),
            assets::size_bytes.eq(asset.size_bytes),
            assets::sha256.eq(asset.sha256),
            assets::content_type.eq(asset.content_type),
            assets::updated_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await?;
    Ok(())
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
