DROP INDEX IF EXISTS processing_jobs_queued_tenant_idx;
