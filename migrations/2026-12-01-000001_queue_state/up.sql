-- The queue's state as operators scrape it (quire_jobs, quire_outbox_events, lags, list
-- lengths, live workers): computed at most once per dispatcher.queue_state_interval_ms by
-- one dispatcher of the fleet (an advisory lock and the age of this row) and stored here,
-- so a scrape reads one row instead of counting the queue tables. One row at most.
CREATE TABLE queue_state_snapshot (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    state         jsonb NOT NULL,
    refreshed_at  timestamptz NOT NULL DEFAULT now(),
    -- Refreshes since the row was created, by any dispatcher: the fleet's refresh rate.
    refreshes     bigint NOT NULL DEFAULT 1 CHECK (refreshes >= 1)
);

-- Finished jobs by type and status are estimated from the planner's statistics, never
-- counted: a multivariate MCV list over (job_type, status), kept by ANALYZE (autovacuum).
CREATE STATISTICS processing_jobs_type_status_stats (mcv)
    ON job_type, status FROM processing_jobs;
