DROP INDEX processing_jobs_one_active_tenant_job_idx;
DROP INDEX processing_jobs_one_active_verify_idx;
DROP TABLE used_nonces;
DROP TABLE search_indexes;
DROP TABLE tenant_members;
DROP TABLE capability_sets;
