//! Tenant rows.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::tenants;
use crate::states::TenantStatus;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = tenants, check_for_backend(diesel::pg::Pg))]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub status: TenantStatus,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Inserts a tenant; a taken name is a unique violation.
pub async fn create_tenant(
    conn: &mut AsyncPgConnection,
    name: &str,
    status: TenantStatus,
) -> Result<Tenant, DbError> {
    Ok(diesel::insert_into(tenants::table)
        .values((
            tenants::id.eq(Uuid::now_v7()),
            tenants::name.eq(name),
            tenants::status.eq(status),
        ))
        .returning(Tenant::as_returning())
        .get_result(conn)
        .await?)
}

/// The tenant with this id, if any.
pub async fn find_tenant(
    conn: &mut AsyncPgConnection,
    id: Uuid,
) -> Result<Option<Tenant>, DbError> {
    Ok(tenants::table
        .find(id)
        .select(Tenant::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// The tenant with this name, if any.
pub async fn find_tenant_by_name(
    conn: &mut AsyncPgConnection,
    name: &str,
) -> Result<Option<Tenant>, DbError> {
    Ok(tenants::table
        .filter(tenants::name.eq(name))
        .select(Tenant::as_select())
        .first(conn)
        .await
        .optional()?)
}
