//! Publication-claim recovery (DESIGN §5): a `PUBLISHING` claim older than
//! `claim_timeout` belongs to a dispatcher that died mid-batch; its events return to
//! `PENDING`. Idempotent, so every dispatcher runs it without a lock.

use std::time::Duration;

use anyhow::Context;
use quire_shared::db::{PgPool, outbox};

use super::Task;

pub struct ClaimRecovery {
    pool: PgPool,
    claim_timeout: Duration,
}

impl ClaimRecovery {
    pub fn new(pool: PgPool, claim_timeout: Duration) -> Self {
        Self {
            pool,
            claim_timeout,
        }
    }
}

impl Task for ClaimRecovery {
    /// Events returned to `PENDING`.
    type Report = usize;
    const NAME: &'static str = "claim-recovery";

    async fn run_once(&self) -> anyhow::Result<usize> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        let released = outbox::recover_expired_claims(&mut conn, self.claim_timeout)
            .await
            .context("failed to return expired publication claims")?;
        if released > 0 {
            tracing::warn!(
                count = released,
                "returned abandoned publication claims to pending"
            );
        }
        Ok(released)
    }
}
