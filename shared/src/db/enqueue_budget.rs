//! The API's enqueue rate limit per tenant, kept in PostgreSQL so that every API process
//! shares it: one row per tenant in `tenant_enqueue_budgets` (UNLOGGED) holding GCRA's
//! "theoretical arrival time", moved by ONE statement per enqueueing request. See
//! docs/decisions.md, "Enqueue rate limit".

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Bool, Float8, Int4, Nullable, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::prepared::Prepared;

/// A rate: `per_second` jobs on average, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: i32,
    pub burst: i32,
}

/// What the budget said.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Taken {
    Admitted,
    /// Over the rate: nothing was taken; the budget holds `cost` again after `wait`.
    Refused {
        wait: Duration,
    },
}

#[derive(QueryableByName)]
struct TakenRow {
    #[diesel(sql_type = Bool)]
    admitted: bool,
    #[diesel(sql_type = Nullable<Float8>)]
    wait_seconds: Option<f64>,
}

/// Takes `cost` jobs from the tenant's budget, or refuses and says how long until it
/// could. The tenant's own rate (`tenants.enqueue_rate_per_second`, `enqueue_burst`)
/// overrides `default`; a cost above the burst costs the burst (a bulk request that
/// fits no budget could never pass otherwise). Race-free across processes: the row's
/// lock orders concurrent requests and the `DO UPDATE … WHERE` re-checks the latest
/// budget. Commits asynchronously (a crash forgets a few takes: harmless). A tenant
/// that does not exist is admitted: the write itself refuses it.
pub async fn take(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    cost: i32,
    default: Rate,
) -> Result<Taken, DbError> {
    let row = diesel::sql_query(
        "WITH relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)), \
         p AS MATERIALIZED ( \
             SELECT t.id, COALESCE(t.enqueue_rate_per_second, $3)::float8 AS rate, \
                    least($2, COALESCE(t.enqueue_burst, $4))::float8 AS cost, \
                    COALESCE(t.enqueue_burst, $4)::float8 AS burst \
             FROM tenants AS t, relaxed WHERE t.id = $1), \
         before AS (SELECT tat FROM tenant_enqueue_budgets WHERE tenant_id = $1), \
         taken AS ( \
             INSERT INTO tenant_enqueue_budgets AS b (tenant_id, tat) \
             SELECT p.id, now() + p.cost / p.rate * interval '1 second' FROM p \
             ON CONFLICT (tenant_id) DO UPDATE \
             SET tat = greatest(b.tat, now()) + (SELECT cost / rate FROM p) * interval '1 second' \
             WHERE greatest(b.tat, now()) \
                   + (SELECT (cost - burst) / rate FROM p) * interval '1 second' <= now() \
             RETURNING b.tenant_id) \
         SELECT NOT EXISTS (SELECT 1 FROM p) OR EXISTS (SELECT 1 FROM taken) AS admitted, \
                (SELECT extract(epoch FROM greatest(before.tat, now()) \
                        + (p.cost - p.burst) / p.rate * interval '1 second' - now())::float8 \
                 FROM before, p) AS wait_seconds",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Int4, _>(cost.max(1))
    .bind::<Int4, _>(default.per_second.max(1))
    .bind::<Int4, _>(default.burst.max(1))
    .prepared()
    .get_result::<TakenRow>(conn)
    .await?;
    if row.admitted {
        return Ok(Taken::Admitted);
    }
    metrics::counter!(crate::metrics::ENQUEUE_RATE_LIMITED).increment(1);
    // The budget as this statement's snapshot saw it; a concurrent take may have moved
    // it since, so the wait is a hint of at least a moment.
    let wait = row.wait_seconds.unwrap_or(1.0).clamp(0.001, 86_400.0);
    Ok(Taken::Refused {
        wait: Duration::from_secs_f64(wait),
    })
}
