-- At most one active purge per document: a second DELETE returns the first purge.
CREATE UNIQUE INDEX processing_jobs_one_active_purge_idx
    ON processing_jobs (document_id)
    WHERE job_type = 'purge-document' AND status IN ('QUEUED', 'RUNNING');
