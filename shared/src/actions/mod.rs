//! Every action a user or operator can take, once. The HTTP routes, the `/ops`
//! dashboard and `quire-admin` call these functions and only translate their answers
//! (problem+json, a notice, a line on stdout), so the rules of an action — what it
//! checks, what it writes, in which transaction — live here and nowhere else.
//!
//! Each action takes a connection (or the pool and store it needs) and returns its
//! rows or an [`ActionError`] that says why it was refused, in words safe for a client.

pub mod documents;
pub mod idempotency;
pub mod jobs;
pub mod members;
pub mod ops_sessions;
pub mod scheduling;
pub mod scrub;
pub mod settings;
pub mod storage_migration;
pub mod tenants;
pub mod trash;
pub mod webhooks;

use diesel_async::AsyncPgConnection;

use crate::db::DbError;
use crate::db::tenants::{Refused, TenantLock, TenantWrite, lock_for_write};
use crate::signing::ProofError;
use crate::states::TenantStatus;

/// Why an action was refused (or failed). Every variant but `Db` is the caller's to
/// show; `Db` is internal and shows as "unavailable".
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// No such row in the caller's scope (a row of another tenant is missing too).
    #[error("not found")]
    NotFound,
    /// The row is not in a state that allows the action.
    #[error("{detail}")]
    Conflict {
        code: &'static str,
        detail: String,
        /// One member a client can act on without parsing `detail`: the row's
        /// `current_status`, or the `existing_document_id` of a duplicate.
        extension: Option<(&'static str, String)>,
    },
    /// The write names a version of the row (`If-Match`) that is not the current one:
    /// someone changed it since the caller read it; nothing was written.
    #[error("the document changed since it was read; read it again")]
    VersionMismatch,
    /// The request itself is not acceptable.
    #[error("{detail}")]
    Invalid { code: &'static str, detail: String },
    #[error("a tenant with this name exists already")]
    TenantNameTaken,
    #[error("the request names another tenant")]
    TenantNameMismatch,
    #[error("the tenant is {0}; this needs another state")]
    TenantState(TenantStatus),
    #[error("a lifecycle job of this tenant is queued or running already")]
    TenantJobActive,
    #[error("the nonce was used before")]
    NonceReplayed,
    /// The tenant does not take this write now: it was suspended, reset or deleted
    /// while the request was on its way (the state it is in then; `None`: it is gone).
    #[error(transparent)]
    TenantRefused(#[from] Refused),
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Every write to a tenant's data calls this first, inside its own transaction: it locks
/// the tenant row until the transaction ends and refuses the write unless the tenant is
/// in `required` state and in the generation its caller was let in by
/// (`TenantWrite::admits`). A state change waits for the write to commit (so a wipe sees
/// its rows), or the write waits for the state change and is refused: a write never
/// lands after a wipe. (`db::intake::record` does the same inside its one statement.)
pub(crate) async fn hold_tenant(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    required: TenantStatus,
    lock: TenantLock,
) -> Result<(), ActionError> {
    match lock_for_write(conn, tenant.tenant_id, lock).await? {
        Some((status, generation)) if tenant.admits(status, generation, required) => Ok(()),
        held => Err(Refused(held.map(|(status, _)| status)).into()),
    }
}

impl From<diesel::result::Error> for ActionError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error.into())
    }
}

impl ActionError {
    pub(crate) fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::Conflict {
            code,
            detail: detail.into(),
            extension: None,
        }
    }

    /// A conflict that names the state the row is in.
    pub(crate) fn wrong_status(code: &'static str, detail: String, status: &str) -> Self {
        Self::Conflict {
            code,
            detail,
            extension: Some(("current_status", status.to_owned())),
        }
    }

    /// The `current_status` a conflict names, if it names one.
    pub fn current_status(&self) -> Option<&str> {
        match self {
            Self::Conflict {
                extension: Some(("current_status", status)),
                ..
            } => Some(status),
            _ => None,
        }
    }
}
