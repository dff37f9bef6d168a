//! The tenant's search index record (see the migration `tenancy`): ensured by
//! provision-tenant and by a reset, dropped by delete-tenant.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::schema::search_indexes;

/// Creates the tenant's index unless it exists (idempotent).
pub async fn ensure(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    language: &str,
) -> Result<(), DbError> {
    diesel::insert_into(search_indexes::table)
        .values((
            search_indexes::tenant_id.eq(tenant_id),
            search_indexes::language.eq(language),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether the tenant has an index.
pub async fn exists(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<bool, DbError> {
    Ok(
        diesel::select(diesel::dsl::exists(search_indexes::table.find(tenant_id)))
            .get_result(conn)
            .await?,
    )
}

/// Drops the tenant's index (idempotent).
pub async fn drop(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<(), DbError> {
    diesel::delete(search_indexes::table.find(tenant_id))
        .execute(conn)
        .await?;
    Ok(())
}
