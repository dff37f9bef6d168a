//! The enqueue rate limit of the tenant routes that enqueue jobs (upload, bulk
//! re-analyze and verify, retry): one statement against the tenant's budget in
//! PostgreSQL (`db::enqueue_budget`), shared by every API process, before the request
//! reads its body or writes anything. Over the rate: 429 problem+json with `Retry-After`.

use quire_shared::db::enqueue_budget::{self, Rate, Taken};
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

/// Takes `cost` jobs from the tenant's budget, or answers 429. `route` names the log's route.
pub async fn admit(
    state: &AppState,
    tenant_id: Uuid,
    cost: usize,
    route: &'static str,
) -> Result<(), ApiError> {
    let limit = state.settings.enqueue_limit;
    if limit.per_second <= 0 {
        return Ok(());
    }
    let default = Rate {
        per_second: limit.per_second,
        burst: limit.burst,
    };
    let cost = i32::try_from(cost).unwrap_or(i32::MAX);
    // Its own connection, given back at once: an upload must not hold one while its body
    // streams in.
    let taken = {
        let mut conn = state.connection().await?;
        enqueue_budget::take(&mut conn, tenant_id, cost, default).await?
    };
    match taken {
        Taken::Admitted => Ok(()),
        Taken::Refused { wait } => {
            tracing::debug!(%tenant_id, route, wait_ms = wait.as_millis() as u64, "enqueue rate limited");
            Err(ApiError::RateLimited {
                retry_after_seconds: wait.as_secs_f64().ceil().max(1.0) as u64,
            })
        }
    }
}
