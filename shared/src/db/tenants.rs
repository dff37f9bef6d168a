//! Tenant rows.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::tenants;
use crate::states::TenantStatus;

#[derive(Debug, Clone, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = tenants, check_for_backend(diesel::pg::Pg))]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub status: TenantStatus,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// How many times the tenant was marked for deletion or reset (see [`TenantWrite`]).
    pub generation: i64,
    /// Its weight in the dispatcher's fair share (1 to 1000, default 1).
    pub share_weight: i32,
    /// Its cap on concurrently running jobs; `None`: `scheduling.max_running_per_tenant`.
    pub max_running_jobs: Option<i32>,
    /// Since when its processing is paused (its queued jobs held); `None`: not paused.
    pub processing_paused_at: Option<OffsetDateTime>,
    /// Its enqueue rate on the API (jobs per second); `None`: `enqueue_limit.per_second`.
    pub enqueue_rate_per_second: Option<i32>,
    /// Jobs it may enqueue at once; `None`: `enqueue_limit.burst`.
    pub enqueue_burst: Option<i32>,
}

/// A change of a tenant's limits: `None` leaves a limit as it is; `Some(None)` gives a
/// nullable limit back to the configuration's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitsChange {
    pub share_weight: Option<i32>,
    pub max_running_jobs: Option<Option<i32>>,
    pub enqueue_rate_per_second: Option<Option<i32>>,
    pub enqueue_burst: Option<Option<i32>>,
}

impl LimitsChange {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The tenant a write is for, as its caller was let in. A write lands only while the
/// tenant is in the state the write needs and, when the caller was let in by a tenant
/// state it saw (the API's middleware), still in that generation: a reset or deletion
/// marked the tenant `deleting` (a new generation) since, so the wipe may have run
/// already, and the write must not outlive it — even if the tenant is active again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantWrite {
    pub tenant_id: Uuid,
    /// The generation the caller saw; `None` for an operator's action, which is taken
    /// against the tenant as it is when it commits.
    pub generation: Option<i64>,
}

impl TenantWrite {
    /// THE rule of a write to a tenant's data, given the tenant row as locked in the
    /// write's own transaction. (`intake::record` says the same in SQL.)
    pub fn admits(&self, status: TenantStatus, generation: i64, required: TenantStatus) -> bool {
        status == required && self.generation.is_none_or(|seen| seen == generation)
    }
}

/// A write its tenant does not take now: the tenant's state then (`None`: it is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tenant does not take this write now")]
pub struct Refused(pub Option<TenantStatus>);

/// How long and how hard a write holds its tenant's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantLock {
    /// `FOR SHARE`: writers run side by side; a change of the tenant's state (an
    /// `UPDATE`) waits until they commit, and they wait for it and see its result.
    Share,
    /// `FOR UPDATE`: one at a time (member changes, which count owners).
    Update,
}

/// The tenant's state and generation, its row locked until the transaction ends. Call
/// inside the transaction of the write; `None` when the tenant does not exist.
pub async fn lock_for_write(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    lock: TenantLock,
) -> Result<Option<(TenantStatus, i64)>, DbError> {
    let query = tenants::table
        .find(id)
        .select((tenants::status, tenants::generation));
    let row = match lock {
        TenantLock::Share => query.for_share().first(conn).await,
        TenantLock::Update => query.for_update().first(conn).await,
    };
    Ok(row.optional()?)
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
/// (or does not exist): someone else moved it first. Marking it `deleting` starts a new
/// generation. The `UPDATE` waits for every write holding the row (`lock_for_write`),
/// and every write after it sees the new state.
pub async fn transition(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    from: &[TenantStatus],
    to: TenantStatus,
) -> Result<Option<Tenant>, DbError> {
    let next_generation = i64::from(to == TenantStatus::Deleting);
    Ok(
        diesel::update(tenants::table.find(id).filter(tenants::status.eq_any(from)))
            .set((
                tenants::status.eq(to),
                tenants::updated_at.eq(diesel::dsl::now),
                tenants::generation.eq(tenants::generation + next_generation),
            ))
            .returning(Tenant::as_returning())
            .get_result(conn)
            .await
            .optional()?,
    )
}

/// Sets the limits `change` names, in one statement; `None` when the tenant does not
/// exist. The columns' CHECK constraints bound every value (the action checks first, to
/// answer clearly).
pub async fn set_limits(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    change: &LimitsChange,
) -> Result<Option<Tenant>, DbError> {
    use diesel::sql_types::{Bool, Int4, Nullable};
    let named = |limit: Option<Option<i32>>| (limit.is_some(), limit.flatten());
    let (set_running, running) = named(change.max_running_jobs);
    let (set_rate, rate) = named(change.enqueue_rate_per_second);
    let (set_burst, burst) = named(change.enqueue_burst);
    // A nullable limit is written only when named: CASE keeps the others as they are.
    Ok(diesel::sql_query(
        "UPDATE tenants SET share_weight = COALESCE($2, share_weight), \
             max_running_jobs = CASE WHEN $3 THEN $4 ELSE max_running_jobs END, \
             enqueue_rate_per_second = CASE WHEN $5 THEN $6 ELSE enqueue_rate_per_second END, \
             enqueue_burst = CASE WHEN $7 THEN $8 ELSE enqueue_burst END, \
             updated_at = now() \
         WHERE id = $1 \
         RETURNING id, name, status, created_at, updated_at, generation, share_weight, \
             max_running_jobs, processing_paused_at, enqueue_rate_per_second, enqueue_burst",
    )
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Nullable<Int4>, _>(change.share_weight)
    .bind::<Bool, _>(set_running)
    .bind::<Nullable<Int4>, _>(running)
    .bind::<Bool, _>(set_rate)
    .bind::<Nullable<Int4>, _>(rate)
    .bind::<Bool, _>(set_burst)
    .bind::<Nullable<Int4>, _>(burst)
    .get_result::<Tenant>(conn)
    .await
    .optional()?)
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
