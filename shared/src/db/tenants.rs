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

/// Every tenant, by name.
pub async fn list_tenants(conn: &mut AsyncPgConnection) -> Result<Vec<Tenant>, DbError> {
    Ok(tenants::table
        .order(tenants::name.asc())
        .select(Tenant::as_select())
        .load(conn)
        .await?)
}

/// `from → to` in one guarded statement; `None` when the tenant is in none of `from`
/// (or does not exist): someone else moved it first.
pub async fn transition(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    from: &[TenantStatus],
    to: TenantStatus,
) -> Result<Option<Tenant>, DbError> {
    Ok(
        diesel::update(tenants::table.find(id).filter(tenants::status.eq_any(from)))
            .set((
                tenants::status.eq(to),
                tenants::updated_at.eq(diesel::dsl::now),
            ))
            .returning(Tenant::as_returning())
            .get_result(conn)
            .await
            .optional()?,
    )
}

/// Deletes the tenant row itself, only while it is `deleting` (its data must be gone:
/// foreign keys refuse otherwise).
pub async fn delete_tenant_row(conn: &mut AsyncPgConnection, id: Uuid) -> Result<bool, DbError> {
    Ok(diesel::delete(
        tenants::table
            .find(id)
            .filter(tenants::status.eq(TenantStatus::Deleting)),
    )
    .execute(conn)
    .await?
        == 1)
}

impl TenantStatus {
    /// The tenant lifecycle: `creating → active` (provisioning), `active ⇄ suspended`,
    /// `active | suspended | deleting → deleting` (a deletion request; again after a
    /// failed one), `deleting → active | suspended` (a reset or a kept tenant).
    pub fn can_transition_to(self, to: TenantStatus) -> bool {
        use TenantStatus::*;
        matches!(
            (self, to),
            (Creating, Active)
                | (Active, Suspended)
                | (Suspended, Active)
                | (Active | Suspended | Deleting, Deleting)
                | (Deleting, Active | Suspended)
        )
    }
}
