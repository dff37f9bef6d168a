-- A tenant's enqueue rate limit on the API (jobs per second, and the burst it may take
-- at once), overriding `enqueue_limit.per_second` / `enqueue_limit.burst` from the
-- configuration when set. Constant (NULL) defaults: no table rewrite.
ALTER TABLE tenants
    ADD COLUMN enqueue_rate_per_second integer
        CHECK (enqueue_rate_per_second BETWEEN 1 AND 100000),
    ADD COLUMN enqueue_burst integer
        CHECK (enqueue_burst BETWEEN 1 AND 100000);

-- Each tenant's enqueue budget as one instant (GCRA's "theoretical arrival time"): a
-- request costing n jobs is admitted while greatest(tat, now()) + n/rate stays within
-- burst/rate of now(), and moves tat there. One row per tenant, written by one statement
-- per enqueueing request (`db::enqueue_budget::take`), so every API process shares it.
-- UNLOGGED: a crash forgets the budgets (every tenant starts with a full burst), which
-- is harmless, and no request waits for WAL to admit an upload. A table of its own: the
-- tenant row is held FOR SHARE by every write, and an UPDATE of it per upload would
-- wait for them all.
CREATE UNLOGGED TABLE tenant_enqueue_budgets (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    tat       timestamptz NOT NULL
);

-- The paused tenants, for the dashboard and the `quire_paused_tenants` gauge: a partial
-- index, so counting them never reads every tenant.
CREATE INDEX tenants_processing_paused ON tenants (processing_paused_at)
    WHERE processing_paused_at IS NOT NULL;
