-- The queue-state refresh counts queued jobs by tenant and type (the per-tenant gauges,
-- and the per-type ones from the same groups) in one index-only scan of this index; the
-- queued state's other index (job_type, queued_at) has no tenant. Partial: a claim moves
-- a job out of it, so it holds the backlog only, never the history. On a large install,
-- create it CONCURRENTLY by hand first (migrations/README.md): this is then a no-op.
CREATE INDEX IF NOT EXISTS processing_jobs_queued_tenant_idx
    ON processing_jobs (tenant_id, job_type, queued_at)
    WHERE status = 'QUEUED';
