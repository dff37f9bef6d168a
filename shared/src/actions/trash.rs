//! Emptying the trash (the `empty-trash` schedule): documents trashed longer than the
//! retention purge for good, through the same purge a DELETE of a trashed document
//! queues (`documents::queue_purge`). Bounded per slot and fair between tenants.

use std::collections::BTreeMap;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::documents::queue_purge;
use super::{ActionError, hold_tenant};
use crate::db::schedules;
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::jobs::{BackgroundJob, PurgeDocument};
use crate::states::TenantStatus;

/// What one slot of the trash emptying asks for.
#[derive(Debug, Clone, Copy)]
pub struct EmptyTrash {
    /// Days a document stays in the trash.
    pub trash_days: u32,
    /// Most purges one slot queues.
    pub max_per_slot: i64,
    /// `jobs.max_attempts`.
    pub configured_attempts: i32,
}

/// What one slot did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Emptied {
    /// Purge jobs queued.
    pub queued: usize,
    /// Tenants they belong to.
    pub tenants: usize,
    /// Documents found expired but left for a later slot: restored meanwhile, held by
    /// another transaction, or their tenant stopped being active.
    pub skipped: usize,
}

/// Queues a purge for at most `max_per_slot` documents trashed more than `trash_days`
/// ago, taken round-robin over the active tenants and skipping documents whose purge is
/// queued or running. Each tenant's share is queued in a transaction of its own that
/// holds the tenant (`hold_tenant`) and locks the documents, re-checked: a restore
/// between the look-up and the lock wins, and a tenant wiped meanwhile gets nothing.
pub async fn empty(
    conn: &mut AsyncPgConnection,
    plan: &EmptyTrash,
    request_id: Option<String>,
) -> Result<Emptied, ActionError> {
    let expired = schedules::expired_trash(
        conn,
        plan.trash_days,
        PurgeDocument::JOB_TYPE,
        plan.max_per_slot,
    )
    .await?;
    let mut by_tenant: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
    for row in &expired {
        by_tenant
            .entry(row.tenant_id)
            .or_default()
            .push(row.document_id);
    }
    let mut emptied = Emptied::default();
    for (tenant_id, ids) in by_tenant {
        let queued = conn
            .transaction::<_, ActionError, _>(async |conn| {
                let tenant = TenantWrite {
                    tenant_id,
                    generation: None,
                };
                hold_tenant(conn, &tenant, TenantStatus::Active, TenantLock::Share).await?;
                let locked =
                    schedules::lock_expired_trash(conn, tenant_id, &ids, plan.trash_days).await?;
                let mut queued = 0;
                for document_id in locked {
                    let job = queue_purge(
                        conn,
                        tenant_id,
                        document_id,
                        plan.configured_attempts,
                        request_id.clone(),
                    )
                    .await?;
                    queued += usize::from(job.is_some());
                }
                Ok(queued)
            })
            .await;
        let queued = match queued {
            Ok(queued) => queued,
            // The tenant was suspended or marked for deletion since the look-up.
            Err(ActionError::TenantRefused(_)) => 0,
            Err(error) => return Err(error),
        };
        emptied.skipped += ids.len().saturating_sub(queued);
        if queued > 0 {
            emptied.queued += queued;
            emptied.tenants += 1;
            tracing::info!(%tenant_id, purges = queued, "expired trash queued for purge");
        }
    }
    Ok(emptied)
}
