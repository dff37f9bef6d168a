//! A tenant's own date reading, two columns of its row: the languages month names are
//! read in and the date order, each `NULL` for the configuration's default. Stored as
//! the codes (`de`, `dmy`); `actions::settings` checks and types them.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::schema::tenants;

#[derive(Debug, Clone, Default, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = tenants, check_for_backend(diesel::pg::Pg))]
pub struct TenantDates {
    pub date_languages: Option<Vec<String>>,
    pub date_order: Option<String>,
}

/// A change: `None` leaves a column as it is, `Some(None)` gives it back to the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, AsChangeset)]
#[diesel(table_name = tenants)]
pub struct DatesChange {
    pub date_languages: Option<Option<Vec<String>>>,
    pub date_order: Option<Option<String>>,
}

impl DatesChange {
    pub fn is_empty(&self) -> bool {
        self.date_languages.is_none() && self.date_order.is_none()
    }
}

/// The tenant's own date reading; `None` when the tenant does not exist.
pub async fn find(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Option<TenantDates>, DbError> {
    Ok(tenants::table
        .find(tenant_id)
        .select(TenantDates::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// Sets what `change` names (not empty), in one statement; `None` when the tenant does
/// not exist. The columns' CHECK constraints bound every value.
pub async fn set(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    change: &DatesChange,
) -> Result<Option<TenantDates>, DbError> {
    Ok(diesel::update(tenants::table.find(tenant_id))
        .set((change, tenants::updated_at.eq(diesel::dsl::now)))
        .returning(TenantDates::as_returning())
        .get_result(conn)
        .await
        .optional()?)
}
