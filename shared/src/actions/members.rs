//! Managing a tenant's members: add, change a member's capability set, remove. A tenant
//! always keeps an owner: the last one can be neither demoted nor removed. Each is one
//! transaction that first holds the tenant row (`hold_tenant`: the tenant must still be
//! active and in the caller's generation); a change or removal holds it `FOR UPDATE`, so
//! two owners demoting each other cannot both succeed.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::members::{self, Member, MemberChange};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::permissions::CapabilitySet;
use crate::states::TenantStatus;

/// A member's answer as an action's.
fn changed(change: MemberChange) -> Result<Member, ActionError> {
    match change {
        MemberChange::Done(member) => Ok(member),
        MemberChange::NotFound => Err(ActionError::NotFound),
        MemberChange::AlreadyMember => Err(ActionError::conflict(
            "already_member",
            "the user is a member of this tenant already",
        )),
        MemberChange::LastOwner => Err(ActionError::conflict(
            "last_owner",
            "a tenant keeps at least one owner",
        )),
    }
}

/// Adds `user_id` with `set` (`already_member` when they are one).
pub async fn add(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    user_id: Uuid,
    set: CapabilitySet,
) -> Result<Member, ActionError> {
    let tenant_id = tenant.tenant_id;
    let member = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await?;
            changed(members::add_member(conn, tenant_id, user_id, set).await?)
        })
        .await?;
    tracing::info!(%tenant_id, %user_id, capability_set = ?set, "member added");
    Ok(member)
}

/// Gives a member another capability set (`last_owner` for the last owner's demotion).
pub async fn change(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    user_id: Uuid,
    set: CapabilitySet,
) -> Result<Member, ActionError> {
    let tenant_id = tenant.tenant_id;
    let member = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Update).await?;
            changed(members::change_member_set(conn, tenant_id, user_id, set).await?)
        })
        .await?;
    tracing::info!(%tenant_id, %user_id, capability_set = ?set, "member changed");
    Ok(member)
}

/// Removes a member (`last_owner` for the last owner).
pub async fn remove(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    user_id: Uuid,
) -> Result<Member, ActionError> {
    let tenant_id = tenant.tenant_id;
    let member = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Update).await?;
            changed(members::remove_member(conn, tenant_id, user_id).await?)
        })
        .await?;
    tracing::info!(%tenant_id, %user_id, "member removed");
    Ok(member)
}
