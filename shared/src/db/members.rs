//! Capability sets and members: what provision-tenant materializes, what every request's
//! permissions are resolved from, and the member routes' writes. A tenant keeps at least
//! one owner: member changes run in a transaction that holds the tenant row `FOR UPDATE`
//! (`actions::members`), so two owners cannot demote each other at once.

use diesel::prelude::*;
use diesel::sql_types::{Array, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::prepared::Prepared;
use super::schema::tenant_members;
use crate::permissions::{CapabilitySet, MemberSpec, Permission};
use crate::states::TenantStatus;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = tenant_members, check_for_backend(diesel::pg::Pg))]
pub struct Member {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub capability_set: CapabilitySet,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// What one request may do: its tenant's state and, for a member, the permissions of
/// their capability set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub tenant_status: TenantStatus,
    /// The tenant's generation: every write of the request re-checks it.
    pub tenant_generation: i64,
    /// `None`: the user is not a member of the tenant.
    pub permissions: Option<Vec<Permission>>,
}

#[derive(QueryableByName)]
struct AccessRow {
    #[diesel(sql_type = Text)]
    status: TenantStatus,
    #[diesel(sql_type = diesel::sql_types::Int8)]
    generation: i64,
    #[diesel(sql_type = Nullable<Array<Text>>)]
    permissions: Option<Vec<String>>,
}

/// The tenant's state and the user's permissions in it, in one query (prepared: every
/// authenticated request runs it). `None` when the tenant does not exist.
pub async fn resolve_access(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> Result<Option<Access>, DbError> {
    let row = diesel::sql_query(
        "SELECT t.status, t.generation, c.permissions \
         FROM tenants t \
         LEFT JOIN tenant_members m ON m.tenant_id = t.id AND m.user_id = $2 \
         LEFT JOIN capability_sets c ON c.tenant_id = m.tenant_id AND c.name = m.capability_set \
         WHERE t.id = $1",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(user_id)
    .prepared()
    .get_result::<AccessRow>(conn)
    .await
    .optional()?;
    Ok(row.map(|row| Access {
        tenant_status: row.status,
        tenant_generation: row.generation,
        permissions: row.permissions.map(|names| {
            names
                .iter()
                .filter_map(|name| Permission::parse(name))
                .collect()
        }),
    }))
}

/// Creates the tenant's capability sets and attaches `members` (first bare member
/// `owner`, the rest `user`, unless given). Inserts only what is missing: running it
/// again changes nothing.
pub async fn materialize(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    members: &[MemberSpec],
) -> Result<(), DbError> {
    for &set in CapabilitySet::ALL {
        let permissions: Vec<&str> = set
            .default_permissions()
            .iter()
            .map(|permission| permission.as_str())
            .collect();
        diesel::sql_query(
            "INSERT INTO capability_sets (tenant_id, name, permissions) VALUES ($1, $2, $3) \
             ON CONFLICT (tenant_id, name) DO NOTHING",
        )
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<Text, _>(set.as_str())
        .bind::<Array<Text>, _>(permissions)
        .execute(conn)
        .await?;
    }
    for (position, member) in members.iter().enumerate() {
        diesel::sql_query(
            "INSERT INTO tenant_members (tenant_id, user_id, capability_set) VALUES ($1, $2, $3) \
             ON CONFLICT (tenant_id, user_id) DO NOTHING",
        )
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(member.user_id())
        .bind::<Text, _>(member.capability_set(position).as_str())
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// The tenant's members, oldest first.
pub async fn list_members(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Vec<Member>, DbError> {
    Ok(tenant_members::table
        .filter(tenant_members::tenant_id.eq(tenant_id))
        .order((
            tenant_members::created_at.asc(),
            tenant_members::user_id.asc(),
        ))
        .select(Member::as_select())
        .load(conn)
        .await?)
}

/// What a member change came to.
#[derive(Debug)]
pub enum MemberChange {
    Done(Member),
    /// No such member (or no such tenant).
    NotFound,
    /// The user is a member already (add).
    AlreadyMember,
    /// The change would leave the tenant without an owner.
    LastOwner,
}

async fn other_owners(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> Result<i64, DbError> {
    Ok(tenant_members::table
        .filter(tenant_members::tenant_id.eq(tenant_id))
        .filter(tenant_members::capability_set.eq(CapabilitySet::Owner))
        .filter(tenant_members::user_id.ne(user_id))
        .count()
        .get_result(conn)
        .await?)
}

async fn find_member(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> Result<Option<Member>, DbError> {
    Ok(tenant_members::table
        .find((tenant_id, user_id))
        .select(Member::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// Adds a member with a capability set. Call in a transaction that holds the tenant row.
pub async fn add_member(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    set: CapabilitySet,
) -> Result<MemberChange, DbError> {
    let inserted = diesel::insert_into(tenant_members::table)
        .values((
            tenant_members::tenant_id.eq(tenant_id),
            tenant_members::user_id.eq(user_id),
            tenant_members::capability_set.eq(set),
        ))
        .on_conflict_do_nothing()
        .returning(Member::as_returning())
        .get_result(conn)
        .await
        .optional()?;
    Ok(inserted.map_or(MemberChange::AlreadyMember, MemberChange::Done))
}

/// Moves a member to another capability set, never demoting the last owner. Call in a
/// transaction that holds the tenant row `FOR UPDATE`.
pub async fn change_member_set(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    set: CapabilitySet,
) -> Result<MemberChange, DbError> {
    let Some(member) = find_member(conn, tenant_id, user_id).await? else {
        return Ok(MemberChange::NotFound);
    };
    if member.capability_set == CapabilitySet::Owner
        && set != CapabilitySet::Owner
        && other_owners(conn, tenant_id, user_id).await? == 0
    {
        return Ok(MemberChange::LastOwner);
    }
    let updated = diesel::update(tenant_members::table.find((tenant_id, user_id)))
        .set((
            tenant_members::capability_set.eq(set),
            tenant_members::updated_at.eq(diesel::dsl::now),
        ))
        .returning(Member::as_returning())
        .get_result(conn)
        .await?;
    Ok(MemberChange::Done(updated))
}

/// Removes a member, never the last owner. Call in a transaction that holds the tenant
/// row `FOR UPDATE`.
pub async fn remove_member(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> Result<MemberChange, DbError> {
    let Some(member) = find_member(conn, tenant_id, user_id).await? else {
        return Ok(MemberChange::NotFound);
    };
    if member.capability_set == CapabilitySet::Owner
        && other_owners(conn, tenant_id, user_id).await? == 0
    {
        return Ok(MemberChange::LastOwner);
    }
    diesel::delete(tenant_members::table.find((tenant_id, user_id)))
        .execute(conn)
        .await?;
    Ok(MemberChange::Done(member))
}
