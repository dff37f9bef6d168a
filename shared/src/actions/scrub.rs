//! The integrity scrub (the `integrity-scrub` schedule): every stored version is
//! verified once per pass, a pass starts at most once per `scrub_days`, and each slot
//! walks at most `max_per_slot` versions by a cursor (the rate limit). The verify jobs
//! are bulk work (`NewJob::bulk`: the scheduler's bulk class, with its guaranteed share).

use std::collections::BTreeMap;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::jobs::{self, NewJob};
use crate::db::schedules::{self, ScrubbedVersion, Slot};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::jobs::VerifyDocument;
use crate::states::TenantStatus;

/// What one slot of the scrub asks for.
#[derive(Debug, Clone, Copy)]
pub struct Scrub {
    /// A pass starts at most this often.
    pub scrub_days: u32,
    /// Most versions one slot walks.
    pub max_per_slot: i64,
    /// `jobs.max_attempts`.
    pub configured_attempts: i32,
}

/// What one slot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scrubbed {
    /// The slot walked `walked` versions and queued a verify job for `queued` of them
    /// (the others' tenant is not active or their document is trashed; an active
    /// verify of a version counts as queued). `pass_done`: the walk reached the end.
    Walked {
        walked: usize,
        queued: usize,
        pass_done: bool,
    },
    /// The last pass is complete and the next is not due before this time.
    Idle {
        next_pass_at: Option<OffsetDateTime>,
    },
    /// A later slot was claimed meanwhile: this run did nothing.
    Superseded,
}

/// Walks the next versions of the scrub for `slot`, in ONE transaction with the
/// schedule's row locked: the jobs are enqueued and the cursor moves together, or
/// neither (a run that dies leaves the walk where it was, for the next slot).
pub async fn step(
    conn: &mut AsyncPgConnection,
    slot: &Slot,
    plan: &Scrub,
    request_id: Option<String>,
) -> Result<Scrubbed, ActionError> {
    let pass_every = Duration::from_secs(u64::from(plan.scrub_days) * 24 * 3600);
    conn.transaction::<_, ActionError, _>(async |conn| {
        let Some(walk) = schedules::lock_walk(conn, slot, pass_every).await? else {
            return Ok(Scrubbed::Superseded);
        };
        let (cursor, starts_pass) = match walk.cursor_id {
            Some(cursor) => (cursor, false),
            None if walk.pass_due => (Uuid::nil(), true),
            None => {
                return Ok(Scrubbed::Idle {
                    next_pass_at: walk.next_pass_at,
                });
            }
        };
        let page = schedules::versions_after(conn, cursor, plan.max_per_slot).await?;
        let mut by_tenant: BTreeMap<Uuid, Vec<&ScrubbedVersion>> = BTreeMap::new();
        for version in page.iter().filter(|version| version.verifiable) {
            by_tenant
                .entry(version.tenant_id)
                .or_default()
                .push(version);
        }
        let mut queued = 0;
        for (tenant_id, versions) in by_tenant {
            // A savepoint per tenant: one that is no longer active is skipped alone.
            let enqueued = conn
                .transaction::<_, ActionError, _>(async |conn| {
                    let tenant = TenantWrite {
                        tenant_id,
                        generation: None,
                    };
                    hold_tenant(conn, &tenant, TenantStatus::Active, TenantLock::Share).await?;
                    let mut enqueued = 0;
                    for version in versions {
                        let job = NewJob::new(
                            tenant_id,
                            VerifyDocument {
                                document_id: version.document_id,
                                document_version_id: version.version_id,
                            },
                            plan.configured_attempts,
                            request_id.clone(),
                        )
                        .bulk();
                        enqueued +=
                            usize::from(jobs::enqueue_or_active(conn, &job).await?.is_some());
                    }
                    Ok(enqueued)
                })
                .await;
            match enqueued {
                Ok(enqueued) => queued += enqueued,
                Err(ActionError::TenantRefused(_)) => {}
                Err(error) => return Err(error),
            }
        }
        let pass_done = page.len() < usize::try_from(plan.max_per_slot).unwrap_or(usize::MAX);
        let next = if pass_done {
            None
        } else {
            page.last().map(|version| version.version_id)
        };
        schedules::save_walk(conn, slot, next, starts_pass).await?;
        Ok(Scrubbed::Walked {
            walked: page.len(),
            queued,
            pass_done,
        })
    })
    .await
}
